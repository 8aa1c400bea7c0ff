"""Submissions downloaded from a learning platform (LMS): the course's `nbgrader zip_collect`.

The course's convention: one archive per student and assignment, named by the student's id,
holding what that student hands in - the notebook, the C files it wrote and my_results/ - at
its top level or inside one folder (the assignment's, as a student zips it):

    course/downloaded/02_timing/archive/alice.zip      02_timing.ipynb, bench.c, my_results/...
    course/downloaded/02_timing/archive/bob.zip        02_timing/02_timing.ipynb, ...

`nbgrader zip_collect 02_timing` (from course/) then puts each one in
course/submitted/<student>/02_timing/ as `nbgrader collect` would, my_results/ included. Plain
nbgrader collects nothing without a `named_regexp` and only notebooks without `valid_ext`; the
course's config sets `CourseCollector` as the collector, which knows both.

An archive carries no submission time that nbgrader can read, and nbgrader's `release_feedback`
fails for the whole assignment when one student has no timestamp.txt. So each submission is
stamped with the modification time of its archive (when it was downloaded, or the time the
platform gave the file); nbgrader computes late penalties from it only when a due date is set.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from nbgrader.plugins.zipcollect import FileNameCollectorPlugin
from traitlets import List, Unicode

# .../extracted/<student>/[<one folder>/]<file> or .../my_results/<file>; not macOS's metadata
NAMED_REGEXP = (
    r".*/extracted/(?P<student_id>[^/]+)/"
    r"(?:(?!my_results/|__MACOSX/)[^/]+/)?"
    r"(?P<file_id>(?:my_results/)?(?!\._)[^/]+)$"
)
# the notebook, the C it wrote, its sweeps and its saved results (my_results/*.npz, *.json)
VALID_EXT = [".ipynb", ".c", ".h", ".csv", ".npz", ".json"]


def archive_time(extracted_file: str) -> dt.datetime:
    """When the archive that `extracted_file` came from was written (UTC): the archive's
    modification time, or the file's own when no archive of that student is found."""
    path = Path(extracted_file)
    parts = path.parts
    if "extracted" in parts:
        at = len(parts) - 1 - parts[::-1].index("extracted")
        student = parts[at + 1] if at + 1 < len(parts) else ""
        archives = Path(*parts[:at]) / "archive"
        found = sorted(archives.glob(f"{student}.*")) if student else []
        if found:
            path = found[0]
    return dt.datetime.fromtimestamp(os.stat(path).st_mtime, tz=dt.timezone.utc)


class CourseCollector(FileNameCollectorPlugin):
    """nbgrader's file-name collector with the course's archive layout, the files a submission
    consists of, and a timestamp for every student (see the module's text)."""

    named_regexp = Unicode(NAMED_REGEXP, help="See pingpong_lab.grader.zipcollect.").tag(
        config=True
    )
    valid_ext = List(VALID_EXT, help="The files of a submission, by extension.").tag(config=True)

    def collect(self, submitted_file: str) -> dict | None:
        info = super().collect(submitted_file)
        if info is not None and not info.get("timestamp"):
            info["timestamp"] = archive_time(submitted_file)
        return info
