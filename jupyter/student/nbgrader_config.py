"""nbgrader settings of the student lab (`make lab`, Binder): what the Validate button runs.

The course's settings (cell timeout, memory limit, exchange, course id) in grading mode, as
`make validate` uses them: see pingpong_lab/grader/validation.py.
"""

from pingpong_lab.grader.validation import course_config

c = get_config()  # noqa: F821 (nbgrader provides get_config)
c.merge(course_config())
