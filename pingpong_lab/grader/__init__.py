"""The grading side of the course: nbgrader's pipelines, the audit, class and array grading.

Nothing here is imported by a notebook: these modules run in the instructor's processes
(nbgrader, `make autograde`, Slurm array tasks), where a learner's code cannot reach them.
`python -m pingpong_lab.grader --help` lists the commands.
"""
