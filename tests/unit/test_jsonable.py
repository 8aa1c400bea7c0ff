"""data.jsonable: one cleaner for every JSON file the package writes."""

from __future__ import annotations

import json
import math

import numpy as np

from pingpong_lab.data.jsonable import jsonable


def test_numpy_nan_tuples_and_keys_become_strict_json():
    value = {
        "a": np.float64(1.5),
        "n": np.int64(3),
        "flag": np.bool_(True),
        "nan": math.nan,
        "inf": -math.inf,
        "np_nan": np.float32("nan"),
        8: (1, 2.0, math.nan),
        "array": np.array([[1.0, np.nan], [2.0, 3.0]]),
        "nested": [{"x": np.inf}],
        "text": "ok",
        "none": None,
    }
    out = jsonable(value)
    assert out == {
        "a": 1.5,
        "n": 3,
        "flag": True,
        "nan": None,
        "inf": None,
        "np_nan": None,
        "8": [1, 2.0, None],
        "array": [[1.0, None], [2.0, 3.0]],
        "nested": [{"x": None}],
        "text": "ok",
        "none": None,
    }
    assert type(out["n"]) is int and type(out["a"]) is float
    json.dumps(out, allow_nan=False)  # strict JSON


def test_the_input_is_left_as_it_was():
    value = {"x": [math.nan]}
    jsonable(value)
    assert math.isnan(value["x"][0])
