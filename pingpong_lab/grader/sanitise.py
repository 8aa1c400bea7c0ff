"""HTML that learners wrote, made inert before an instructor or a learner opens it.

nbgrader turns a graded notebook into HTML twice: `nbgrader generate_feedback` writes the
feedback page, and Formgrader renders the same notebook in the instructor's browser for grading
by hand. Both use nbconvert's HTMLExporter with nbgrader's own templates (`feedback`,
`formgrade`). Those templates render a markdown cell as `cell.source | markdown2html` and never
clean it, even with `HTMLExporter.sanitize_html` on, and markdown keeps raw HTML: a written
answer holding `<script>`, `<img onerror=...>` or `[link](javascript:...)` would run in the
reader's browser, with the instructor's Jupyter session when Formgrader shows it.

Two filters of the exporter's Jinja environment close this (course/nbgrader_config.py sets them
through `HTMLExporter.filters`, which both Formgrader and generate_feedback read):

- `markdown2html` renders the markdown exactly as the exporter does and then cleans the HTML it
  made, so markdown links and images are checked as well as the raw HTML in the text;
- `clean_html` replaces nbconvert's own cleaner, which `HTMLExporter.sanitize_html = True` applies
  to code cells' HTML and markdown outputs and to raw cells (its allow-list would show a table
  or an image as escaped text).

With `sanitize_html` on, the templates also drop JavaScript and widget outputs; SVG outputs are
shown as `<img>` data URIs, where an SVG cannot run script.

Cleaning is an allow-list (bleach, which nbconvert already depends on): the tags and attributes
of ordinary documents (headings, paragraphs, lists, tables, code, details/summary, sub/sup,
images), links to http(s), mailto and the page itself, images from data:image/... URIs (plots,
attachments), http(s) and relative paths. Any other tag is escaped, so the reader sees what the
learner wrote (`<script>alert(1)</script>` as text) and nothing of it runs; any other attribute
(every on* handler, `id`, `style` but a few text properties, a `class` Formgrader's scripts
look for) is dropped. Math
(`$...$`) is text to HTML, so MathJax still typesets it in the page (nbconvert loads MathJax
with its Safe extension, which refuses `\\href{javascript:...}`).
"""

from __future__ import annotations

import re
import threading

import bleach
from bleach.css_sanitizer import CSSSanitizer
from jinja2 import pass_context
from nbconvert.utils.base import NbConvertBase

__all__ = ["SanitisedMarkdown", "clean_html"]

TAGS = frozenset(
    {
        "a", "abbr", "b", "blockquote", "br", "caption", "center", "cite", "code", "col",
        "colgroup", "dd", "del", "details", "dfn", "div", "dl", "dt", "em", "figcaption",
        "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li",
        "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strike", "strong", "sub",
        "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "tt", "u", "ul",
        "var",
    }
)  # fmt: skip
# Attributes every allowed tag may keep, and those only some tags may keep. No `id` or `name`:
# Formgrader finds each grade's score box by its grade_id (`$("#" + grade_id)`), and a learner's
# heading that took that id (nbconvert names a heading's id after its text) would take the box
# of another cell. For the same reason a `class` may name only what nbconvert writes itself
# (highlighted code, anchor links, tables), never the classes Formgrader's scripts look for
# (`score`, `full-credit`, `tabbable`, ...).
COMMON_ATTRIBUTES = frozenset({"class", "title", "lang", "style"})
TAG_ATTRIBUTES = {
    "a": {"href"},
    "img": {"src", "alt", "width", "height"},
    "table": {"border"},
    "th": {"align", "colspan", "rowspan", "scope"},
    "td": {"align", "colspan", "rowspan"},
    "col": {"span"},
    "colgroup": {"span"},
    "ol": {"start", "type", "reversed"},
    "li": {"value"},
    "details": {"open"},
}  # fmt: skip
# `style` keeps only these (markdown tables align their columns with text-align); nothing that
# positions, sizes or colours an element, so an answer can neither cover the grading form nor
# hide text from the grader (white on white)
CSS_PROPERTIES = frozenset(
    {"text-align", "vertical-align", "font-weight", "font-style", "text-decoration", "white-space"}
)
# href and src are checked against these by bleach (relative URLs and #anchors pass too);
# data: only for images, below
PROTOCOLS = frozenset({"http", "https", "mailto", "data"})
_IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml)[;,]")
_NOT_IN_URL = re.compile(r"[`\x00-\x20\x7f-\xa0\s]+")
# pygments' token classes (k, nb, s2, ...), nbconvert's highlight/anchor-link, pandas' tables
_CLASS = re.compile(r"highlight|hl-[\w-]+|language-[\w+-]+|anchor-link|dataframe|[a-z]{1,3}\d?")


def _attribute_allowed(tag: str, name: str, value: str) -> bool:
    if name not in COMMON_ATTRIBUTES and name not in TAG_ATTRIBUTES.get(tag, ()):
        return False
    if name == "class":
        return all(_CLASS.fullmatch(word) for word in value.split())
    if name in ("href", "src"):
        url = _NOT_IN_URL.sub("", value).lower()
        if url.startswith("data:"):
            # an image's bytes are only ever shown as an image; a data: link would be a page
            return tag == "img" and name == "src" and _IMAGE_DATA.match(url) is not None
    return True


_local = threading.local()


def _cleaner() -> bleach.Cleaner:
    """This thread's cleaner (a bleach Cleaner is not thread-safe)."""
    cleaner = getattr(_local, "cleaner", None)
    if cleaner is None:
        cleaner = _local.cleaner = bleach.Cleaner(
            tags=TAGS,
            attributes=_attribute_allowed,
            protocols=PROTOCOLS,
            strip=False,  # escaped, so the reader sees what was written
            strip_comments=True,
            css_sanitizer=CSSSanitizer(
                allowed_css_properties=CSS_PROPERTIES, allowed_svg_properties=()
            ),
        )
    return cleaner


def clean_html(html) -> str:
    """`html` with every tag, attribute and URL outside the allow-list made inert."""
    return _cleaner().clean(str(html))


class SanitisedMarkdown(NbConvertBase):
    """The `markdown2html` filter of an HTMLExporter, cleaned.

    Registered through `HTMLExporter.filters`, nbconvert builds it with the exporter as its
    parent: the markdown is rendered by the exporter's own `markdown2html` (attachments, anchor
    links, math, highlighted code as configured) and the HTML it made is then cleaned.
    """

    def __call__(self, context, source) -> str:
        return clean_html(self.parent.markdown2html(context, source))


# Jinja passes the template context to a filter that carries this mark (pass_context sets it
# on a function; here it is the instance that is called, so its class carries it).
SanitisedMarkdown.jinja_pass_arg = pass_context(SanitisedMarkdown.__call__).jinja_pass_arg
