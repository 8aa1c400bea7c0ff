"""Load C kernels (kernels_c/) into this process through ctypes, and compile learners' C.

The library is checked before it is loaded (the "ABI preflight"): it must have been compiled
against the same MPI as mpi4py, or MPI handles passed to it would be garbage. The build stamps
"PP_BUILD_INFO:vendor=...;version=...;handle=...;" into the binary; we read it from the file.
"""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .. import runtime
from ..errors import ABIMismatchError, CompileError, KernelError
from . import cinterface, environment

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
KERNELS_DIR = PACKAGE_ROOT / "kernels_c"


def kernels_build_dir() -> Path:
    """Where `make kernels` put the kernels for this Python environment's MPI.

    kernels_c/build, or for an environment made with `make MPI=system` the folder its
    pingpong-lab-kernels file names (kernels_c/build-system): kernels built against the
    wheel's MPI and against the system's live side by side.
    """
    marker = Path(sys.prefix) / "pingpong-lab-kernels"
    if marker.is_file():
        return KERNELS_DIR / marker.read_text(encoding="utf-8").strip()
    return KERNELS_DIR / "build"


KERNELS_BUILD = kernels_build_dir()
DEFAULT_LIBRARY = KERNELS_BUILD / "libpingpong.so"

MAX_BATCH = 1 << 22


def interface(path=None) -> cinterface.Interface:
    """The C interface (flags, tags, errors, kernels by mode) of a library, by default the
    course's own: read from the built file, pp_util.h being its one source."""
    return cinterface.read(path or DEFAULT_LIBRARY)


_INFO = re.compile(rb"PP_BUILD_INFO:vendor=([^;\0]*);version=([^;\0]*);handle=([^;\0]*);")
_loaded: dict[str, ctypes.CDLL] = {}


def build_info(path) -> dict:
    """What a kernels_c library says it was built against, read without loading it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} does not exist: build the C kernels first (`make kernels`)"
        )
    found = _INFO.search(path.read_bytes())
    if not found:
        raise ABIMismatchError(
            f"{path} carries no PP_BUILD_INFO stamp: compile it with kernels_c/pp_build_info.c"
        )
    vendor, version, handle = (part.decode() for part in found.groups())
    return {"vendor": vendor, "version": version, "handle": handle}


def runtime_info() -> dict:
    """The MPI that mpi4py runs on, in the terms of build_info()."""
    MPI = environment.require_mpi4py()
    name, version = MPI.get_vendor()
    handle = "int" if MPI._sizeof(MPI.Comm) == ctypes.sizeof(ctypes.c_int) else "pointer"
    return {"vendor": name, "version": ".".join(map(str, version)), "handle": handle}


def preflight(path) -> None:
    """Refuse a library built against another MPI than mpi4py's (vendor, version, handles)."""
    built, running = build_info(path), runtime_info()
    if built != running:
        raise ABIMismatchError(
            f"{path} was built against {built['vendor']} {built['version']} "
            f"(MPI handles are {built['handle']}s) but mpi4py runs on {running['vendor']} "
            f"{running['version']} (handles are {running['handle']}s). Rebuild it with this "
            f"environment's mpicc ({_mpicc_or_hint()}): `make kernels`."
        )


def _mpicc_or_hint() -> str:
    try:
        return environment.mpicc()
    except Exception:
        return "mpicc not found"


def comm_type():
    """The ctypes type of an MPI_Comm handle for mpi4py's MPI (int for MPICH, else pointer)."""
    MPI = environment.require_mpi4py()
    return ctypes.c_int if MPI._sizeof(MPI.Comm) == ctypes.sizeof(ctypes.c_int) else ctypes.c_void_p


def comm_handle(comm):
    """The C handle of an mpi4py communicator, as the right ctypes value."""
    MPI = environment.require_mpi4py()
    return comm_type()(MPI._handleof(comm))


def load(path=DEFAULT_LIBRARY, check_abi: bool = True) -> ctypes.CDLL:
    """Load a library once per process (after the ABI preflight) and declare its kernels."""
    key = str(Path(path).resolve())
    if key in _loaded:
        return _loaded[key]
    if check_abi:
        preflight(path)
        lib = ctypes.CDLL(key)
        MPI = environment.require_mpi4py()
        if hasattr(lib, "pp_sizeof_comm") and lib.pp_sizeof_comm() != MPI._sizeof(MPI.Comm):
            raise ABIMismatchError(
                f"{path}: sizeof(MPI_Comm) is {lib.pp_sizeof_comm()} bytes in the library "
                f"but {MPI._sizeof(MPI.Comm)} in mpi4py"
            )
    else:
        lib = ctypes.CDLL(key)
    for cname in cinterface.read(key).kernels.values():
        if hasattr(lib, cname):
            fn = getattr(lib, cname)
            fn.argtypes = [
                comm_type(),
                ctypes.c_size_t,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.POINTER(ctypes.c_double),
            ]
            fn.restype = ctypes.c_int
    _loaded[key] = lib
    return lib


def check_args(comm, nbytes, warmup, iters, batch=1, max_batch=None) -> None:
    """KernelError unless nbytes, warmup and iters are whole numbers >= 0, batch is a whole
    number >= 1 (below max_batch when given) and comm has at least 2 ranks: the arguments of
    every kernel, Python (kernels.py) or C (c_kernel)."""
    whole = (int, np.integer)
    if not isinstance(batch, whole) or isinstance(batch, bool) or batch < 1:
        raise KernelError(f"batch must be a positive number of round trips, got {batch!r}")
    if max_batch is not None and batch >= max_batch:
        raise KernelError(f"batch must be between 1 and {max_batch - 1}, got {batch}")
    for name, value in (("nbytes", nbytes), ("warmup", warmup), ("iters", iters)):
        if not isinstance(value, whole) or isinstance(value, bool) or value < 0:
            raise KernelError(f"{name} must be a non-negative integer, got {value!r}")
    if comm.Get_size() < 2:
        raise KernelError("a ping-pong needs at least 2 ranks; this communicator has 1")


def c_kernel(mode: str, path=DEFAULT_LIBRARY):
    """A Python callable with the interface of kernels.py that runs the C kernel `mode`."""
    api = interface(path)
    if mode not in api.kernels:
        raise ValueError(f"unknown C kernel {mode!r}; choose one of {sorted(api.kernels)}")

    def kernel(comm, nbytes, warmup, iters, shared_buffer=False, corrupt_echo=False, batch=1):
        lib = load(path)
        fn = getattr(lib, api.kernels[mode])
        check_args(comm, nbytes, warmup, iters, batch, max_batch=MAX_BATCH)
        samples = np.full(max(int(iters), 1), np.nan)
        flags = api.flags(shared_buffer, corrupt_echo, batch)
        rc = fn(
            comm_handle(comm),
            int(nbytes),
            int(warmup),
            int(iters),
            flags,
            samples.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
        )
        if rc < 0:
            raise KernelError(f"C kernel {mode} at {nbytes} B: {api.error_text(rc)}")
        return samples[: int(iters)], rc

    kernel.__name__ = f"c_{mode}"
    return kernel


def windowed(
    comm, nbytes, warmup, iters, window=64, both=False, corrupt=False, path=DEFAULT_LIBRARY
):
    """Run the windowed C kernel: osu_bw's method (both=False) or osu_bibw's (both=True).

    Returns (samples, corrupted): samples[i] is rank 0's time in seconds for window i, W
    messages of nbytes (and, for bw, their 1-byte acknowledgement); NaN on other ranks.
    The bandwidth of a window is window * nbytes / sample, twice that for bibw. `corrupt`
    sends the last message of every window with one byte flipped (the receiver counts it).
    """
    if not 1 <= int(window) < MAX_BATCH:
        raise KernelError(f"window must be between 1 and {MAX_BATCH - 1}, got {window}")
    kernel = c_kernel("bibw" if both else "bw", path)
    return kernel(comm, nbytes, warmup, iters, corrupt_echo=corrupt, batch=int(window))


# -- learners' C ------------------------------------------------------------------------------
# (process, $PINGPONG_LAB_BUILD) -> this process's build folder there, and its lock
_OWN_BUILD: dict[tuple[int, Path], tuple[Path, int]] = {}


def build_dir() -> Path:
    """Where this process compiles learner libraries: a new folder of its own, under
    $PINGPONG_LAB_BUILD (default ~/.cache/pingpong-lab), made when first asked for.

    Builds are cached within the process only. A folder another process could have written
    (an earlier kernel, a learner's program) is never trusted: what it holds could be planted
    there under the name a build would have. The folder holds a lock while its process lives;
    it goes when the process ends normally, and folders whose lock is free (their process was
    killed) are removed when a new one is made."""
    root = Path(runtime.setting("PINGPONG_LAB_BUILD") or (Path.home() / ".cache" / "pingpong-lab"))
    own = _OWN_BUILD.get((os.getpid(), root))
    if own is not None and own[0].is_dir():
        return own[0]
    root.mkdir(parents=True, exist_ok=True)
    _remove_orphans(root)
    path = Path(tempfile.mkdtemp(prefix="build-", dir=root))
    lock = os.open(path / ".lock", os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    _OWN_BUILD[os.getpid(), root] = (path, lock)
    atexit.register(shutil.rmtree, path, True)
    return path


def _remove_orphans(root: Path) -> None:
    """Remove the build folders whose process has ended without removing them."""
    for lock_file in root.glob("build-*/.lock"):
        try:
            fd = os.open(lock_file, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its process still runs
        finally:
            os.close(fd)
        shutil.rmtree(lock_file.parent, ignore_errors=True)


def build_cached(
    name: str, source: str, *, compiler: str, flags=(), extra=(), shared=True, timeout=120.0
) -> Path:
    """Compile C source text (plus the C files `extra`) into build_dir(), once per content
    and process.

    The output is named after a hash of everything that goes into it, so an edited cell never
    reuses a stale build (dlopen would return the old library for the same path), and it is
    renamed into place only when complete. `shared`: a library (-fPIC -shared), else an
    executable. Raises CompileError with the compiler's messages (file names as the learner
    knows them) when it fails; prints its warnings when it succeeds.
    """
    if not isinstance(source, str) or not source.strip():
        raise CompileError("there is no C source to compile (the cell or file is empty)")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"name must be a C-like identifier, got {name!r}")
    extra = [Path(p) for p in extra]
    recipe = [source, compiler, *flags, str(shared), *(p.read_text() for p in extra)]
    digest = hashlib.sha1("\0".join(recipe).encode()).hexdigest()[:12]
    out_dir = build_dir()
    src = out_dir / f"{name}_{digest}.c"
    out = out_dir / (f"lib{name}_{digest}.so" if shared else f"{name}_{digest}")
    if out.exists():
        return out
    src.write_text(source)
    tmp = out_dir / f".{out.name}.{os.getpid()}.tmp"
    cmd = [compiler, *flags, *(["-fPIC", "-shared"] if shared else [])]
    cmd += [str(src), *map(str, extra), "-o", str(tmp), "-lm"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        tmp.unlink(missing_ok=True)
        raise CompileError(f"compiling {name}.c took more than {timeout:g} s") from None
    messages = proc.stderr.replace(str(src), f"{name}.c").strip()
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise CompileError(f"{name}.c does not compile:\n{messages}")
    os.replace(tmp, out)  # atomic: a half-written library is never loaded
    if messages:
        print(f"compiler warnings for {name}.c:\n{messages}")
    return out


def compile_c(
    source: str, name: str = "student", with_util: bool = True, cflags=(), extra=()
) -> Path:
    """Compile C source text with this environment's mpicc into a uniquely named library.

    kernels_c/ is on the include path and pp_build_info.c (the ABI stamp) is always compiled
    in; with `with_util`, so is kernels_c/pp_util.c (buffers, payload, timing loop); `extra`
    adds more C files. Raises CompileError with the compiler's messages when it fails.
    """
    files = [KERNELS_DIR / "pp_build_info.c", *([KERNELS_DIR / "pp_util.c"] if with_util else [])]
    flags = ["-O2", "-g", "-Wall", "-Wextra", f"-I{KERNELS_DIR}", *cflags]
    compiler = environment.mpicc()
    return build_cached(name, source, compiler=compiler, flags=flags, extra=[*files, *extra])


# mpi4py has a fixed number of slots (32) for Python error handlers per process, and freeing a
# handler does not give its slot back: call_c creates one recorder per process and reuses it.
_reported: list[str] = []
_recorder = None


def _error_recorder(MPI):
    """This process's error handler that appends MPI's messages to _reported."""
    global _recorder
    if _recorder is None:

        def record(_comm, code):
            _reported.append(MPI.Get_error_string(code))

        _recorder = MPI.Comm.Create_errhandler(record)
    return _recorder


def call_c(path, function: str, comm, *args, restype=ctypes.c_int, check_abi: bool = True):
    """Call `function(comm_handle, *args)` from a library (loaded once per process).

    An MPI error inside the call (which C code often ignores) raises KernelError with MPI's
    own message on the rank where it happened.
    """
    lib = load(path, check_abi=check_abi)
    if not hasattr(lib, function):
        raise KernelError(f"{Path(path).name} has no function named {function!r}")
    fn = getattr(lib, function)
    fn.restype = restype
    # mpi4py makes MPI errors return codes (to raise exceptions), and C that ignores them
    # carries on silently after, say, a truncated receive. During the call, an error handler
    # records what MPI reported; it is raised here, on the rank where it happened.
    MPI = environment.require_mpi4py()
    handler = _error_recorder(MPI)
    _reported.clear()
    previous = comm.Get_errhandler()
    comm.Set_errhandler(handler)
    try:
        result = fn(comm_handle(comm), *args)
    finally:
        comm.Set_errhandler(previous)
        previous.Free()
    if _reported:
        reported = list(dict.fromkeys(_reported))
        _reported.clear()
        raise KernelError(
            f"MPI reported an error inside {function}(): {'; '.join(reported)}. "
            "Check that both sides agree on peers, tags, counts and datatypes (a receive must "
            "be at least as large as the message)."
        )
    return result
