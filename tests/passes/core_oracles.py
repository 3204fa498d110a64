"""Test helpers: one-node core graphs, and onnxruntime running the equivalent standard ONNX op."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from nhwc_onnx.ir import Graph, Model, Node, Value
from nhwc_onnx.schemas import core as core_eval

RNG = np.random.default_rng(1234)


def rand(*shape, dtype=np.float32, low=-1.0, high=1.0):
    return RNG.uniform(low, high, size=shape).astype(dtype)


def eval_core(op: str, inputs: list, attrs: dict | None = None, n_out: int = 1):
    """Evaluate one core op on arrays (None = absent optional input)."""
    ins = [None if a is None else Value(f"in{i}", const=np.asarray(a))
           for i, a in enumerate(inputs)]
    outs = [Value(f"out{i}") for i in range(n_out)]
    node = Node(op, ins, outs, attrs or {}, name=f"test_{op}")
    result = core_eval.evaluate_node(node, [None if a is None else np.asarray(a) for a in inputs])
    return result[0] if n_out == 1 else result


def run_onnx(op: str, inputs: list, attrs: dict | None = None, n_out: int = 1, opset: int = 17):
    """Run one standard ONNX op with onnxruntime; every input (None = absent) is fed at runtime."""
    names = ["" if a is None else f"in{i}" for i, a in enumerate(inputs)]
    graph_inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype),
                                      list(np.asarray(a).shape))
        for n, a in zip(names, inputs) if a is not None
    ]
    outs = [f"out{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    graph = helper.make_graph([node], "oracle", graph_inputs,
                              [helper.make_empty_tensor_value_info(o) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    # Output types come from ONNX's own shape inference (keeps the oracle independent of ours).
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type for v in inferred.graph.value_info}
    types.update({v.name: v.type for v in inferred.graph.output})
    for out in model.graph.output:
        out.type.CopyFrom(types[out.name])
        out.type.tensor_type.ClearField("shape")
    model.ir_version = 8
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    feeds = {n: np.asarray(a) for n, a in zip(names, inputs) if a is not None}
    result = sess.run(outs, feeds)
    return result[0] if n_out == 1 else result


def close(a, b, tol=1e-4):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"shape {a.shape} != {b.shape}"
    if a.dtype == bool or np.issubdtype(a.dtype, np.integer):
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def make_model(graph: Graph) -> Model:
    return Model(graph)


def tensor(array, name):
    return numpy_helper.from_array(np.asarray(array), name)


def run_pass_and_compare(build, feeds: dict, passes, ctx=None, tol=1e-4):
    """Build the model twice, run ``passes`` on one, compare run_core outputs of both.

    Inputs/outputs recorded in ``io_permutations`` are fed/compared permuted. Returns
    (rewritten model, list of PassResult, ctx).
    """
    from nhwc_onnx.passes import PassContext
    from tests.core_reference import run_core

    ctx = ctx or PassContext()
    reference = run_core(build(), feeds)
    model = build()
    results = [p(model, ctx) for p in passes]
    perms = model.io_permutations
    fed = {k: (v.transpose(perms[k]) if k in perms else v) for k, v in feeds.items()}
    got = run_core(model, fed)
    assert set(got) == set(reference)
    for name, want in reference.items():
        if name in perms:
            want = want.transpose(perms[name])
        close(got[name], want, tol)
    return model, results, ctx
