"""The pages of the class view (cohort.py collects the numbers): cohort.html with the class's
table and strip plots, and one page per student with their numbers and provenance beside their
written answers and the mark scheme. Everything a student wrote, their name included, is
escaped; a missing notebook or result reads "missing".

    cohort_pages.write(course, out_dir)     # cohort.csv, cohort.html, students/<student>.html
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import urllib.parse
from pathlib import Path

import numpy as np

from .. import runtime
from ..course import handoff
from .cohort import (
    COLUMNS,
    PROVENANCE,
    RESULTS,
    arrays_of,
    cell_text,
    check_course,
    collect_with_results,
    csv_text,
)

BEGIN, END = "=== BEGIN MARK SCHEME ===", "=== END MARK SCHEME ==="
_SCHEME = re.compile(re.escape(BEGIN) + r"(.*?)" + re.escape(END), flags=re.S)

# ---- the plots ----


def strip_plot(rows: list[dict], key: str, label: str, log: bool) -> str | None:
    """A PNG (base64) of `key` per student, one column per CPU model; None with no values."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    groups: dict[str, list[float]] = {}
    for row in rows:
        value = row.get(key)
        if value is not None and (value > 0 or not log):
            groups.setdefault(row["cpu"], []).append(value)
    if not groups:
        return None
    fig = Figure(figsize=(7, 3.6), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    rng = np.random.default_rng(0)  # the same jitter every time the page is written
    names = sorted(groups)
    for i, cpu in enumerate(names):
        values = groups[cpu]
        ax.plot(i + rng.uniform(-0.15, 0.15, len(values)), values, "o", alpha=0.7)
    ticks = [f"{n if len(n) <= 28 else n[:27] + '…'} (n={len(groups[n])})" for n in names]
    ax.set_xticks(range(len(names)), ticks)
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.set_ylabel(label)
    if log:
        ax.set_yscale("log")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _figure(rows: list[dict], key: str, label: str, log: bool) -> str:
    png = strip_plot(rows, key, label, log)
    if png is None:
        return f"<p class='missing'>{html.escape(label)}: no student has a value to plot.</p>"
    alt = html.escape(f"{label} of every student, grouped by CPU model")
    return f"<figure><img alt='{alt}' src='data:image/png;base64,{png}'></figure>"


# ---- the pages ----

STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #eee; }
tr.flagged td { background: #ffe3e0; }
ul.flags { margin: 0; padding-left: 1.2em; color: #a00; }
.missing { color: #999; font-style: italic; }
pre { white-space: pre-wrap; background: #f6f6f6; padding: 0.5em; border: 1px solid #ddd; }
pre.scheme { background: #eef6ee; }
section.answer { margin-bottom: 1.5em; }
figure { display: inline-block; margin: 0.5em 1em 0.5em 0; }
"""


def page(title: str, body: str) -> str:
    """A whole HTML page, its style inline."""
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
        f"<body>\n<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )


def _shown(value) -> str:
    if value is None or value == []:
        return "<span class='missing'>missing</span>"
    return html.escape(cell_text(value))


def student_href(student: str) -> str:
    return "students/" + urllib.parse.quote(student, safe="") + ".html"


def _flags_cell(flags: list[str]) -> str:
    if not flags:
        return ""
    return "<ul class='flags'>" + "".join(f"<li>{html.escape(f)}</li>" for f in flags) + "</ul>"


def class_table(rows: list[dict]) -> str:
    """Every student's numbers; flagged rows highlighted, their flags spelled out."""
    heads = ["student", "alpha (us)", "1/beta (GiB/s)", "breakpoint (B)", "deadlock from (B)",
             "contention slowdown", "machine", "flags"]  # fmt: skip
    keys = ["alpha_us", "bandwidth_GiBps", "breakpoint_bytes", "deadlock_bytes",
            "contention_slowdown", "machine"]  # fmt: skip
    lines = ["<table id='cohort'><tr>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr>"]
    for row in rows:
        cls = " class='flagged'" if row["flags"] else ""
        name = html.escape(row["student"])
        link = f"<a href='{html.escape(student_href(row['student']))}'>{name}</a>"
        cells = "".join(f"<td>{_shown(row.get(k))}</td>" for k in keys)
        lines.append(f"<tr{cls}><td>{link}</td>{cells}<td>{_flags_cell(row['flags'])}</td></tr>")
    return "\n".join(lines + ["</table>"])


def class_page(rows: list[dict]) -> str:
    flagged = sum(1 for r in rows if r["flags"])
    body = [
        f"<p>{len(rows)} student(s), {flagged} flagged. Contention slowdown: at the largest "
        "message size, most pairs against one pair. Each name links to the student's numbers "
        "beside their written answers and the mark scheme.</p>",
        class_table(rows),
        "<h2>The class by machine (CPU model)</h2>",
        _figure(rows, "alpha_us", "latency alpha (us)", log=True),
        _figure(rows, "bandwidth_GiBps", "bandwidth 1/beta (GiB/s)", log=True),
    ]
    return page("The class's ping-pong results", "\n".join(body))


# ---- written answers and mark schemes ----


def read_notebook(path: Path) -> list[dict] | str:
    """The cells of a notebook, or why it cannot be read ("missing" when absent)."""
    if not path.is_file():
        return "missing"
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError, AttributeError) as exc:
        return f"unreadable ({type(exc).__name__}: {exc})"
    return [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else "unreadable"


def _meta(cell: dict) -> dict:
    meta = cell.get("metadata", {})
    meta = meta.get("nbgrader", {}) if isinstance(meta, dict) else {}
    return meta if isinstance(meta, dict) else {}


def _text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _is_answer(cell: dict) -> bool:
    meta = _meta(cell)
    return cell.get("cell_type") == "markdown" and bool(meta.get("grade") and meta.get("solution"))


def written_answers(cells: list[dict]) -> list[dict]:
    """The written parts of a notebook in order: {ids, question, answer}. A task cell is a
    question whose answer is the markdown cell right after it; a markdown cell graded by hand
    that follows no task is an answer on its own."""
    items, used = [], set()
    for i, cell in enumerate(cells):
        meta = _meta(cell)
        if i in used:
            continue
        if meta.get("task"):
            item = {"ids": [str(meta.get("grade_id", ""))], "question": _text(cell), "answer": None}
            after = cells[i + 1] if i + 1 < len(cells) else None
            if after is not None and after.get("cell_type") == "markdown":
                if not _meta(after).get("task"):
                    item["answer"] = _text(after)
                    used.add(i + 1)
                    if _is_answer(after):
                        item["ids"].append(str(_meta(after).get("grade_id", "")))
            items.append(item)
        elif _is_answer(cell):
            items.append({"ids": [str(meta.get("grade_id", ""))], "question": None,
                          "answer": _text(cell)})  # fmt: skip
    return items


def mark_schemes(cells: list[dict]) -> dict[str, tuple[str, str]]:
    """{grade_id: (the cell's text without its mark scheme, the mark scheme)} of a source
    notebook's graded and task cells."""
    out = {}
    for cell in cells:
        meta = _meta(cell)
        if meta.get("grade_id") and (meta.get("task") or meta.get("grade")):
            text = _text(cell)
            scheme = "\n".join(s.strip() for s in _SCHEME.findall(text))
            out[str(meta["grade_id"])] = (_SCHEME.sub("", text).strip(), scheme)
    return out


def _pre(text: str | None, cls: str = "") -> str:
    if text is None or not text.strip():
        return "<p class='missing'>missing</p>"
    attr = f" class='{cls}'" if cls else ""
    return f"<pre{attr}>{html.escape(text.strip())}</pre>"


def _answer_html(item: dict, schemes: dict) -> str:
    ids = [i for i in item["ids"] if i]
    question = item["question"]
    if ids and ids[0] in schemes and schemes[ids[0]][0] and item["question"] is not None:
        question = schemes[ids[0]][0]  # the question as the course wrote it
    scheme = "\n".join(schemes[i][1] for i in ids if i in schemes and schemes[i][1]) or None
    parts = [f"<section class='answer'><h3>{html.escape(', '.join(ids) or 'answer')}</h3>"]
    if question is not None:
        parts += ["<h4>Question</h4>", _pre(question)]
    parts += ["<h4>Answer</h4>", _pre(item["answer"])]
    parts += ["<h4>Mark scheme</h4>", _pre(scheme, "scheme")]
    return "\n".join(parts + ["</section>"])


def answers_html(course: Path, student: str, assignment: str, cache: dict) -> str:
    """One assignment's written answers of `student`, each with its question and mark scheme."""
    if assignment not in cache:
        source = read_notebook(course / "source" / assignment / f"{assignment}.ipynb")
        cache[assignment] = source if isinstance(source, list) else []
    source_cells = cache[assignment]
    schemes = mark_schemes(source_cells)
    path = course / "submitted" / student / assignment / f"{assignment}.ipynb"
    cells = read_notebook(path)
    head = f"<h2>{html.escape(assignment)}</h2>"
    if isinstance(cells, str):
        note = f"<p class='missing'>notebook {html.escape(cells)}</p>"
        items = [dict(i, answer=None) for i in written_answers(source_cells)]
    else:
        note, items = "", written_answers(cells)
    if not items:
        return head + note + "<p class='missing'>no written answers in this notebook</p>"
    return head + note + "\n".join(_answer_html(i, schemes) for i in items)


def assignments(course: Path, student: str) -> list[str]:
    """The assignments of the course (source/) and of the student's submission, sorted."""
    found = set()
    for folder in (course / "source", course / "submitted" / student):
        if folder.is_dir():
            found.update(p.name for p in folder.iterdir() if p.is_dir() and p.name[0] != ".")
    return sorted(found)


# ---- one student's page ----


def _digest_check(values: dict) -> str:
    recorded = values.get("_sha256")
    if not recorded:
        return "no digest recorded"
    same = handoff.samples_digest(arrays_of(values)) == recorded
    return "matches the arrays" if same else "DIFFERS from the arrays (edited?)"


def provenance_table(results: dict) -> str:
    heads = ["result", "saved", "host", "CPU", "cores", "MPI", "digest"]
    lines = ["<table class='provenance'><tr>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr>"]
    for name in RESULTS:
        values = results.get(name)
        if values is None:
            cells = "<td class='missing' colspan='6'>missing</td>"
        else:
            cells = "".join(f"<td>{_shown(values.get(k))}</td>" for k in PROVENANCE[:-1])
            cells += f"<td>{html.escape(_digest_check(values))}</td>"
        lines.append(f"<tr><td>{html.escape(name)}</td>{cells}</tr>")
    return "\n".join(lines + ["</table>"])


def numbers_table(row: dict) -> str:
    lines = ["<table class='numbers'>"]
    for key in COLUMNS[1:-2]:
        lines.append(f"<tr><th>{html.escape(key)}</th><td>{_shown(row.get(key))}</td></tr>")
    return "\n".join(lines + ["</table>"])


def student_page(course: Path, row: dict, results: dict, cache: dict) -> str:
    student = row["student"]
    flags = _flags_cell(row["flags"]) or "<p>no flags</p>"
    body = [
        "<p><a href='../cohort.html'>the class</a></p>",
        "<h2>Numbers</h2>",
        numbers_table(row),
        "<h2>Flags</h2>",
        flags,
        "<h2>Where the results were measured</h2>",
        provenance_table(results),
    ]
    body += [answers_html(course, student, a, cache) for a in assignments(course, student)]
    return page(f"{student}: results and written answers", "\n".join(body))


def write(course, out_dir=None) -> Path:
    """Write cohort.csv, cohort.html and students/<student>.html into `out_dir` (default
    course/cohort/); return the path of cohort.html."""
    course = check_course(course)
    out = Path(out_dir) if out_dir is not None else course / "cohort"
    rows, found = collect_with_results(course)
    (out / "students").mkdir(parents=True, exist_ok=True)
    runtime.atomic_write(out / "cohort.csv", csv_text(rows))
    cache: dict = {}
    for row in rows:
        text = student_page(course, row, found[row["student"]], cache)
        runtime.atomic_write(out / student_href(row["student"]), text)
    return runtime.atomic_write(out / "cohort.html", class_page(rows))
