"""The grading side of the course: nbgrader's pipelines, the audit, class and array grading.

Nothing here is imported by a notebook: these modules run in the instructor's processes
(nbgrader, `make autograde`, Slurm array tasks), where a learner's code cannot reach them. One
exception, which grading does not rely on: the student lab's kernel loads `labcheck` (and with
it `audit`) to refuse a cell that grading would refuse, when it runs.
`python -m pingpong_lab.grader --help` lists the commands.
"""
