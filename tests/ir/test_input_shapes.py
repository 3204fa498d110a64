"""--input-shape / --batch on one graph input: the rule every frontend and the static-shapes
pass share (nhwc_onnx.ir.input_shapes): --input-shape gives the whole shape (-1 first: a
symbolic batch), --batch N then sets axis 0 of every input; without it a symbolic batch stays
symbolic (a probe size stands in for it while converting) and a fixed one stays fixed."""
from __future__ import annotations

from nhwc_onnx.ir.input_shapes import batch_symbol, find_override, input_shape


def test_override_wins_over_the_declared_shape():
    assert input_shape((None, 3, 7, 5), [2, 3, 11, 13]) == (2, 3, 11, 13)
    assert input_shape(None, [2, 3]) == (2, 3)
    assert input_shape(None) is None  # unknown rank stays unknown


def test_batch_sets_the_first_dimension_whatever_was_declared():
    # One rule for every frontend (it used to fill only an unknown batch for TensorFlow).
    assert input_shape((None, 3, 7, 5), batch=4) == (4, 3, 7, 5)
    assert input_shape((0, 3, 7, 5), batch=4) == (4, 3, 7, 5)  # 0: "any batch" in some exports
    assert input_shape((2, 3, 7, 5), batch=4) == (4, 3, 7, 5)
    assert input_shape((2, None, 7, 5), batch=4) == (4, None, 7, 5)


def test_batch_applies_after_the_override_and_skips_rank_zero():
    assert input_shape((2, 3, 7, 5), [1, 3, 9, 9], 6) == (6, 3, 9, 9)
    assert input_shape((), batch=4) == ()


def test_an_open_batch_takes_the_probe_size_and_other_open_dims_stay_unknown():
    assert input_shape(("batch", 3, 7, 5), probe=11) == (11, 3, 7, 5)
    assert input_shape((None, 3, "h", 5), probe=11) == (11, 3, None, 5)
    assert input_shape((-1, 3, 7, 5), probe=11) == (11, 3, 7, 5)
    assert input_shape((0, 3, 7, 5), probe=11) == (0, 3, 7, 5)  # empty, not open
    assert input_shape((2, 3, 7, 5), probe=11) == (2, 3, 7, 5)  # a fixed batch stays fixed
    assert input_shape((2, 3, 7, 5), [-1, 3, 7, 5], probe=11) == (11, 3, 7, 5)  # -1: opened
    assert input_shape(("batch", 3, 7, 5)) == (None, 3, 7, 5)  # no probe: unknown
    assert input_shape(("batch", 3), batch=4, probe=11) == (4, 3)  # --batch wins


def test_batch_symbol_is_the_source_name_else_n():
    assert batch_symbol(("batch", 3, 7, 5)) == "batch"
    assert batch_symbol(("unk__12", 3)) == "unk__12"
    assert batch_symbol((None, 3)) == "N"
    assert batch_symbol((0, 3)) is None  # a size: an empty tensor (--batch replaces it)
    assert batch_symbol((2, 3)) is None
    assert batch_symbol((2, 3), [-1, 3]) == "N"
    assert batch_symbol(("b", 3), [-1, 3]) == "b"
    assert batch_symbol(("b", 3), [4, 3]) is None
    assert batch_symbol(("b", 3), batch=4) is None
    assert batch_symbol(()) is None and batch_symbol(None) is None


def test_find_override_tries_every_name_in_order():
    overrides = {"x": [1, 2], "y:0": [3]}
    assert find_override(overrides, "x:0", "x") == [1, 2]
    assert find_override(overrides, "y:0", "y") == [3]
    assert find_override(overrides, "z:0", None, "z") is None
