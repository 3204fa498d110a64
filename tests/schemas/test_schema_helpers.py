"""Helpers every shape inference runs per node: same answers on their fast paths."""
from __future__ import annotations

import numpy as np

from nhwc_onnx.schemas import CORE_OPS
from nhwc_onnx.schemas.core.define import prod


def test_prod_is_int64_arithmetic_including_its_wrap_around():
    assert prod([2, 3, 7]) == 42 and prod([]) == 1
    assert prod([5, None, 2]) is None
    assert prod([np.int64(6), 7]) == 42
    huge = [1 << 40, 1 << 40, 3]  # past int64: the value numpy's int64 product gives
    assert prod(huge) == int(np.prod(huge, dtype=np.int64))
    assert prod([1 << 31, 1 << 31]) == 1 << 62  # still fits: exact


def test_with_defaults_gives_a_fresh_dict_each_time():
    conv = CORE_OPS["Conv"]
    first = conv.with_defaults({"group": 2})
    assert first["group"] == 2 and first["auto_pad"] == "NOTSET"
    first["auto_pad"] = "VALID"  # a caller's edit stays in its own dict
    first.pop("group")
    again = conv.with_defaults({})
    assert again["auto_pad"] == "NOTSET" and again["group"] == 1
    assert list(conv.with_defaults({"pads": [1, 1, 1, 1]}))[: len(again)] == list(again)
