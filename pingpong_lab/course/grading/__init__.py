"""What the course's test cells use: grading mode, fake MPI, trace checks, engine checks, C builds.

Test cells follow three rules (DESIGN.md, "Grade the code, not the machine"):
- a learner's function is first run on fake communicators (fakempi), which record every MPI call
  without any MPI, so a wrong peer or a deadlock-prone order is a readable assertion (trace);
- work on real MPI runs on ranks of the check's own, with a deadline shorter than nbgrader's
  cell timeout (fresh_ranks): a deadlocked submission fails that cell and the rest is still
  graded;
- timings are judged only as ratios to the reference kernel measured in the same run (mode).

    mode           grading mode, scale(), quiet(), deadlines, checks on plain values
    matching       MPI's wildcards and MPI_PROC_NULL as the MPI in use has them; what matches
    fakempi        FakeComm and its recorded calls (Op)
    trace          is a traced ping-pong correct? (Python, buffers and pickled objects)
    timing         FakeClock and the order of a timing loop's steps
    fresh_ranks    a check's own MPI ranks: a fresh mpiexec job per check, results as JSON
    engine_checks  learners' Python and C ping-pongs on MPI: checks on fresh ranks, and the
                   same work on the learner's engines for the learner's own cells
    cbuild         instrumented builds of learners' C, notebook 04's linfit driver
    cbench         notebook 02's whole benchmark program: built, run under mpiexec, its CSV graded
    ctiming        notebook 02's C timing loop: checks on fresh ranks, the learner's sweep
"""

import sys

from ..on_ranks import HALO_GROUPS
from .cbench import (
    build_bench,
    check_bench_against_reference,
    check_bench_clock,
    check_bench_csv,
    check_bench_messages,
    check_bench_payload,
    read_bench_csv,
    run_bench,
)
from .cbuild import (
    NOT_IMPLEMENTED,
    assert_fit_matches,
    build_linfit,
    c_linfit,
    compile_student_c,
    instrument_c,
)
from .ctiming import (
    c_median_one_way,
    c_sweep,
    check_c_timing,
    check_c_timing_against_partner,
    course_c_median_one_way,
)
from .engine_checks import (
    best_of_on_ranks,
    c_pingpong_on_engines,
    check_c_payload,
    check_c_pingpong,
    check_c_with_ranks,
    check_halo_exchange,
    check_pickle_on_ranks,
    check_pingpong_on_ranks,
    check_safe_exchange,
    pair_loop_on_ranks,
    pingpong_on_engines_report,
    safe_exchange_on_engines,
)
from .fakempi import FakeComm, Message, Op, comm_ops, echo_sent_by
from .matching import MPIConstants, mpi_constants
from .mode import (
    ENGINE_TIMEOUT_S,
    GRADING,
    MPIEXEC_TIMEOUT_S,
    PERCENTILE_METHODS,
    agrees_with_reference,
    assert_close,
    grading_mode,
    quiet,
    scale,
    seal,
    within_ratio,
)
from .timing import FakeClock, check_timing_sequence, timing_fakes, timing_steps
from .trace import (
    check_pairwise_exchange,
    check_pickle_pingpong,
    check_pingpong,
    check_trace,
    describe_echo,
    diagnose_trace,
    trace,
)

__all__ = [
    "HALO_GROUPS",
    "ENGINE_TIMEOUT_S",
    "GRADING",
    "MPIEXEC_TIMEOUT_S",
    "PERCENTILE_METHODS",
    "NOT_IMPLEMENTED",
    "FakeClock",
    "FakeComm",
    "MPIConstants",
    "Message",
    "Op",
    "agrees_with_reference",
    "assert_close",
    "assert_fit_matches",
    "build_bench",
    "build_linfit",
    "best_of_on_ranks",
    "c_median_one_way",
    "c_sweep",
    "c_linfit",
    "c_pingpong_on_engines",
    "check_bench_against_reference",
    "check_bench_csv",
    "check_bench_clock",
    "check_bench_messages",
    "check_bench_payload",
    "check_c_payload",
    "check_c_pingpong",
    "check_c_timing",
    "check_c_timing_against_partner",
    "check_c_with_ranks",
    "check_halo_exchange",
    "check_pickle_on_ranks",
    "check_pickle_pingpong",
    "check_pairwise_exchange",
    "check_pingpong",
    "check_pingpong_on_ranks",
    "check_safe_exchange",
    "check_timing_sequence",
    "check_trace",
    "comm_ops",
    "compile_student_c",
    "course_c_median_one_way",
    "describe_echo",
    "diagnose_trace",
    "echo_sent_by",
    "grading_mode",
    "instrument_c",
    "mpi_constants",
    "pair_loop_on_ranks",
    "pingpong_on_engines_report",
    "quiet",
    "read_bench_csv",
    "run_bench",
    "safe_exchange_on_engines",
    "scale",
    "timing_fakes",
    "timing_steps",
    "trace",
    "within_ratio",
]

seal(*(module for name, module in sys.modules.items() if name.startswith(__name__)))

if GRADING:  # the kernel's mpi4py loads only pickles of plain data (a test cell reads them)
    from ...mpi import safepickle

    safepickle.install()
