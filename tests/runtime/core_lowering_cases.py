"""One core node against its lowering: the core op's numpy evaluator (the reference meaning)
and onnxruntime running ``lower_core_model`` of a one-node model, on the same random inputs.

A case lists the node's inputs as ``fed`` (a graph input), ``const`` (a constant: weights,
shapes) or None (an absent optional input)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import onnxruntime as ort

from nhwc_onnx.ir import Graph, Model, Value
from nhwc_onnx.runtime.standard_onnx import lower_core_model
from nhwc_onnx.schemas.core import evaluate_node

RNG = np.random.default_rng(20261129)
TOL = 1e-5  # float32: max abs error over max(1, max |reference|)


class Case(NamedTuple):
    name: str
    op: str
    inputs: list  # ("fed" | "const", array) or None
    attrs: dict = {}
    outputs: int = 1
    tol: float = TOL


def fed(array) -> tuple:
    return ("fed", np.asarray(array))


def const(array) -> tuple:
    return ("const", np.asarray(array))


def rand(*shape, dtype="float32", low=-2.0, high=2.0) -> np.ndarray:
    return RNG.uniform(low, high, shape).astype(dtype)


def ints(*shape, low=-5, high=6, dtype="int64") -> np.ndarray:
    return RNG.integers(low, high, shape).astype(dtype)


def one_node_model(case: Case) -> tuple[Model, dict, list]:
    """The core model of the case's node, its feeds, and the evaluator's inputs."""
    graph = Graph("case")
    values, feeds, arrays = [], {}, []
    for i, given in enumerate(case.inputs):
        if given is None:
            values.append(None)
            arrays.append(None)
            continue
        kind, array = given
        arrays.append(array)
        if kind == "const":
            values.append(graph.constant(array, f"c{i}"))
        else:
            values.append(graph.add_input(Value(f"x{i}", dtype=str(array.dtype),
                                                shape=array.shape)))
            feeds[f"x{i}"] = array
    node = graph.make_node(case.op, values, dict(case.attrs), name="node",
                           outputs=case.outputs)
    graph.outputs.extend(node.outputs)
    return Model(graph), feeds, arrays


def check_case(case: Case) -> None:
    model, feeds, arrays = one_node_model(case)
    want = evaluate_node(model.graph.nodes[0], arrays)
    for out, array in zip(model.graph.outputs, want):
        out.dtype = str(array.dtype)  # the graph's declared output types
    got = run_lowered(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_matches(g, w, case.tol)


def run_lowered(model: Model, feeds: dict) -> list[np.ndarray]:
    proto = lower_core_model(model)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(proto.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run([v.name for v in model.graph.outputs], feeds)


def assert_matches(got, want, tol: float = TOL) -> float:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind not in "fc":
        np.testing.assert_array_equal(got, want)
        return 0.0
    if not want.size:
        return 0.0
    assert np.array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    scale = max(1.0, float(np.max(np.abs(want[finite]), initial=0.0)))
    err = float(np.max(np.abs(got[finite].astype(np.float64) - want[finite]), initial=0.0))
    assert err <= tol * scale, f"max abs error {err} > {tol * scale}"
    return err
