"""An emulated network link: every rank its own host, each with a rate-limited NIC on a switch.

`pingpong-lab sweep --link rate=1gbit` runs the ranks over TCP through a link of a known rate,
so that the alpha-beta fit can be checked against a bandwidth that was set, not guessed:

    rank 0 [netns pplab<pid>-r0: pplink 10.250.0.1] --veth-- port0 ┐
    rank 1 [netns pplab<pid>-r1: pplink 10.250.0.2] --veth-- port1 ┴ bridge [netns pplab<pid>-sw]

Each rank runs in its own network namespace (`ip netns exec`, one MPMD block per rank), so
the only way between ranks is its veth "cable" and the bridge. A token bucket filter (`tbf`)
shapes both directions of every cable: the rank's egress and the switch's egress towards it.
MPICH is told not to use shared memory between the ranks (`MPIR_CVAR_NOLOCAL=1`) and to use
TCP on that interface only (UCX: `UCX_TLS=tcp,self`, `UCX_NET_DEVICES=pplink`; libfabric:
`FI_PROVIDER=tcp`, `FI_TCP_IFACE=pplink`). Ranks still share /dev/shm, so without NOLOCAL
MPICH would bypass the link entirely.

Why not the whole mpiexec in one namespace with `tbf` on its loopback? With the PyPI MPICH's
default UCX netmod, MPI_Init fails there ("MPIDI_UCX_comm_addr_exchange ... Destination is
unreachable"): UCX's TCP transport does not reach a peer over a loopback-only namespace. The
ofi netmod would run, but every rank would share one queue on `lo`, which is no model of hosts
with their own NICs.

Needs root (namespaces, veth, qdiscs) and iproute2 (`ip`, `tc`; `make link-tools`). Every
namespace is deleted on the way out (normal end, error, Ctrl-C, SIGTERM or SIGHUP), which
removes its veth ends and their qdiscs with it; namespaces left by a process that was killed
with SIGKILL are removed by the next run (their owner's PID no longer exists).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass

from ..errors import PingPongLabError
from . import environment

IFACE = "pplink"  # the rank's NIC, the same name in every rank's namespace
BRIDGE = "switch"
SUBNET = "10.250.0"  # one /24: namespaces are isolated, so it never clashes with real networks
PREFIX = "pplab"  # namespaces are pplab<pid>-r<rank> and pplab<pid>-sw
MAX_RANKS = 250
DEFAULT_MTU = 9000
ETHERNET_HEADER = 14
SHIPPED_HINT = (
    "without root, use the dataset measured through an emulated 1 Gbit/s link that ships with "
    "the course: handoff.shipped('link_1gbit') (pingpong_lab/course/shipped/link_1gbit.npz "
    "and .json)"
)
_COMMAND_TIMEOUT_S = 30

_RATE_UNITS = {  # tc's rate units: bit/s (SI prefixes) and bytes/s ("bps")
    "bit": 1,
    "kbit": 1e3,
    "mbit": 1e6,
    "gbit": 1e9,
    "tbit": 1e12,
    "bps": 8,
    "kbps": 8e3,
    "mbps": 8e6,
    "gbps": 8e9,
}
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1 << 20, "mb": 1 << 20}
_TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
_VALUE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)\s*$")


class LinkError(PingPongLabError):
    """The emulated link cannot be built here (no root, no iproute2, a tc/ip command failed)."""


def _parse(text: str, units: dict, what: str, example: str) -> float:
    match = _VALUE.match(text.lower())
    if not match or match.group(2) not in units:
        raise ValueError(
            f"{what} {text!r} is not understood: give a number and one of "
            f"{', '.join(u for u in units if u) or 'no unit'} (e.g. {example})"
        )
    return float(match.group(1)) * units[match.group(2)]


@dataclass(frozen=True)
class LinkSpec:
    """A link's settings: rate in bit/s, tbf burst in bytes, tbf queue latency, MTU in bytes."""

    rate_bit_per_s: float
    burst_bytes: int
    latency_s: float
    mtu: int

    def describe(self) -> str:
        """One line for the results' provenance ("link"), e.g. 'tbf rate=1gbit burst=...'."""
        return (
            f"tbf rate={_rate_text(self.rate_bit_per_s)} burst={self.burst_bytes}B "
            f"latency={self.latency_s * 1e3:g}ms mtu={self.mtu}"
        )

    def tbf_args(self) -> list[str]:
        return [
            "tbf",
            "rate",
            f"{round(self.rate_bit_per_s)}bit",
            "burst",
            str(self.burst_bytes),
            "latency",
            f"{round(self.latency_s * 1e6)}us",
        ]


def _rate_text(bits: float) -> str:
    for unit, factor in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bits >= factor:
            return f"{bits / factor:g}{unit}"
    return f"{bits:g}bit"


def parse_link(text: str) -> LinkSpec:
    """LinkSpec from 'rate=1gbit[,burst=128kb][,latency=50ms][,mtu=9000]' (ValueError if bad).

    burst defaults to 1 ms at the rate, and at least 4 frames; latency (the longest a packet
    may wait in the tbf queue) to 50 ms; mtu to 9000 (jumbo frames, as on cluster networks:
    headers then take 0.7 % of the rate; at Ethernet's 1500 they take 4.4 %, and the kernel
    handles six times as many packets, which a busy machine may not keep up with at 1 Gbit/s).
    """
    fields: dict[str, str] = {}
    for part in (p.strip() for p in str(text).split(",")):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or not value.strip():
            raise ValueError(f"link setting {part!r} is not key=value (e.g. rate=1gbit)")
        if key not in ("rate", "burst", "latency", "mtu"):
            raise ValueError(
                f"unknown link setting {key!r}: use rate=, burst=, latency=, mtu= "
                "(e.g. rate=1gbit,burst=128kb)"
            )
        if key in fields:
            raise ValueError(f"link setting {key!r} is given twice")
        fields[key] = value.strip()
    if "rate" not in fields:
        raise ValueError("the link needs a rate, e.g. rate=1gbit")
    rate = _parse(fields["rate"], _RATE_UNITS, "rate", "1gbit or 100mbit")
    if not 8e3 <= rate <= 1e12:
        raise ValueError(f"rate {fields['rate']!r} is out of range: 8kbit .. 1tbit")
    mtu_text = fields.get("mtu", str(DEFAULT_MTU))
    if not mtu_text.isdigit() or not 576 <= int(mtu_text) <= 65535:
        raise ValueError(f"mtu {mtu_text!r} must be a whole number of bytes from 576 to 65535")
    mtu = int(mtu_text)
    frame = mtu + ETHERNET_HEADER
    if "burst" in fields:
        burst = int(_parse(fields["burst"], _SIZE_UNITS, "burst", "128kb"))
        if burst < frame:
            raise ValueError(
                f"burst {fields['burst']!r} is smaller than one frame ({frame} bytes at mtu "
                f"{mtu}): no packet could pass"
            )
    else:
        burst = max(math.ceil(rate / 8 * 1e-3), 4 * frame)
    latency = _parse(fields.get("latency", "50ms"), _TIME_UNITS, "latency", "50ms")
    if not 1e-4 <= latency <= 10:
        raise ValueError(f"latency {fields['latency']!r} is out of range: 100us .. 10s")
    return LinkSpec(rate_bit_per_s=rate, burst_bytes=burst, latency_s=latency, mtu=mtu)


def problem() -> str | None:
    """Why an emulated link cannot be built here (None when it can)."""
    if os.geteuid() != 0:
        return (
            "--link needs root: it creates network namespaces, veth pairs, a bridge and tbf "
            f"qdiscs (run it as root, e.g. with sudo); {SHIPPED_HINT}"
        )
    absent = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if absent:
        return (
            f"--link needs iproute2 ({' and '.join(absent)} not found): as root, "
            f"`make link-tools` installs it; {SHIPPED_HINT}"
        )
    return None


def _run(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LinkError(f"`{' '.join(cmd)}` could not run: {exc}") from None
    if check and proc.returncode != 0:
        why = " ".join(proc.stderr.split()) or f"exit status {proc.returncode}"
        raise LinkError(f"`{' '.join(cmd)}` failed: {why}")
    return proc


def namespaces() -> list[str]:
    """Network namespaces that exist now (names, as `ip netns list` gives them)."""
    out = _run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _owner(name: str) -> int | None:
    match = re.match(rf"^{PREFIX}(\d+)-(?:r\d+|sw)$", name)
    return int(match.group(1)) if match else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Delete the link namespaces of runs whose process no longer exists; return their names."""
    stale = [n for n in namespaces() if (pid := _owner(n)) is not None and not _alive(pid)]
    for name in stale:
        _run(["ip", "netns", "delete", name], check=False)
    return stale


class _Stop(KeyboardInterrupt):
    """SIGTERM or SIGHUP while the link exists: unwind like Ctrl-C, so everything is removed."""


def _stop(signum, _frame):
    raise _Stop(f"stopped by {signal.Signals(signum).name}")


class EmulatedLink:
    """`ranks` namespaces joined by rate-limited veth cables to one bridge, for one run.

    Use as a context manager: entering builds it (or removes what it built and raises
    LinkError), leaving deletes every namespace, whatever the way out. While it exists, SIGTERM
    and SIGHUP raise KeyboardInterrupt in the main thread so that the same clean-up runs.
    """

    def __init__(self, spec: LinkSpec, ranks: int, owner: int | None = None):
        if not 2 <= int(ranks) <= MAX_RANKS:
            raise ValueError(f"an emulated link joins 2 to {MAX_RANKS} ranks, got {ranks}")
        self.spec = spec
        self.ranks = int(ranks)
        tag = f"{PREFIX}{os.getpid() if owner is None else int(owner)}"
        self.rank_ns = [f"{tag}-r{i}" for i in range(self.ranks)]
        self.switch_ns = f"{tag}-sw"
        self._saved_handlers: dict = {}

    @property
    def names(self) -> list[str]:
        """Every namespace of this link."""
        return [*self.rank_ns, self.switch_ns]

    def address(self, rank: int) -> str:
        return f"{SUBNET}.{rank + 1}"

    @property
    def env(self) -> dict[str, str]:
        """Environment for the MPI job: TCP on the link's interface only, and the provenance."""
        return {
            "MPIR_CVAR_NOLOCAL": "1",
            "UCX_TLS": "tcp,self",
            "UCX_NET_DEVICES": IFACE,
            "FI_PROVIDER": "tcp",
            "FI_TCP_IFACE": IFACE,
            environment.LINK_ENV: self.describe(),
        }

    def describe(self) -> str:
        return f"{self.spec.describe()} ({self.ranks} namespaces, veth to a bridge)"

    def wrap(self, rank: int) -> list[str]:
        """The prefix that runs a command as rank `rank`, inside its namespace."""
        return ["ip", "netns", "exec", self.rank_ns[rank]]

    def command(self, launcher: str, program: list[str]) -> list[str]:
        """An MPMD mpiexec command: one block per rank, each in its own namespace."""
        argv = [launcher]
        for rank in range(self.ranks):
            argv += [*([":"] if rank else []), "-n", "1", *self.wrap(rank), *program]
        return argv

    # -- life cycle ------------------------------------------------------------------------
    def build(self) -> None:
        """Create the namespaces, cables, bridge and qdiscs (raises LinkError on failure)."""
        existing = set(namespaces())
        taken = [n for n in self.names if n in existing]
        if taken:
            raise LinkError(f"network namespace {taken[0]} exists already (another run?)")
        sw = self.switch_ns
        for name in self.names:
            _run(["ip", "netns", "add", name])
        _run(["ip", "-n", sw, "link", "add", BRIDGE, "type", "bridge"])
        _run(["ip", "-n", sw, "link", "set", BRIDGE, "up"])
        mtu = str(self.spec.mtu)
        for rank, ns in enumerate(self.rank_ns):
            port = f"port{rank}"
            cable = ["ip", "link", "add", IFACE, "netns", ns, "type", "veth"]
            _run([*cable, "peer", "name", port, "netns", sw])
            _run(["ip", "-n", ns, "addr", "add", f"{self.address(rank)}/24", "dev", IFACE])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            _run(["ip", "-n", ns, "link", "set", IFACE, "mtu", mtu, "up"])
            _run(["ip", "-n", sw, "link", "set", port, "mtu", mtu, "master", BRIDGE, "up"])
            for where, dev in ((ns, IFACE), (sw, port)):
                _run(["tc", "-n", where, "qdisc", "add", "dev", dev, "root", *self.spec.tbf_args()])

    def teardown(self) -> list[str]:
        """Delete this link's namespaces (their veths and qdiscs go with them); return leftovers."""
        present = set(namespaces())
        for name in self.names:
            if name in present:
                _run(["ip", "netns", "delete", name], check=False)
        present = set(namespaces())
        return [n for n in self.names if n in present]

    def __enter__(self) -> EmulatedLink:
        self._catch_signals()
        try:
            remove_stale()
            self.build()
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._ignore_signals()  # a second Ctrl-C or SIGTERM must not cut the clean-up short
        try:
            left = self.teardown()
        finally:
            self._restore_signals()
        if left and exc[0] is None:
            raise LinkError(f"could not delete network namespace(s) {', '.join(left)}")

    def _catch_signals(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                self._saved_handlers[sig] = signal.signal(sig, _stop)
            except ValueError:  # not the main thread: the caller handles its own signals
                return

    def _ignore_signals(self) -> None:
        if not self._saved_handlers:
            return
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        self._saved_handlers.setdefault(signal.SIGINT, previous)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)

    def _restore_signals(self) -> None:
        while self._saved_handlers:
            sig, handler = self._saved_handlers.popitem()
            signal.signal(sig, handler)
