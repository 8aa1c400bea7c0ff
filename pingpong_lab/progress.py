"""Progress bars (tqdm.auto) for loops over sizes or runs that take more than a few seconds.

In Jupyter a bar is a widget; in a terminal it is drawn on stderr. No bar is shown:

- while grading (PINGPONG_LAB_GRADING, see runtime): nbgrader scores anything a
  test cell writes to stderr as a failure, and graded output should be the same every time;
- when stderr is not a terminal outside Jupyter (a log file, a pipe, CI): a bar redrawn there
  is noise, and the lines the loops print already say how far they are;
- when PINGPONG_LAB_PROGRESS is 0, false or no.
"""

from __future__ import annotations

import sys
import warnings

from . import runtime

__all__ = ["bar", "disabled", "echo"]


def disabled() -> bool | None:
    """True when bars are off (grading, PINGPONG_LAB_PROGRESS=0); None lets tqdm decide
    (a widget in Jupyter, on stderr only when it is a terminal)."""
    if runtime.grading_mode() or runtime.progress_off():
        return True
    return None


def _tqdm():
    with warnings.catch_warnings():  # "IProgress not found": tqdm falls back to text by itself
        warnings.simplefilter("ignore")
        from tqdm.auto import tqdm
    return tqdm


def bar(iterable=None, desc: str = "", total: int | None = None, unit: str = "size", **options):
    """`iterable` wrapped in a progress bar (a plain pass-through where bars are off).

    `options` go to tqdm (e.g. leave=False for a bar inside another bar's loop).
    """
    if disabled():
        options["disable"] = True
    else:
        options.setdefault("disable", None)
    return _tqdm()(iterable, desc=desc, total=total, unit=unit, **options)


def echo(text: str, end: str = "\n") -> None:
    """Print `text` to stdout without tearing a progress bar that is being drawn."""
    _tqdm().write(text, file=sys.stdout, end=end)
    sys.stdout.flush()
