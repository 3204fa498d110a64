"""Static shapes: overrides, inference on every value, clear errors for unknown inputs."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.errors import InvalidModelError, UsageError
from nhwc_onnx.ir import Graph, Model, Value
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.passes import PassContext
from nhwc_onnx.passes.static_shapes import StaticShapes
from tests.core_reference import run_core

RNG = np.random.default_rng(3)
WEIGHT = RNG.normal(size=(4, 3, 3, 2)).astype(np.float32)


def _model(shape=(None, 3, None, 7)):
    g = Graph()
    x = g.add_input(Value("x:0", shape=shape, layout="NCHW"))
    conv = g.make_node("Conv", [x, g.constant(WEIGHT, "w")],
                       {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
                       name="conv")
    pool = g.make_node("MaxPool", [conv.output], {"kernel_shape": [2, 2], "strides": [2, 2],
                                                  "ceil_mode": 1}, name="pool")
    shape = g.make_node("Shape", [pool.output], name="shape")
    flat = g.make_node("Flatten", [pool.output], name="flat")
    less = g.make_node("Less", [flat.output, g.constant(np.float32(0.5), "half")], name="less")
    g.outputs += [flat.output, shape.output, less.output]
    return Model(g)


def test_overrides_then_every_value_has_a_static_shape_matching_evaluation():
    model = _model()
    ctx = PassContext(options=ConvertOptions(input_shapes={"x": [-1, 3, 11, 7]}, batch=2))
    result = StaticShapes(require_static=True)(model, ctx)
    assert result.modified
    g = model.graph
    assert g.inputs[0].shape == (2, 3, 11, 7)  # --batch sets the batch -1 left open
    assert ctx.warnings == []

    computed = run_core(model, {"x:0": RNG.normal(size=(2, 3, 11, 7)).astype(np.float32)},
                        extra_outputs=["conv", "pool"])
    for name, array in computed.items():
        v = g.find_value(name)
        assert v.shape == array.shape, name
        assert np.dtype(v.dtype) == array.dtype, name
    assert g.find_value("shape").dtype == "int64" and g.find_value("less").dtype == "bool"
    assert {d.kind for d in ctx.decisions} == {"input_shape"}


def test_an_explicit_batch_that_contradicts_batch_is_a_usage_error():
    with pytest.raises(UsageError, match=r"--input-shape x gives the batch 2.*--batch 5"):
        ConvertOptions(input_shapes={"x": [2, 3, 11, 7]}, batch=5)
    assert ConvertOptions(input_shapes={"x": [5, 3, 11, 7]}, batch=5).batch == 5


def test_batch_fills_an_unknown_first_dimension_only():
    model = _model((None, 3, 11, 7))
    ctx = PassContext(options=ConvertOptions(batch=4))
    StaticShapes()(model, ctx)
    assert model.graph.inputs[0].shape == (4, 3, 11, 7)
    assert model.graph.find_value("pool").shape == (4, 4, 3, 2)
    assert ctx.warnings == []


def test_nothing_to_do_reports_unmodified():
    model = _model((2, 3, 11, 7))
    StaticShapes()(model, PassContext())
    assert StaticShapes()(model, PassContext()).modified is False


def test_unknown_input_dims_name_the_input_and_the_options():
    with pytest.raises(InvalidModelError) as err:
        StaticShapes()(_model(), PassContext())
    message = str(err.value)
    assert "'x:0'" in message and "--input-shape" in message and "--batch" in message
    with pytest.raises(InvalidModelError, match="'x:0'"):
        StaticShapes()(_model(), PassContext(options=ConvertOptions(batch=1)))  # H still unknown


def test_bad_overrides_are_rejected():
    # command-line mistakes: UsageError, exit 2
    with pytest.raises(UsageError, match="not a graph input"):
        StaticShapes()(_model(),
                       PassContext(options=ConvertOptions(input_shapes={"y": [1, 3, 4, 4]})))
    with pytest.raises(UsageError, match="rank 4"):
        StaticShapes()(_model(),
                       PassContext(options=ConvertOptions(input_shapes={"x:0": [1, 3, 4]})))


def test_broken_rule_names_the_node():
    g = Graph()
    x = g.add_input(Value("x", shape=(1, 2, 5, 5)))
    g.outputs.append(g.make_node("Conv", [x, g.constant(WEIGHT, "w")], {"kernel_shape": [3, 2]},
                                 name="bad_conv").output)
    with pytest.raises(InvalidModelError, match="bad_conv"):
        StaticShapes()(Model(g), PassContext())


def test_zero_size_input_dims_need_an_override():
    with pytest.raises(InvalidModelError, match="zero-size"):
        StaticShapes()(_model((2, 3, 0, 7)), PassContext())
    model = _model((0, 3, 11, 7))
    StaticShapes()(model, PassContext(options=ConvertOptions(batch=3)))
    assert model.graph.inputs[0].shape == (3, 3, 11, 7)
