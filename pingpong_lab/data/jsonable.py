"""Plain JSON values from what the analysis produces (numpy scalars and arrays, NaN, tuples)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["jsonable"]


def jsonable(value):
    """A copy of value that json.dumps writes as strict JSON.

    Dicts get string keys, tuples and numpy arrays become lists, numpy scalars Python numbers,
    and NaN or infinities null (JSON has no NaN). Anything else is returned as it is.
    """
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
