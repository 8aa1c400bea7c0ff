"""Build, grade and check the nbgrader course (the commands of `python -m pingpong_lab.grader`):

    release     exercises/ and solutions/ from course/source
    autograde   grade course/submitted/* as a class (classgrade), feedback included
    solutions   run the solutions, HTML in build/solutions-html
    check       exit 1 if exercises/ or solutions/ drifted from course/source

Only course/source is ever edited. `release` runs `nbgrader generate_assignment` (which also
records the assignments and their hidden tests in course/gradebook.db, needed by autograde) and
`nbgrader generate_solution` for every assignment, and copies the results to
../exercises/<NN_topic>/ and ../solutions/<NN_topic>/ with volatile metadata stripped, so
that regenerating an unchanged source gives byte-identical files.

The nbgrader preprocessor that gives C cells a C stub is in course/preprocessors.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import runtime
from . import classgrade, gradebook, sandbox

# -- notebooks --------------------------------------------------------------------------------
VOLATILE_CELL_KEYS = (
    "execution",
    "ExecuteTime",
    "collapsed",
    "scrolled",
    "jp-MarkdownHeadingCollapsed",
)
KEPT_NOTEBOOK_KEYS = ("kernelspec", "language_info")


def normalise_notebook(path: Path) -> None:
    """Rewrite a notebook without volatile metadata, in one canonical JSON layout."""
    nb = json.loads(Path(path).read_text())
    meta = nb.get("metadata", {})
    kept = {k: meta[k] for k in KEPT_NOTEBOOK_KEYS if k in meta}
    if "language_info" in kept:  # the Python version etc. differ between machines
        kept["language_info"] = {"name": kept["language_info"].get("name", "python")}
    nb["metadata"] = kept
    for cell in nb.get("cells", []):
        for key in VOLATILE_CELL_KEYS:
            cell.get("metadata", {}).pop(key, None)
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    Path(path).write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def assignments(course: Path) -> list[str]:
    """Assignment names: source/<NN_topic>/ folders holding <NN_topic>.ipynb, sorted."""
    src = Path(course) / "source"
    return (
        sorted(
            d.name
            for d in src.iterdir()
            if d.is_dir() and re.match(r"^\d\d_", d.name) and (d / f"{d.name}.ipynb").is_file()
        )
        if src.is_dir()
        else []
    )


def nbgrader(course: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run `nbgrader <args>` in the course directory with this Python."""
    runtime.own_tools_on_path()  # nbgrader runs alembic by name
    cmd = [sys.executable, "-m", "nbgrader", *args]
    proc = subprocess.run(cmd, cwd=course, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"`nbgrader {' '.join(args)}` failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def _copy_tree(src: Path, dest: Path) -> None:
    """Replace dest by a copy of src; notebooks normalised, build products left out."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for item in sorted(src.rglob("*")):
        rel = item.relative_to(src)
        if any(part in (".ipynb_checkpoints", "__pycache__") for part in rel.parts):
            continue
        if item.suffix in (".so", ".o", ".pyc"):
            continue
        target = dest / rel
        if item.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(item, target)
        if target.suffix == ".ipynb":
            normalise_notebook(target)


def generate(course: Path, exercises: Path, solutions: Path, names=None) -> list[str]:
    """generate_assignment + generate_solution for every assignment, copied out normalised.

    One nbgrader call per step for all assignments ("*"): nbgrader's start-up costs seconds.
    """
    course = Path(course).resolve()
    everything = names is None
    names = list(names or assignments(course))
    targets = ["*"] if everything else names
    for target in targets:
        nbgrader(course, "generate_assignment", target, "--force", "--log-level=WARN")
        nbgrader(course, "generate_solution", target, "--force", "--log-level=WARN")
    for name in names:
        _copy_tree(course / "release" / name, Path(exercises) / name)
        _copy_tree(course / "solution" / name, Path(solutions) / name)
    shutil.rmtree(course / "solution", ignore_errors=True)
    return names


def _stale_outputs(course: Path) -> list[str]:
    bad = []
    for name in assignments(course):
        nb = json.loads((course / "source" / name / f"{name}.ipynb").read_text())
        for i, cell in enumerate(nb["cells"]):
            if cell.get("cell_type") == "code" and (
                cell.get("outputs") or cell.get("execution_count")
            ):
                bad.append(f"{name}.ipynb cell {i}")
    return bad


def _tree_files(root: Path) -> dict[str, bytes]:
    if not root.is_dir():
        return {}
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".ipynb_checkpoints" not in p.parts
    }


def compare_generated(fresh: Path, repo: Path, names) -> list[str]:
    """Differences between generated fresh/{exercises,solutions}/ and the committed repo/ ones."""
    problems = []
    for kind in ("exercises", "solutions"):
        for name in names:
            new = _tree_files(Path(fresh) / kind / name)
            committed = _tree_files(Path(repo) / kind / name)
            for rel in sorted(set(new) | set(committed)):
                if new.get(rel) != committed.get(rel):
                    state = (
                        "missing"
                        if rel not in committed
                        else ("extra" if rel not in new else "differs")
                    )
                    problems.append(f"{kind}/{name}/{rel} {state}")
        known = (
            {p.name for p in (Path(repo) / kind).iterdir() if p.is_dir()}
            if (Path(repo) / kind).is_dir()
            else set()
        )
        for extra in sorted(known - set(names)):
            problems.append(f"{kind}/{extra} has no source in course/source")
    return problems


def drift(course: Path) -> list[str]:
    """Differences between committed exercises/, solutions/ and a fresh generation."""
    course = Path(course).resolve()
    problems = [f"source notebook has outputs: {where}" for where in _stale_outputs(course)]
    with tempfile.TemporaryDirectory(prefix="course-check-") as tmp:
        tmp_course = Path(tmp) / "course"
        shutil.copytree(course / "source", tmp_course / "source")
        shutil.copy(course / "nbgrader_config.py", tmp_course / "nbgrader_config.py")
        names = generate(tmp_course, Path(tmp) / "exercises", Path(tmp) / "solutions")
        problems += compare_generated(Path(tmp), course.parent, names)
    return problems


# -- commands ---------------------------------------------------------------------------------
def cmd_release(course: Path) -> int:
    start = time.perf_counter()
    names = generate(course, course.parent / "exercises", course.parent / "solutions")
    for name in names:
        print(f"released {name}: exercises/{name}/, solutions/{name}/")
    print(f"done in {time.perf_counter() - start:.0f} s")
    return 0


def submissions(course: Path) -> dict[str, list[str]]:
    """assignment -> students with a submission in course/submitted/<student>/<assignment>/."""
    found: dict[str, list[str]] = {}
    sub = course / "submitted"
    if not sub.is_dir():
        return found
    for student in sorted(p for p in sub.iterdir() if p.is_dir()):
        for assignment in sorted(p for p in student.iterdir() if p.is_dir()):
            found.setdefault(assignment.name, []).append(student.name)
    return found


def students_to_grade(course: Path, out=sys.stdout) -> tuple[dict[str, list[str]], list[str]]:
    """({student: [assignment, ...]}, the assignments submitted) for course/submitted/;
    a submitted folder with no assignment of that name in course/source is skipped, saying so."""
    todo = submissions(course)
    known = set(assignments(course))
    for name in sorted(set(todo) - known):
        print(f"skipping submitted/*/{name}: no such assignment in course/source", file=out)
    students: dict[str, list[str]] = {}
    for name, who in sorted(todo.items()):
        for student in who if name in known else ():
            students.setdefault(student, []).append(name)
    return students, sorted(known & set(todo))


def cmd_autograde(course: Path, jobs: int | None = None) -> int:
    """Grade every submission in course/submitted/, `jobs` students at a time (classgrade)."""

    students, graded = students_to_grade(course)
    if not students:
        print("nothing in course/submitted/<student>/<assignment>/ to grade")
        return 0
    jobs = jobs or classgrade.default_jobs()
    print(f"grading {len(students)} submission(s), {jobs} at a time")
    start = time.perf_counter()
    outcomes = classgrade.grade_class(course, students, jobs)
    classgrade.report(outcomes, time.perf_counter() - start)
    classgrade.write_summary(course / "class-grading.csv", outcomes, graded, course)
    print("per-student scores: course/class-grading.csv; feedback in course/feedback/")
    for name, student, score, max_score in gradebook.scores(course):
        print(f"  {name:<16} {student:<20} {score:6.1f} / {max_score:g}")
    return 1 if any(o.status != "ok" for o in outcomes) else 0


def cmd_solutions(course: Path) -> int:
    """Execute every solution notebook and write it as HTML (with its figures)."""
    out_dir = course.parent / "build" / "solutions-html"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in assignments(course):
        src = course.parent / "solutions" / name / f"{name}.ipynb"
        if not src.is_file():
            print(f"no {src}: run `release` first")
            return 1
        with tempfile.TemporaryDirectory(prefix=f"solution-{name}-") as tmp:
            shutil.copytree(src.parent, tmp, dirs_exist_ok=True)
            cmd = _execute_cmd(Path(tmp) / src.name, "html", out_dir)
            start = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print(proc.stderr[-3000:])
                return proc.returncode
        print(f"{name}: {out_dir / (name + '.html')} ({time.perf_counter() - start:.0f} s)")
    return 0


def time_grading(course: Path, student: str = "timing") -> dict:
    """Grade the solution notebooks as one student's submission, in a scratch course copy.

    Returns {"autograde_s", "notebooks", "score", "max_score"}: the wall time of grading one
    whole submission as `make autograde JOBS=1` does (sandbox, every notebook executed in
    grading mode, feedback).
    """

    course = Path(course).resolve()
    with tempfile.TemporaryDirectory(prefix="pingpong-lab-grading-") as tmp:
        work = Path(tmp) / "course"
        shutil.copytree(course / "source", work / "source")
        shutil.copy(course / "nbgrader_config.py", work / "nbgrader_config.py")
        names = assignments(work)
        nbgrader(work, "generate_assignment", "*", "--force", "--log-level=WARN")
        for name in names:
            shutil.copytree(course.parent / "solutions" / name, work / "submitted" / student / name)
        isolate = sandbox.problem() is None
        timeout = classgrade.SUBMISSION_TIMEOUT_S
        outcome = classgrade.grade_one(work, student, names, timeout, isolate)
        if outcome.status != "ok":
            raise RuntimeError(f"grading the solutions {outcome.status}: {outcome.why}")
        elapsed = outcome.seconds
        graded = gradebook.scores(work)
    return {
        "autograde_s": elapsed,
        "notebooks": len(names),
        "score": sum(row[2] for row in graded),
        "max_score": sum(row[3] for row in graded),
    }


def time_class_grading(course: Path, count: int, jobs: list[int], names=("01_pingpong",)) -> dict:
    """Seconds to grade `count` copies of the solutions of `names` as a class, for each `jobs`
    (names=None: every assignment, a full submission each).

    The throughput of `make autograde JOBS=N` (benchmark, not test): a scratch course copy,
    `count` students who each submit the solution notebooks, graded once per entry of `jobs`.
    Returns {"count", "notebook", "seconds": {jobs: s}, "scores_ok": bool, "short": [...],
    "survivors": [...]}: scores_ok when every student has every autograded point, short a line
    per student and notebook that has not (and why), survivors the processes still running in
    the scratch course after each run (none expected).
    """
    course = Path(course).resolve()
    names = list(names or assignments(course))
    label = names[0] if len(names) == 1 else f"{len(names)} notebooks"
    out: dict = {"count": count, "notebook": label, "seconds": {}, "scores_ok": True}
    out["survivors"] = []
    with tempfile.TemporaryDirectory(prefix="pingpong-lab-class-") as tmp:
        work = Path(tmp) / "course"
        for name in names:
            shutil.copytree(course / "source" / name, work / "source" / name)
        shutil.copy(course / "nbgrader_config.py", work / "nbgrader_config.py")
        nbgrader(work, "generate_assignment", "*", "--force", "--log-level=WARN")
        students = {f"student{k:03d}": names for k in range(count)}
        for student in students:
            for name in names:
                solution = course.parent / "solutions" / name
                shutil.copytree(solution, work / "submitted" / student / name)
        full = _autograded_points(work, names)
        for n in jobs:
            start = time.perf_counter()
            outcomes = classgrade.grade_class(work, students, n)
            out["seconds"][n] = time.perf_counter() - start
            short = [
                f"{o.student} {a}: {o.scores.get(a, (None,))[0]} of {full[a]} ({o.status})"
                for o in outcomes
                for a in names
                if o.status != "ok" or o.scores.get(a, (None,))[0] != full[a]
            ]
            out["short"] = out.get("short", []) + short  # who lost points where, if anyone did
            out["scores_ok"] = out["scores_ok"] and not short
            out["survivors"] += processes_under(Path(tmp))
    return out


def _autograded_points(course: Path, names) -> dict[str, float]:
    """assignment -> the points autograde can give (the tests' points, not those by hand)."""
    from nbgrader.api import Gradebook

    points = {}
    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        for name in names:
            nb_points = 0.0
            for notebook in gb.find_assignment(name).notebooks:
                for cell in notebook.grade_cells:
                    solution = any(s.name == cell.name for s in notebook.solution_cells)
                    if cell.cell_type == "code" and not solution:
                        nb_points += cell.max_score
            points[name] = nb_points
    return points


def processes_under(folder: Path, wait_s: float = 10.0) -> list[str]:
    """Processes (not zombies) still working in `folder` after up to wait_s seconds."""
    import psutil

    deadline = time.monotonic() + wait_s
    while True:
        left = []
        for proc in psutil.process_iter(["pid", "cmdline", "status", "cwd"]):
            cwd = proc.info["cwd"] or ""
            if proc.info["status"] != psutil.STATUS_ZOMBIE and cwd.startswith(str(folder)):
                left.append(f"{proc.pid}: {' '.join(proc.info['cmdline'] or [])[:100]}")
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def time_notebooks(course: Path) -> dict[str, float]:
    """Seconds to execute each solution notebook top to bottom in grading mode."""
    course = Path(course).resolve()
    env = {**os.environ, "PINGPONG_LAB_GRADING": "1"}
    out = {}
    for name in assignments(course):
        src = course.parent / "solutions" / name
        with tempfile.TemporaryDirectory(prefix=f"pingpong-lab-run-{name}-") as tmp:
            shutil.copytree(src, tmp, dirs_exist_ok=True)
            cmd = _execute_cmd(Path(tmp) / f"{name}.ipynb", "notebook", Path(tmp))
            cmd += ["--output", "executed.ipynb"]
            start = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                raise RuntimeError(f"{name} failed to execute:\n{proc.stderr[-2000:]}")
            out[name] = time.perf_counter() - start
    return out


def _cell_timeout() -> int:
    return 600


def _execute_cmd(notebook: Path, to: str, out_dir: Path) -> list[str]:
    """nbconvert: execute `notebook` top to bottom and write it as `to` into out_dir."""
    return [
        sys.executable,
        "-m",
        "jupyter",
        "nbconvert",
        "--to",
        to,
        "--execute",
        f"--ExecutePreprocessor.timeout={_cell_timeout()}",
        "--output-dir",
        str(out_dir),
        str(notebook),
    ]


def cmd_check(course: Path) -> int:
    problems = drift(course)
    for line in problems:
        print(line)
    if problems:
        print("exercises/ or solutions/ differ from course/source: run `make release`")
        return 1
    print("exercises/ and solutions/ match course/source")
    return 0
