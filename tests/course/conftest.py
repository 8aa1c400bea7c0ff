"""The class graded once per session, shared by the modules that read what grading made."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory):
    """tests/course/classroom.py's class, released, submitted and autograded once."""
    from .classroom import grade_the_class

    return grade_the_class(tmp_path_factory.mktemp("course-pipeline"))
