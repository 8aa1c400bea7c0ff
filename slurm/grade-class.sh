#!/bin/bash
# Grade every submission in course/submitted/ on a Slurm cluster: one array task per student,
# then a merge that runs when all of them have ended (afterany: also after failures).
#   slurm/grade-class.sh                       # from the repository root
#   slurm/grade-class.sh --partition=short     # extra sbatch options, for the array tasks
# Prints the array's job id and the merge's. PINGPONG_LAB_COURSE picks another course folder.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${PINGPONG_LAB_VENV:-.venv}
course=${PINGPONG_LAB_COURSE:-course}
count=$("$venv/bin/python" -m pingpong_lab.grader array-count --course "$course")
if [ "$count" -eq 0 ]; then
    echo "nothing in $course/submitted/<student>/<assignment>/ to grade" >&2
    exit 1
fi
logs="$course/slurm-logs"  # each task's output, next to the course
mkdir -p "$logs"
array=$(sbatch --parsable --array="0-$((count - 1))" --output="$logs/grade-%A_%a.out" "$@" \
    slurm/grade-task.sbatch)
merge=$(sbatch --parsable --dependency="afterany:${array%%;*}" --output="$logs/merge-%j.out" \
    slurm/grade-merge.sbatch)
echo "grading $count submission(s): array job ${array%%;*}, merge job ${merge%%;*}"
