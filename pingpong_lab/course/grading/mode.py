"""Grading mode, quiet test cells, deadlines and checks on plain values.

nbgrader runs with PINGPONG_LAB_GRADING=1 (course/nbgrader_config.py sets it), and notebooks
shrink their work with `scale(normal, grading)` (so does a dry run, PINGPONG_LAB_QUICK; both
variables are read in pingpong_lab.runtime):

    sizes = message_sizes(1, scale(64 << 20, 1 << 16))

Anything a test cell writes to stderr makes nbgrader give it 0 points, so test cells run their
work inside `with quiet():` (warnings silenced, stderr sent to stdout).
"""

from __future__ import annotations

import contextlib
import math
import statistics
import sys
import types
import warnings

import numpy as np

from ...runtime import grading_mode, quick_mode

GRADING = grading_mode()


def scale(normal, grading):
    """`grading` while nbgrader grades or in a dry run (small and fast), `normal` otherwise."""
    return grading if grading_mode() or quick_mode() else normal


ENGINE_TIMEOUT_S = 20.0  # engine work in a test cell; well below the 150 s cell timeout

PERCENTILE_METHODS = (
    "inverted_cdf",
    "averaged_inverted_cdf",
    "closest_observation",
    "interpolated_inverted_cdf",
    "hazen",
    "weibull",
    "linear",
    "median_unbiased",
    "normal_unbiased",
    "lower",
    "higher",
    "midpoint",
    "nearest",
)
"""The standard definitions of a sample percentile (numpy.percentile's methods; statistics.
quantiles' 'exclusive' is 'weibull', 'inclusive' is 'linear'): a test accepts any of them."""
MPIEXEC_TIMEOUT_S = 30.0  # a stand-alone mpiexec check (start-up included)


@contextlib.contextmanager
def quiet():
    """Run a test cell's work without writing to stderr (nbgrader scores stderr as failure).

    Warnings are ignored and anything printed to sys.stderr goes to stdout instead.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.redirect_stderr(sys.stdout):
            yield


def nbytes_text(n) -> str:
    """'1 byte', '4097 bytes'."""
    return f"{n} byte" if n == 1 else f"{n} bytes"


def assert_close(actual, expected, rtol=1e-6, what="the result"):
    """AssertionError with both values when actual is not expected within rtol."""
    actual_f = float(actual)
    if not np.isclose(actual_f, expected, rtol=rtol, atol=0):
        raise AssertionError(f"{what}: expected {expected:.6g}, got {actual_f:.6g}")


def within_ratio(measured, reference, low=0.2, high=5.0, what="the measurement"):
    """Compare with the reference measured in the same run: a wide ratio band, never absolutes."""
    ratio = float(measured) / float(reference)
    if not (low <= ratio <= high):
        raise AssertionError(
            f"{what} is {ratio:.2g}x the reference kernel measured just now "
            f"(expected between {low:g}x and {high:g}x)"
        )
    return ratio


UNDECIDED = "[grader note]"


def undecided(what: str) -> None:
    """Say (on stdout, where the instructor sees it beside the score) that a timing check passed
    because the machine was too noisy to decide it."""
    print(
        f"{UNDECIDED} {what}: the machine was too noisy to tell a wrong program from noise, so "
        "this check passed without deciding. Run it again on a quieter machine to be sure."
    )


def agrees_with_reference(measure, reference, low=0.2, high=5.0, what="the measurement", tries=5):
    """measure() / reference(), both run now in turns: a ratio in [low, high].

    On a shared machine one measurement can stall (another process holds the core for a
    scheduler tick: milliseconds against a microsecond round trip), so the pair is measured
    up to `tries` times, and after each pair both the last ratio and the ratio of the medians so
    far are tried; a timing loop that is wrong misses the band every time. When the runs of
    either disagree with each other by more than the band, the machine is too noisy to decide:
    the check passes with a note (undecided) instead of taking a point.
    """
    mine, theirs = [], []
    for _ in range(tries):
        mine.append(float(measure()))
        theirs.append(float(reference()))
        if not (math.isfinite(mine[-1]) and mine[-1] > 0):
            raise AssertionError(f"{what} was {mine[-1]!r}: expected a positive number of seconds")
        for ratio in (mine[-1] / theirs[-1], statistics.median(mine) / statistics.median(theirs)):
            if low <= ratio <= high:
                return ratio
    spread = max(max(x) / min(x) for x in (mine, theirs))
    ratios = ", ".join(f"{m / t:.3g}x" for m, t in zip(mine, theirs, strict=True))
    if spread > min(high, 1 / low):
        undecided(f"{what}: {ratios} the reference, whose runs disagreed by up to {spread:.3g}x")
        return statistics.median(mine) / statistics.median(theirs)
    raise AssertionError(
        f"{what} was {ratios} the reference kernel measured right after it, in {tries} tries "
        f"(expected between {low:g}x and {high:g}x)"
    )


class ReadOnlyModule(types.ModuleType):
    """A module whose attributes cannot be set or deleted from outside (its own code still can).

    While grading, the course's checking modules are made read-only, so a notebook cell that
    tries `grading.check_pingpong = ...` fails at once, in that cell, with this message. The
    audit of the submission (pingpong_lab/grader/audit.py) is what the score relies on; this
    is an early warning a learner sees when validating.
    """

    def __setattr__(self, name, value):
        if isinstance(value, types.ModuleType) and value.__name__ == f"{self.__name__}.{name}":
            return super().__setattr__(name, value)  # the import system binding a submodule
        raise AttributeError(_read_only(self.__name__, name))

    def __delattr__(self, name):
        raise AttributeError(_read_only(self.__name__, name))


def _read_only(module: str, name: str) -> str:
    return (
        f"{module}.{name} cannot be changed while grading: the tests use the course's "
        "checks as they are. Change your own functions instead."
    )


def seal(*modules: types.ModuleType) -> None:
    """Make `modules` read-only (ReadOnlyModule) while grading; nothing otherwise."""
    if grading_mode():
        for module in modules:
            module.__class__ = ReadOnlyModule
