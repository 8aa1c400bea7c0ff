"""`nbgrader release_feedback` for a class where some students handed in through a learning
platform (LMS) and the rest through nbgrader's exchange.

nbgrader names released feedback by the secret a student's `nbgrader submit` wrote; a
submission unpacked from an LMS archive (`nbgrader zip_collect`) has none, and plain
`release_feedback` then stops at that student with FileNotFoundError, releasing nobody's
feedback after it. `ReleaseFeedback` (the course config's release_feedback exchange) releases
everyone who submitted through the exchange and names the others, whose feedback
(feedback/<student>/<NN_topic>/) goes back the way their work came: through the platform.
"""

from __future__ import annotations

from pathlib import Path

from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback

SECRET = "submission_secret.txt"  # what `nbgrader submit` writes and collect carries along


def without_secret(feedback_root: Path, assignment: str) -> list[str]:
    """Students with feedback for `assignment` but no submission secret (collected from an
    LMS archive), sorted."""
    return sorted(
        d.parent.name
        for d in Path(feedback_root).glob(f"*/{assignment}")
        if d.is_dir() and not (d / SECRET).is_file()
    )


class ReleaseFeedback(ExchangeReleaseFeedback):
    """Release through the exchange what can go through it; name the rest (module text)."""

    def copy_files(self):
        root = Path(self.coursedir.format_path(self.coursedir.feedback_directory, ".", "."))
        lms = without_secret(root, self.coursedir.assignment_id)
        if not lms:
            return super().copy_files()
        self.log.warning(
            "Not released through the exchange (collected from LMS archives, no %s): %s. Hand "
            "their feedback/<student>/%s/ back through your learning platform.",
            SECRET,
            ", ".join(lms),
            self.coursedir.assignment_id,
        )
        excluded = self.coursedir.student_id_exclude
        self.coursedir.student_id_exclude = ",".join(filter(None, [excluded, *lms]))
        try:
            return super().copy_files()
        finally:
            self.coursedir.student_id_exclude = excluded
