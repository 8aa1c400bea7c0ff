"""Shipping notebook functions to ipyparallel engines, with the globals they use."""

from __future__ import annotations

import marshal
import pickle
import types


def ship(fn, _depth=0):
    """Package a notebook function with the globals it uses, to run it on the engines.

    ipyparallel re-creates an interactively defined function on an engine with the engine's
    globals, where the notebook's imports and constants do not exist. ship() records the
    module names and plain values the function refers to (and other notebook functions it
    calls, recursively); unship() puts them in place on the engine.
    """
    if not isinstance(fn, types.FunctionType) or fn.__module__ not in ("__main__", None):
        return ("value", fn)
    names = set()

    def collect(code):
        names.update(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                collect(const)

    collect(fn.__code__)
    env = []
    for name in sorted(names):
        if name not in fn.__globals__:
            continue
        value = fn.__globals__[name]
        if isinstance(value, types.ModuleType):
            env.append((name, "module", value.__name__))
        elif isinstance(value, types.FunctionType) and value.__module__ == "__main__":
            if _depth < 3 and value is not fn:
                env.append((name, "shipped", ship(value, _depth + 1)))
        else:
            try:
                if len(pickle.dumps(value)) < 1_000_000:
                    env.append((name, "value", value))
            except Exception:
                pass
    return ("shipped", fn, tuple(env))


def unship(package):
    """The function of a ship() package, with its globals restored (runs on the engine)."""
    import importlib

    kind = package[0]
    if kind == "value":
        return package[1]
    _, fn, env = package
    for name, how, value in env:
        if how == "module":
            fn.__globals__.setdefault(name, importlib.import_module(value))
        elif how == "shipped":
            fn.__globals__.setdefault(name, unship(value))
        else:
            fn.__globals__.setdefault(name, value)
    return fn


def packed(fn) -> bytes:
    """ship(fn) as bytes, for a process of its own rather than the engines (a check's fresh MPI
    job): each notebook function in it as its compiled code (marshal), name, defaults and
    closure, the rest as it is, pickled. The job rebuilds the functions with unpacked(), without
    importing ipyparallel (a check's ranks start faster).

    A stand-in for a function that lives in another kernel (what a grading judge holds for a
    learner's function) is packed by the kernel that holds it: the judge only passes the bytes
    on to the job, it never unpickles them."""
    pack = getattr(type(fn), "packed_by_owner", None)
    if pack is not None:
        return pack(fn)

    def canned(package):
        if package[0] == "value":
            return package
        _, function, env = package
        cells = tuple(cell.cell_contents for cell in function.__closure__ or ())
        code = (marshal.dumps(function.__code__), function.__name__, function.__defaults__,
                function.__kwdefaults__, cells)  # fmt: skip
        env = tuple((name, how, canned(value) if how == "shipped" else value)
                    for name, how, value in env)  # fmt: skip
        return ("shipped", code, env)

    return pickle.dumps(canned(ship(fn)))


def unpacked(data: bytes):
    """The package of packed() bytes, for unship() (in the job that runs it, never the judge).
    Its functions share one namespace of their own, as the notebook's did."""
    import builtins

    space: dict = {"__builtins__": builtins, "__name__": "__main__"}

    def uncanned(package):
        if package[0] == "value":
            return package
        _, (code, name, defaults, kwdefaults, cells), env = package
        closure = tuple(types.CellType(value) for value in cells) or None
        function = types.FunctionType(marshal.loads(code), space, name, defaults, closure)
        function.__kwdefaults__ = kwdefaults
        env = tuple((name, how, uncanned(value) if how == "shipped" else value)
                    for name, how, value in env)  # fmt: skip
        return ("shipped", function, env)

    return uncanned(pickle.loads(data))  # noqa: S301 (a learner's function, in its own process)
