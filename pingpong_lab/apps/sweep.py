"""`pingpong-lab sweep`: a ping-pong sweep over message sizes under mpiexec (no Jupyter).

    pingpong-lab sweep --np 2 --kernel c --mode blocking --min-bytes 1 --max-bytes 67108864 \\
        --out results.csv [--rounds 8] [--link rate=1gbit]   # --link: root, emulated network

`launch_sweep` is the one path from settings to a running sweep job; `pingpong-lab report`
uses it too. Bad arguments give one line on stderr and exit status 2; a failed run exits 1.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

from ..data import results
from ..errors import PingPongLabError
from ..mpi import environment, jobs, link, measure
from ..mpi.processes import run_group
from ..mpi.settings import TRANSPORTS, SweepSettings
from ..progress import bar

DEFAULT_TIMEOUT_S = 1800


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def _number(kind, lowest, what, strictly=False):
    """An argparse type: parse with `kind`, refuse values below `lowest` with a clear message."""

    def parse(text: str):
        try:
            value = kind(text, 0) if kind is int else kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if value < lowest or (strictly and value == lowest):
            sign = "negative" if value < 0 else "out of range"
            bound = f"greater than {lowest}" if strictly else f"at least {lowest}"
            raise argparse.ArgumentTypeError(f"{text} is {sign}: it must be {bound}")
        return value

    return parse


_size = _number(int, 0, "a whole number of bytes")
_positive_int = _number(int, 1, "a whole number")
_positive_float = _number(float, 0.0, "a number", strictly=True)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="pingpong-lab sweep", description="Ping-pong sweep over message sizes.")
    p.add_argument("--np", type=_positive_int, default=2, help="MPI ranks (default 2)")
    p.add_argument("--kernel", choices=measure.KINDS, default="c")
    p.add_argument("--mode", choices=measure.MODES, default="blocking")
    p.add_argument("--min-bytes", type=_size, default=1)
    p.add_argument("--max-bytes", type=_size, default=64 << 20)
    p.add_argument("--out", default="results.csv", help="CSV file (+ .json and .samples.npz)")
    p.add_argument(
        "--reps",
        type=_positive_int,
        help="fixed repetitions, one round (default: adaptive); with --rounds: per round",
    )
    p.add_argument(
        "--rounds",
        type=_positive_int,
        help="measure in this many interleaved rounds, each running every size once (about "
        "--target-time per size and round); steadier numbers on a busy machine, and the "
        "spread between rounds (--ci and --budget are then not used)",
    )
    for flag, default, text in (
        (
            "--ci",
            measure.REL_CI,
            "stop a size once the median's 95%% CI is within +/- this fraction",
        ),
        ("--budget", measure.BUDGET_S, "... or after this many seconds on the size"),
        ("--target-time", measure.TARGET_S, "seconds of the first round at each size"),
    ):
        p.add_argument(
            flag, type=_positive_float, default=default, help=f"{text} (default %(default)g)"
        )
    p.add_argument(
        "--shared-buffer",
        action="store_true",
        help="one buffer for send and receive instead of two (OSU)",
    )
    p.add_argument(
        "--transport",
        choices=sorted(TRANSPORTS),
        default="default",
        help="tcp forces TCP loopback between local ranks (MPICH)",
    )
    p.add_argument(
        "--link",
        metavar="SETTINGS",
        help="rate=1gbit[,burst=128kb,latency=50ms,mtu=9000] (root): each rank in its own "
        "network namespace, joined over TCP by veth cables limited to this rate (tbf) on a "
        "bridge",
    )
    p.add_argument("--library", help="C kernel library (default kernels_c/build/libpingpong.so)")
    p.add_argument(
        "--timeout",
        type=_positive_float,
        default=DEFAULT_TIMEOUT_S,
        help="seconds before the whole run is stopped (default 1800)",
    )
    return p


def _fail(message: str, code: int = 1) -> int:
    print(f"pingpong-lab sweep: error: {message}", file=sys.stderr)
    return code


def main(argv) -> int:
    """Entry point of `pingpong-lab sweep`; returns the exit status."""
    args_parser = parser()
    a = args_parser.parse_args(argv)
    if a.max_bytes < a.min_bytes:
        args_parser.error(f"--max-bytes {a.max_bytes} is smaller than --min-bytes {a.min_bytes}")
    if a.kernel == "c" and a.mode == "pickle":
        args_parser.error("--mode pickle exists only for --kernel python")
    link_spec = None
    if a.link is not None:
        if a.transport not in ("default", "tcp"):
            args_parser.error(f"--link runs the ranks over TCP, not --transport {a.transport}")
        a.transport = "tcp"
        try:
            link_spec = link.parse_link(a.link)
        except ValueError as exc:
            args_parser.error(f"--link: {exc}")
    try:
        settings = SweepSettings(
            kind=a.kernel,
            mode=a.mode,
            sizes=measure.message_sizes(a.min_bytes, a.max_bytes),
            reps=a.reps,
            rounds=a.rounds,
            target_s=a.target_time,
            rel_ci=a.ci,
            budget_s=a.budget,
            shared_buffer=a.shared_buffer,
            library=a.library,
            transport=a.transport,
        )
    except ValueError as exc:
        args_parser.error(str(exc))
    problem = launch_problem(settings, a.np, a.out)
    if problem:
        args_parser.error(problem)
    if link_spec is not None:
        if a.np > link.MAX_RANKS:
            args_parser.error(f"--link joins at most {link.MAX_RANKS} ranks, not {a.np}")
        return launch_sweep(settings, a.np, a.out, timeout_s=a.timeout, link_spec=link_spec)
    return launch_sweep(settings, a.np, a.out, timeout_s=a.timeout)


def launch_problem(settings: SweepSettings, np_: int, out) -> str | None:
    """Why `settings` cannot run on np_ ranks into `out` (None when it can)."""
    if np_ < 2:
        return f"--np {np_}: a ping-pong needs at least 2 ranks"
    if settings.mode == "pairwise" and np_ % 2:
        return f"--np {np_}: the pairwise exchange needs an even number of ranks"
    try:
        results.check_writable(out)
    except OSError as exc:
        return str(exc)
    return None


def launch_sweep(
    settings: SweepSettings,
    np_: int,
    out,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    link_spec: link.LinkSpec | None = None,
) -> int:
    """Run the "sweep" job (`settings` on np_ ranks under mpiexec, results into `out`).

    The path `pingpong-lab sweep` and `pingpong-lab report` share. With `link_spec`, every
    rank runs in its own network namespace behind an emulated link (mpi/link.py), removed
    again however the run ends. Returns the exit status: 0, or 1 after one line on stderr.
    """
    problem = launch_problem(settings, np_, out) or (link_spec and link.problem())
    if problem:
        return _fail(problem)
    try:
        mpiexec = environment.mpiexec()
        if settings.kind == "c":
            from ..mpi import ckernels

            ckernels.preflight(settings.library or ckernels.DEFAULT_LIBRARY)
    except (PingPongLabError, FileNotFoundError) as exc:
        return _fail(str(exc))
    if np_ > environment.cpu_count():
        print(
            f"warning: {np_} ranks on {environment.cpu_count()} cores: timings are oversubscribed",
            file=sys.stderr,
        )
    env = {**os.environ, **TRANSPORTS[settings.transport]}
    env.pop(environment.LINK_ENV, None)
    with tempfile.TemporaryDirectory(prefix="pingpong-lab-sweep-") as scratch:
        events = os.path.join(scratch, "events.jsonl")
        spec = {**settings.to_dict(), "out": os.path.abspath(out), "events": events}
        if link_spec is None:
            cmd = jobs.command(measure.sweep_job, spec, np_, launcher=mpiexec)
            return _run_job(cmd, env, timeout_s, events)
        try:
            with link.EmulatedLink(link_spec, np_) as net:
                print(f"emulated link: {net.describe()}", flush=True)
                cmd = net.command(mpiexec, jobs.program(measure.sweep_job, spec))
                return _run_job(cmd, {**env, **net.env}, timeout_s, events)
        except link.LinkError as exc:
            return _fail(str(exc))
        except KeyboardInterrupt:  # a signal while the link was being built or removed
            return _fail("interrupted; the emulated link was removed")


def _run_job(cmd, env, timeout_s: float, events: str | None = None) -> int:
    """Run an mpiexec job in its own process group; forward its stdout; never leave it behind.

    The job's progress events (measure.emit_event, in the file `events`) move a progress bar
    on stderr (only at a terminal); its printed lines are only forwarded, never parsed.
    """
    forward = True
    sizes = bar(desc="sweep", total=0, leave=False)
    offset = 0

    def echo(line: str) -> None:
        nonlocal forward, offset
        if events:
            new, offset = measure.read_events(events, offset)
            for event in new:
                sizes.total = int(event["total"])
                sizes.update(int(event["done"]) - sizes.n)
        if forward:
            try:
                sizes.write(line, end="", file=sys.stdout)
                sys.stdout.flush()
            except BrokenPipeError:  # e.g. piped into `head`: keep measuring, stop echoing
                forward = False
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

    try:
        with sizes:
            proc = run_group(cmd, timeout_s, env=env, on_line=echo)
    except subprocess.TimeoutExpired:
        return _fail(f"the MPI job did not finish within {timeout_s:g} s and was stopped")
    except KeyboardInterrupt:
        return _fail("interrupted; the MPI job was stopped")
    if proc.returncode == 0:
        return 0
    errors = proc.stderr.splitlines()
    ours = [ln.strip() for ln in errors if ln.startswith("pingpong-lab")]
    if ours:
        print(ours[0], file=sys.stderr)
        return 1
    tail = " | ".join(ln.strip() for ln in errors if ln.strip())[-600:]
    return _fail(f"the MPI job failed (exit status {proc.returncode}): {tail}")
