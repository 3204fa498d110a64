"""--input-shape / --batch on one graph input: the rule every frontend and the static-shapes
pass share (nhwc_onnx.ir.input_shapes)."""
from __future__ import annotations

from nhwc_onnx.ir.input_shapes import find_override, input_shape


def test_override_wins_over_the_declared_shape():
    assert input_shape((None, 3, 7, 5), [2, 3, 11, 13]) == (2, 3, 11, 13)
    assert input_shape(None, [2, 3]) == (2, 3)
    assert input_shape(None) is None  # unknown rank stays unknown


def test_batch_fills_only_an_unknown_first_dimension_by_default():
    assert input_shape((None, 3, 7, 5), batch=4) == (4, 3, 7, 5)
    assert input_shape((0, 3, 7, 5), batch=4) == (4, 3, 7, 5)  # 0: "any batch" in some exports
    assert input_shape((2, 3, 7, 5), batch=4) == (2, 3, 7, 5)
    assert input_shape((2, None, 7, 5), batch=4) == (2, None, 7, 5)


def test_batch_replaces_a_fixed_first_dimension_when_asked():
    assert input_shape((2, 3, 7, 5), batch=4, batch_replaces_fixed=True) == (4, 3, 7, 5)
    assert input_shape((2, 3, 7, 5), [1, 3, 9, 9], 6, batch_replaces_fixed=True) == (6, 3, 9, 9)
    assert input_shape((), batch=4, batch_replaces_fixed=True) == ()


def test_find_override_tries_every_name_in_order():
    overrides = {"x": [1, 2], "y:0": [3]}
    assert find_override(overrides, "x:0", "x") == [1, 2]
    assert find_override(overrides, "y:0", "y") == [3]
    assert find_override(overrides, "z:0", None, "z") is None
