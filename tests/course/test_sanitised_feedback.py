"""What a learner wrote reaches the feedback and Formgrader inert (real nbgrader, real exporter).

A scratch course with the repository's nbgrader_config.py holds one small assignment: course
text with a table and math, a code answer and its test, a written answer graded by hand
(nbgrader's manually graded answer) and a task with a mark scheme followed by a plain answer
cell. A learner submits it with attacks in both written answers (script, event handlers,
javascript: links, iframe, svg, style, raw HTML) and, in cells of their own, code whose outputs
are HTML, SVG, JavaScript and markdown with attacks, a matplotlib plot and an error. nbgrader
generates the assignment, autogrades the submission and writes its feedback; the autograded
notebook is also rendered by an HTMLExporter built the way Formgrader builds the one it grades
with (and, where the lab can be started, fetched from Formgrader itself). In every page no
script of the learner's is left, while their table, math, plot, code and traceback still show,
and the course's own notebooks render exactly as they do without the cleaning.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

from ..conftest import requires_mpi
from .submissions import grading_env, notebook, processes_left, submit_notebook

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "course"
NAME = "sanitise_probe"
STUDENT = "mallory"

pytestmark = [pytest.mark.nbgrader, pytest.mark.timeout(300)]

# every attack shows itself with alert(<n>), so what is left of one can be traced back to it
MARKDOWN_ATTACKS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    "[a link](javascript:alert(3))",
    "[another](  JaVaScRiPt:alert(4))",
    '<a href="java&#x09;script:alert(5)">entity link</a>',
    '<iframe src="javascript:alert(6)"></iframe>',
    "<svg onload=alert(7)><circle r=5 /></svg>",
    '<div onmouseover="alert(8)" style="position:fixed;top:0;left:0;width:100%">cover</div>',
    "<style>body { background: url(javascript:alert(9)) }</style>",
    '<object data="javascript:alert(10)"></object><embed src="javascript:alert(11)">',
    '<form action="javascript:alert(12)"><button>go</button></form>',
    '<a href="data:text/html,<script>alert(13)</script>">data link</a>',
    "![img](javascript:alert(14))",
    '<details open ontoggle="alert(15)"><summary>more</summary>x</details>',
    '<input class="score tabbable" onfocus="alert(16)" autofocus>',
    '<math><mi xlink:href="javascript:alert(17)">m</mi></math>',
    '<span class="btn btn-success full-credit">Full credit</span>',
]
HTML_OUTPUT = '<b>bold html</b><script>alert(20)</script><img src=x onerror="alert(21)">'
SVG_OUTPUT = (
    '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(22)"><script>alert(23)</script></svg>'
)
JS_OUTPUT = "alert(24)"
MARKDOWN_OUTPUT = "**md output** <script>alert(25)</script> [x](javascript:alert(26))"
RAW_HTML_CELL = "<script>alert(27)</script><p>raw cell</p>"

# what a good answer may hold, and must still show
LEGIT = """\
My numbers, in a table:

| size | one-way time |
|:-----|-------------:|
| 8 B | 1.2 µs |
| 1 MiB | 95 µs |

The fit $T(b) = \\alpha + \\beta b$ gives $\\alpha < 2$ µs, and
$$\\frac{1}{\\beta} \\approx 10\\ \\text{GB/s}$$

<details><summary>LEGIT-DETAILS</summary>log<sub>2</sub> of the size, x<sup>2</sup></details>

```python
print(fit(nbytes, t) < 3)
```

See [the MPI standard](https://www.mpi-forum.org/docs/) and ![a dot](data:image/png;base64,PNG)
"""
# a 1x1 PNG
TINY_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9"
    "awAAAABJRU5ErkJggg=="
)
MARK_SCHEME = "MARK-SCHEME-TEXT: full marks for naming the eager limit."


def _source() -> nbformat.NotebookNode:
    """The assignment as the instructor writes it (course/source)."""

    def meta(grade_id, *, grade=False, solution=False, locked=False, task=False, points=None):
        m = {
            "grade": grade,
            "grade_id": grade_id,
            "locked": locked,
            "schema_version": 3,
            "solution": solution,
            "task": task,
        }
        if points is not None:
            m["points"] = points
        return {"nbgrader": m}

    v4 = nbformat.v4
    nb = v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    nb.cells = [
        v4.new_markdown_cell(
            "# COURSE-HEADER: a probe\n\nCourse text, with a table:\n\n| a | b |\n|---|---|\n"
            "| COURSE-CELL | 2 |\n\nand math: $t = \\alpha + \\beta n$ for n < 2.\n"
        ),
        v4.new_code_cell(
            "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n",
            metadata=meta("double", solution=True),
        ),
        v4.new_code_cell(
            '"""double() doubles."""\nassert double(2) == 4\n',
            metadata=meta("test_double", grade=True, locked=True, points=1),
        ),
        v4.new_markdown_cell(
            "**Explain** (2 points, graded by hand) what you measured.\n\n"
            f"=== BEGIN MARK SCHEME ===\n{MARK_SCHEME}\n=== END MARK SCHEME ===\n",
            metadata=meta("rubric_explain", locked=True, task=True, points=0),
        ),
        v4.new_markdown_cell(
            "The eager limit.", metadata=meta("explain", grade=True, solution=True, points=2)
        ),
        v4.new_markdown_cell(
            "**Defend** (1 point) your numbers.",
            metadata=meta("defend", locked=True, task=True, points=1),
        ),
        v4.new_markdown_cell("*My answer:* "),
    ]
    return nb


def _submission(release: dict) -> dict:
    """The release, answered by a learner who attacks whoever reads it."""
    v4 = nbformat.v4
    nb = nbformat.reads(json.dumps(release), as_version=4)
    attacks = "\n\n".join(MARKDOWN_ATTACKS)
    legit = LEGIT.replace("PNG", TINY_PNG)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid == "double":
            cell.source = "def double(x):\n    return 2 * x\n"
        elif gid == "explain":
            cell.source = "LEARNER-ANSWER-1\n\n" + legit + "\n" + attacks
        elif cell.source == "*My answer:* ":
            cell.source = "*My answer:* LEARNER-ANSWER-2\n" + "".join(MARKDOWN_ATTACKS)
    nb.cells += [
        v4.new_code_cell(
            "import matplotlib.pyplot as plt\n\n"
            'plt.plot([1, 2, 3], [1, 4, 9], label="LEARNER-PLOT")\nplt.show()\n'
        ),
        v4.new_code_cell("1 / 0\n"),
        # the audit refuses this import (after every test cell, so no score changes); the cell
        # still runs, and its outputs are what the pages must show inert
        v4.new_code_cell(
            "from IPython.display import HTML, SVG, Javascript, Markdown, display\n\n"
            f"display(HTML({HTML_OUTPUT!r}))\ndisplay(SVG({SVG_OUTPUT!r}))\n"
            f"display(Javascript({JS_OUTPUT!r}))\ndisplay(Markdown({MARKDOWN_OUTPUT!r}))\n"
        ),
        v4.new_raw_cell(RAW_HTML_CELL, metadata={"raw_mimetype": "text/html"}),
    ]
    return nb


def _nbgrader(course: Path, env: dict, *args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """The probe assignment generated, submitted, autograded and its feedback written."""
    root = tmp_path_factory.mktemp("sanitised-feedback")
    course = root / "course"
    (course / "source" / NAME).mkdir(parents=True)
    shutil.copy(COURSE / "nbgrader_config.py", course / "nbgrader_config.py")
    nbformat.write(_source(), course / "source" / NAME / f"{NAME}.ipynb")
    tag, env = grading_env(root)
    # nbgrader runs alembic, jupyter runs its kernels: from this interpreter's environment
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    _nbgrader(course, env, "generate_assignment", NAME)
    release = notebook(course / "release" / NAME / f"{NAME}.ipynb")
    assert MARK_SCHEME not in json.dumps(release)
    submit_notebook(course, STUDENT, NAME, _submission(release))
    _nbgrader(course, env, "autograde", NAME)
    _nbgrader(course, env, "generate_feedback", NAME)
    yield {
        "root": root,
        "course": course,
        "env": env,
        "autograded": course / "autograded" / STUDENT / NAME / f"{NAME}.ipynb",
        "feedback": (course / "feedback" / STUDENT / NAME / f"{NAME}.html").read_text(),
    }
    assert processes_left(tag) == []


def _formgrader_exporter(course: Path):
    """The HTMLExporter Formgrader grades with: FormgradeExtension's config, read from the
    course folder as the instructor lab (`make instructor`, started in course/) reads it."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader.formgrader import FormgradeExtension

    here = os.getcwd()
    os.chdir(course)
    try:
        formgrader = FormgradeExtension()
        formgrader.initialize([])
        return HTMLExporter(config=formgrader.config)
    finally:
        os.chdir(here)


def _formgrade(course: Path, filename: Path) -> str:
    """The page of SubmissionHandler.get for the notebook `filename`."""
    resources = {
        "assignment_id": NAME,
        "notebook_id": NAME,
        "submission_id": "0123",
        "index": 0,
        "total": 1,
        "base_url": "",
        "student": STUDENT,
        "last_name": None,
        "first_name": None,
        "notebook_path": f"/autograded/{STUDENT}/{NAME}/{NAME}.ipynb",
    }
    html, _ = _formgrader_exporter(course).from_filename(str(filename), resources=resources)
    return html


@pytest.fixture(scope="module")
def formgrader_page(probe):
    return _formgrade(probe["course"], probe["autograded"])


# --- what "inert" means ------------------------------------------------------------------

_URL_ATTRIBUTES = {"href", "src", "action", "formaction", "data", "xlink:href", "background"}
# where the learner's content is: script and style there are never the page's own
_ACTIVE_TAGS = {"script", "style", "iframe", "frame", "object", "embed", "svg", "math", "form"}
_ACTIVE_TAGS |= {"input", "button", "textarea", "select", "link", "meta", "base"}


def live(html: str) -> list[str]:
    """Everything in a page that could run a learner's script (or act for them), as text."""
    soup = BeautifulSoup(html, "html.parser")
    found = []
    for script in soup.find_all("script"):
        if "alert" in script.get_text() or "alert" in str(script.get("src", "")):
            found.append(f"script: {script}"[:200])
    container = soup.select("div.text_cell_render, div.output_area, div.output_subarea")
    for part in container:
        for el in part.find_all(True):
            if el.name in _ACTIVE_TAGS:
                found.append(f"<{el.name}> in a cell: {el}"[:200])
    for el in soup.find_all(True):
        in_cell = el.find_parent("div", class_="cell") is not None
        for name, value in el.attrs.items():
            value = " ".join(value) if isinstance(value, list) else str(value)
            # the page's own handlers (Formgrader's name toggle) are outside the cells
            if name.lower().startswith("on") and (in_cell or "alert" in value):
                found.append(f"handler {name}={value!r} on <{el.name}>")
            if name.lower() in _URL_ATTRIBUTES:
                url = re.sub(r"[\x00-\x20]+", "", value).lower()
                if url.startswith(("javascript:", "vbscript:", "data:text")):
                    found.append(f"{name}={value!r} on <{el.name}>")
                if url.startswith("data:image/svg") and el.name != "img":
                    found.append(f"svg data in {name} of <{el.name}>")
            if name == "class" and el.find_parent(class_="text_cell_render"):
                if {"score", "full-credit", "tabbable"} & set(value.split()):
                    found.append(f"Formgrader's class {value!r} on a learner's <{el.name}>")
    return found


def _text(html: str) -> str:
    return BeautifulSoup(html, "html.parser").get_text()


# --- the feedback and the Formgrader page --------------------------------------------------

PAGES = ["feedback", "formgrader"]


@pytest.fixture(params=PAGES)
def page(request, probe):
    if request.param == "feedback":
        return probe["feedback"]
    return request.getfixturevalue("formgrader_page")


def test_no_script_of_the_learner_is_live(page):
    assert live(page) == []


def test_the_attacks_show_as_text_the_reader_can_see(page):
    text = _text(page)
    assert "LEARNER-ANSWER-1" in text and "LEARNER-ANSWER-2" in text
    assert "<script>alert(1)</script>" in text  # escaped in the HTML, so visible
    assert "<iframe" in text and "<style>" in text
    assert "alert(20)" in text and "bold html" in text  # the HTML output, escaped script
    assert "alert(25)" in text and "md output" in text


def test_the_learners_table_math_plot_code_and_traceback_still_show(page):
    soup = BeautifulSoup(page, "html.parser")
    answers = soup.find_all(class_="text_cell_render")
    answer = next(a for a in answers if "LEARNER-ANSWER-1" in a.get_text())
    cells = [td.get_text(strip=True) for td in answer.find_all("td")]
    assert cells == ["8 B", "1.2 µs", "1 MiB", "95 µs"]
    assert answer.find("th", style=re.compile("text-align"))  # column alignment kept
    text = answer.get_text()
    assert "$T(b) = \\alpha + \\beta b$" in text and "$\\alpha < 2$" in text  # for MathJax
    assert "$$\\frac{1}{\\beta}" in text
    assert answer.find("details").find("summary").get_text() == "LEGIT-DETAILS"
    assert answer.find("sub").get_text() == "2" and answer.find("sup").get_text() == "2"
    assert answer.find("div", class_="highlight")  # the code block, highlighted
    link = answer.find("a", string="the MPI standard")
    assert link["href"] == "https://www.mpi-forum.org/docs/"
    assert answer.find("img", src=f"data:image/png;base64,{TINY_PNG}")
    bold = soup.find("b", string="bold html")  # the HTML output keeps its harmless markup
    assert bold is not None and bold.find_parent(class_="output_html")
    plots = [
        img["src"]
        for img in soup.select("div.output_png img")
        if img["src"].startswith("data:image/png;base64,")
    ]
    assert plots and len(base64.b64decode(plots[0].split(",", 1)[1])) > 1000  # a real figure
    svg = soup.select_one("div.output_svg img")
    assert svg["src"].startswith("data:image/svg+xml;base64,")  # an image: its script cannot run
    assert "ZeroDivisionError" in soup.select_one("div.output_error").get_text()
    assert soup.find("strong", string="md output")  # the markdown output still rendered


def test_the_course_text_header_and_mathjax_are_there(page):
    soup = BeautifulSoup(page, "html.parser")
    h1 = soup.find("h1", string=re.compile("COURSE-HEADER"))
    assert h1 is not None and not h1.has_attr("id")
    assert soup.find("td", string="COURSE-CELL")
    assert "$t = \\alpha + \\beta n$ for n < 2" in soup.get_text()
    assert any("mathjax" in s.get("src", "").lower() for s in soup.find_all("script"))


def test_the_feedback_keeps_scores_and_hides_the_mark_scheme(probe):
    html = probe["feedback"]
    assert "Test cell</a> (Score: 1.0 / 1.0)" in html
    assert MARK_SCHEME not in html and "BEGIN MARK SCHEME" not in html


def test_formgrader_shows_the_mark_scheme_and_its_score_boxes(formgrader_page):
    soup = BeautifulSoup(formgrader_page, "html.parser")
    assert MARK_SCHEME in soup.get_text()
    # the test, the written answer, the rubric (a task of 0 points) and the task: none else
    boxes = {box["id"] for box in soup.select("input.score")}
    assert boxes == {"test_double", "explain", "rubric_explain", "defend"}
    assert soup.find("textarea", id="explain-comment")


@pytest.fixture(scope="module")
def exporter(tmp_path_factory):
    """Formgrader's HTMLExporter for a course folder with the repository's config (and no
    assignment: nothing in these tests needs nbgrader to have run)."""
    folder = tmp_path_factory.mktemp("formgrader-config")
    shutil.copy(COURSE / "nbgrader_config.py", folder / "nbgrader_config.py")
    return _formgrader_exporter(folder)


def test_the_exporter_is_the_one_formgrader_builds(exporter):
    """Formgrader's HTMLExporter takes the course's cleaning from the course folder."""
    assert exporter.template_name == "formgrade"
    assert exporter.sanitize_html
    filters = exporter.environment.filters
    assert type(filters["markdown2html"]).__name__ == "SanitisedMarkdown"
    assert filters["clean_html"].__module__ == "pingpong_lab.grader.sanitise"


# --- the course's own notebooks -----------------------------------------------------------


def _render(exporter, path: Path) -> str:
    """The notebook's markdown cells (its code is pygments' business, cleaned or not) as the
    exporter renders them."""
    nb = nbformat.read(path, as_version=4)
    nb.cells = [cell for cell in nb.cells if cell.cell_type == "markdown"]
    resources = {"base_url": "", "index": 0, "total": 1, "notebook_id": path.stem}
    html, _ = exporter.from_notebook_node(nb, resources=resources)
    soup = BeautifulSoup(html, "html.parser")
    for el in soup.find_all(id=re.compile("^cell-id=")):
        del el["id"]
    return soup.select_one("#notebook-container").decode(formatter="html5")


# one vector at a time, each in a written answer (so that none can hide behind another)
ATTACHED = {
    "page.html": {"text/html": base64.b64encode(b"<script>alert(40)</script>").decode()},
    "dot.svg": {"image/svg+xml": base64.b64encode(SVG_OUTPUT.encode()).decode()},
}
ONE_BY_ONE = [
    *MARKDOWN_ATTACKS,
    "![page](attachment:page.html)",
    "![dot](attachment:dot.svg)",
    '<p style="color:white;position:fixed;top:0">hidden</p>',
    "<scr<script>ipt>alert(41)</script>",
    "<!-- <script>alert(42)</script> -->",
    '<a href="&#106;avascript:alert(43)">entities</a>',
    '<img src="x" onerror\n=alert(44)>',
    '<table><tr><td background="javascript:alert(45)">t</td></tr></table>',
]


@pytest.mark.parametrize("attack", ONE_BY_ONE)
def test_each_attack_alone_is_inert(exporter, attack):
    v4 = nbformat.v4
    nb = v4.new_notebook()
    answer = v4.new_markdown_cell(f"ANSWER\n\n{attack}\n")
    answer.metadata = {"nbgrader": {"grade": True, "solution": True, "grade_id": "a", "points": 1}}
    answer.attachments = ATTACHED
    nb.cells = [answer]
    html, _ = exporter.from_notebook_node(nb, resources={"base_url": "", "index": 0, "total": 1})
    assert "ANSWER" in html
    assert live(html) == []
    body = BeautifulSoup(html, "html.parser").select_one("div.text_cell_render")
    for el in body.find_all(True):
        assert not set(el.attrs) - {"src", "alt", "href", "title", "open", "style"}, el
        assert not re.search("position|color|url", el.get("style", "")), el
        if el.name == "img" and el.get("src", "").startswith("data:"):
            assert el["src"].startswith("data:image/svg+xml;base64,"), el  # the svg, as an image


def test_the_course_notebooks_render_as_without_the_cleaning(exporter):
    """Every source notebook (with its mark schemes) through Formgrader's exporter: cleaning
    changes nothing in the course's own markdown."""
    from nbconvert.exporters import HTMLExporter
    from traitlets.config import Config

    cleaned = exporter
    plain = Config(cleaned.config)
    plain.HTMLExporter.filters = {}
    plain.HTMLExporter.sanitize_html = False
    raw = HTMLExporter(config=plain)
    sources = sorted((COURSE / "source").glob("*/*.ipynb"))
    assert sources
    for path in sources:
        assert _render(cleaned, path) == _render(raw, path), path.name


# --- Formgrader itself --------------------------------------------------------------------


@requires_mpi  # `make instructor` builds the course's C kernels with mpicc first
def test_the_formgrader_page_served_by_the_instructor_lab_is_inert(probe):
    """`make instructor` on the probe course; its submission page, fetched over HTTP."""
    import urllib.request

    from nbgrader.api import Gradebook

    from ..browser.lab import serve

    if not (ROOT / ".venv" / "bin" / "jupyter").exists() and not os.environ.get("CONDA_PREFIX"):
        pytest.skip("the environment is not set up (run `make test`)")
    course = probe["course"]
    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        submission_id = gb.find_submission_notebook(NAME, NAME, STUDENT).id
    log = probe["root"] / "lab.log"
    with serve("instructor", probe["env"], log, COURSE=str(course)) as lab:
        request = urllib.request.Request(
            lab.url(f"/formgrader/submissions/{submission_id}/"),
            headers={"Authorization": f"token {lab.token}"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            html = response.read().decode()
    assert "LEARNER-ANSWER-1" in html and MARK_SCHEME in html
    assert live(html) == []
    assert "<script>alert(1)</script>" in _text(html)
