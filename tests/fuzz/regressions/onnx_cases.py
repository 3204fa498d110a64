"""Failures the graph fuzzer found, shrunk by hypothesis and kept as small ONNX builders, each
named for what it shows. ``PENDING`` names the generator switch (tests/fuzz/onnx_graphs.py)
of a class another change is fixing: those cases fail today (strict xfail) until it lands."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.fuzz.claims import Made
from tests.fuzz.onnx_graphs import OnnxGraph


def _graph(nodes, dims, inits, opset, ir, batch=None, made=None, extra_inputs=()):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch or "N", *dims])
    consumed = {i for n in nodes for i in n.input}
    outs = [o for n in nodes for o in n.output if o not in consumed]
    graph = helper.make_graph(
        nodes, "regression", [x, *extra_inputs],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir
    made = made or {n.name: Made(n.op_type) for n in nodes}
    return OnnxGraph(model, made, batch, {"x": tuple(dims)})


def batchnorm_of_channel_reduced_map():
    """BatchNormalization of the rank-3 (N, H, W) left by ReduceMean over C: it normalises
    the source's axis 1, stored first after the batch (was refused as 'not the last
    (channel) axis' even with --allow-transpose)."""
    stats = {f"s{i}": np.linspace(0.5, 1.5, 3).astype(np.float32) for i in range(4)}
    nodes = [helper.make_node("ReduceMean", ["x"], ["r"], name="r", axes=[1], keepdims=0),
             helper.make_node("BatchNormalization", ["r", "s0", "s1", "s2", "s3"], ["y"],
                              name="bn", epsilon=1e-3)]
    return _graph(nodes, (2, 3, 4), stats, opset=7, ir=3, extra_inputs=[
        helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in stats])


def nonzero_pad_under_symbolic_batch():
    """Pad with value 0.5 under a symbolic batch: its constant border blocks would carry the
    batch, refused with the --batch remedy (the table's symbolic-batch note); with --batch
    it converts exactly (it was refused with no claim saying so)."""
    nodes = [helper.make_node("Pad", ["x", "p", "v"], ["y"], name="pad", mode="constant")]
    inits = {"p": np.array([0, 0, 1, 0, 0, 0, 0, 2], np.int64), "v": np.float32(0.5)}
    return _graph(nodes, (2, 3, 4), inits, opset=13, ir=7,
                  made={"pad": Made("Pad", {"mirrored_cells_exist": True})})


def full_map_constant_divisor_under_symbolic_batch():
    """x / c with c of the map's full shape under a symbolic batch: the constant would have
    to broadcast over the batch (the symbolic-batch note; --batch converts it)."""
    c = np.linspace(0.5, 1.5, 24).reshape(1, 2, 3, 4).astype(np.float32)
    nodes = [helper.make_node("Div", ["x", "c"], ["y"], name="div")]
    return _graph(nodes, (2, 3, 4), {"c": c}, opset=13, ir=7,
                  made={"div": Made("Div", {"broadcast": "full", "divisor_constant": True})})


def average_pool_divisor_fix_under_symbolic_batch():
    """AveragePool(count_include_pad=0) with padding no SAME pool has: the converter's divisor
    correction is a constant ratio map that would carry the batch (the symbolic-batch
    note)."""
    nodes = [helper.make_node("AveragePool", ["x"], ["y"], name="pool", kernel_shape=[2, 2],
                              pads=[1, 0, 0, 1])]
    return _graph(nodes, (3, 5, 7), {}, opset=12, ir=7,
                  made={"pool": Made("AveragePool", {"rank": 4})})


def batch_size_minimum_as_data():
    """x * min(N, 2) with a symbolic N: folded to the probes' value 2, wrong at batch 1."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
             helper.make_node("Cast", ["n"], ["nf"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Min", ["nf", "two"], ["m"], name="min"),
             helper.make_node("Mul", ["x", "m"], ["y"], name="mul")]
    inits = {"zero": np.array(0, np.int64), "two": np.float32(2)}
    made = {"shape": Made("Shape"), "gather": Made("Gather"),
            "cast": Made("Cast", {"to": "float32"}), "min": Made("Min"),
            "mul": Made("Mul", {"broadcast": "scalar"})}
    return _graph(nodes, (2, 3, 4), inits, opset=13, ir=7, made=made)


def ceil_pool_whose_last_window_starts_past_the_input():
    """MaxPool(ceil_mode=1, kernel 1, stride 2) on W=4 then an opset-10 Softmax(axis=1):
    onnx's shape inference keeps the window starting at 4 (W 3), onnxruntime drops it (W 2);
    the Softmax's 2-D coercion was built for W 3 ('cannot reshape [11, 12] to
    [11, 2, 3, 3]')."""
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], name="pool", kernel_shape=[1, 1],
                              strides=[1, 2], ceil_mode=1),
             helper.make_node("Softmax", ["p"], ["y"], name="softmax", axis=1)]
    made = {"pool": Made("MaxPool", {"rank": 4}),
            "softmax": Made("Softmax", {"single_axis": False, "axis_size": 2})}
    return _graph(nodes, (2, 3, 4), {}, opset=10, ir=5, made=made)


CASES = {f.__name__: f for f in (batch_size_minimum_as_data,
                                 ceil_pool_whose_last_window_starts_past_the_input, 
    batchnorm_of_channel_reduced_map, nonzero_pad_under_symbolic_batch,
    full_map_constant_divisor_under_symbolic_batch,
    average_pool_divisor_fix_under_symbolic_batch)}
# case -> the generator switch of the class another change is fixing
PENDING = {"batch_size_minimum_as_data": "batch-arithmetic"}

__all__ = ["CASES", "PENDING", "onnx"]
