"""The declared core-op table (passes/to_dialect/op_table.py) and the up-front scan that reads
it."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.ir import CORE, UNCONVERTED, Model
from nhwc_onnx.passes.scan import isolate_unconverted, scan
from nhwc_onnx.passes.to_dialect import op_table
from nhwc_onnx.passes.to_dialect.normalize_padding import _KINDS
from nhwc_onnx.passes.to_dialect.op_table import ALWAYS, NEVER, TABLE, WHEN
from nhwc_onnx.passes.to_dialect.select_and_legalize import LEGALIZE, SELECT
from nhwc_onnx.schemas import CORE_OPS, DIALECT_OPS
from tests.passes.dialect_oracles import Builder, convert, rand, run_dialect

SHAPE = (2, 3, 5, 7)


def test_every_core_op_is_declared_once_with_what_it_becomes():
    assert sorted(TABLE) == sorted(CORE_OPS.names())
    for op, entry in TABLE.items():
        assert entry.converts in (ALWAYS, WHEN, NEVER), op
        assert set(entry.dialect_ops) <= set(DIALECT_OPS.names()), op
        if entry.converts == ALWAYS:
            assert not entry.condition and entry.refuted is None, op
        else:
            assert entry.condition, f"{op}: {entry.converts} needs a condition or a reason"
        if entry.converts == NEVER:
            assert not entry.dialect_ops and entry.select is None and entry.legalize is None, op
        elif entry.dialect_ops and op not in ("Greater", "Exp"):  # those: in Where idioms
            assert entry.select is not None or entry.legalize is not None, op


def test_the_passes_read_their_op_lists_from_the_table():
    assert {op: e.select for op, e in TABLE.items() if e.select is not None} == SELECT
    assert {op: e.legalize for op, e in TABLE.items() if e.legalize is not None} == LEGALIZE
    assert _KINDS == {"Conv": "conv", "MaxPool": "max", "AveragePool": "avg"}
    assert op_table.pass_through_ops() == {"Identity", "Dropout"}


def test_square_becomes_a_product_of_the_input_with_itself():
    b = Builder(SHAPE)
    model = b.model(b.op("Square", [b.x], SHAPE, name="sq"))
    convert(model)
    assert model.graph.op_counts() == {"Mul": 1}
    x = rand(*SHAPE)
    assert np.array_equal(run_dialect(model, x), x * x)


# -- the scan -----------------------------------------------------------------------------------


def _scan(model: Model) -> dict[str, str]:
    return {p.node: p.reason for p in scan(model)}


def test_scan_refuses_never_ops_and_refuted_conditions_on_run_time_data_only():
    b = Builder(SHAPE)
    erf = b.op("Erf", [b.x], SHAPE, name="erf")
    folded = b.op("Erf", [b.const(rand(*SHAPE), "w")], SHAPE, name="erf_of_weights")
    by_tensor = b.op("Div", [erf, b.x], SHAPE, name="div_by_x")
    by_const = b.op("Div", [by_tensor, b.const(np.float32(3.0), "three")], SHAPE,
                    name="div_by_three")
    shape = b.op("Shape", [b.x], (4,), name="shape")
    b.op("Sqrt", [b.x], SHAPE, name="dead_sqrt")  # no output needs it: cleaned up, no refusal
    model = b.model(b.op("Add", [by_const, folded], SHAPE, name="add"),
                    b.op("Cast", [shape], (4,), name="shape_as_float", to="float32"))
    found = _scan(model)
    assert found == {"erf": "no dialect op computes the error function",
                     "div_by_x": "division by a tensor computed at run time has no dialect "
                                 "form"}


def test_scan_leaves_idioms_and_undecidable_conditions_to_the_passes():
    b = Builder(SHAPE)
    positive = b.op("Greater", [b.x, b.const(np.float32(0), "zero")], SHAPE, name="positive")
    scaled = b.op("Mul", [b.x, b.const(np.float32(0.2), "alpha")], SHAPE, name="scaled")
    leaky = b.op("Where", [positive, b.x, scaled], SHAPE, name="leaky")
    soft = b.op("Softmax", [leaky], SHAPE, name="soft", axis=1)  # decided after the layout
    assert _scan(b.model(soft)) == {}
    convert(b.model(b.op("Where", [positive, b.x, scaled], SHAPE, name="leaky2")))


def test_scan_refuses_a_comparison_that_is_not_an_idiom_test():
    b = Builder(SHAPE)
    positive = b.op("Greater", [b.x, b.const(np.float32(0), "zero")], SHAPE, name="positive")
    positive.dtype = "bool"
    mask = b.op("Cast", [positive], SHAPE, name="mask", to="float32")
    found = _scan(b.model(mask))
    assert set(found) == {"positive", "mask"}
    assert "only the x > 0 test" in found["positive"]


# -- refused source nodes set aside ------------------------------------------------------------


def test_isolate_keeps_what_refused_nodes_read_and_drops_what_they_feed():
    """x -> relu -> [refused] -> tanh -> out1; relu -> out2. The stand-in keeps relu's
    output alive (judged by the passes), tanh and out1 go, out2 stays."""
    b = Builder(SHAPE)
    relu = b.op("Relu", [b.x], SHAPE, name="relu")
    lost = b.g.new_value("lost", shape=SHAPE)  # the refused node's output: nobody makes it
    b.g.make_node("Mystery", [relu], name="mystery", domain=UNCONVERTED)
    tanh = b.op("Tanh", [lost], SHAPE, name="tanh")
    sig = b.op("Sigmoid", [relu], SHAPE, name="sig")
    model = b.model(tanh, sig)
    model.refused = ["(the frontend's problem)"]
    dropped = isolate_unconverted(model)
    assert [v.name for v in dropped] == ["tanh"]
    ops = {n.name: (n.op, n.domain) for n in model.graph.nodes}
    assert ops == {"relu": ("Relu", CORE), "sig": ("Sigmoid", CORE),
                   "mystery": ("Mystery", UNCONVERTED)}
    stand_in = model.graph.find_node("mystery")
    assert stand_in.inputs == (relu,) and stand_in.output in model.graph.outputs
    assert stand_in.output.shape == () and len(model.graph.outputs) == 2


@pytest.mark.parametrize("op", sorted(op for op, e in TABLE.items() if e.converts == NEVER))
def test_every_never_op_on_run_time_data_is_refused_by_the_scan(op):
    schema = CORE_OPS[op]
    b = Builder(SHAPE)
    inputs = [b.x] + [b.const(np.float32(2.0), f"c{i}") for i in range(1, len(schema.inputs))]
    attrs = {"ArgMax": {"axis": 1}}.get(op, {})
    model = b.model(b.op(op, inputs, SHAPE, name="node", **attrs))
    assert _scan(model) == {"node": TABLE[op].condition}
