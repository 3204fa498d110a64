"""Failures the graph fuzzer found, shrunk by hypothesis and kept as small ONNX builders, each
named for what it shows. ``PENDING`` maps a case that fails today (a strict xfail) to the
generator switch of its class when another change is fixing it (tests/fuzz/onnx_graphs.py), or
to "unfixed: ..." for a class found and not fixed yet."""
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
            "cast": Made("Cast", {"to": "float32"}), "min": Made("Min", {"from_batch": True}),
            "mul": Made("Mul", {"broadcast": "scalar", "from_batch": True})}
    return _graph(nodes, (2, 3, 4), inits, opset=13, ir=7, made=made)


def batch_size_halved_as_data():
    """x * floor(N / 2) with a symbolic N: the Floor is refused (never) and the Mul is a [batch]
    refusal; with --batch 3 the Floor reads only the fixed batch, folds to a constant and the
    graph converts exactly (the fuzzer's judge took that folded Floor for a never op that
    converted)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
             helper.make_node("Cast", ["n"], ["nf"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Div", ["nf", "two"], ["h"], name="div"),
             helper.make_node("Floor", ["h"], ["f"], name="floor"),
             helper.make_node("Mul", ["x", "f"], ["y"], name="mul")]
    inits = {"zero": np.array(0, np.int64), "two": np.float32(2)}
    made = {"shape": Made("Shape"), "gather": Made("Gather"),
            "cast": Made("Cast", {"to": "float32"}),
            "div": Made("Div", {"broadcast": "scalar", "divisor_constant": True,
                                "from_batch": True}),
            "floor": Made("Floor", {"constant": False, "from_batch": True}),
            "mul": Made("Mul", {"broadcast": "scalar", "from_batch": True})}
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


def strided_slice_of_a_transposed_map():
    """Slice with step 2 on axis 2 of t = Transpose(x, perm 0,1,3,2) when t also feeds another
    Transpose: t was stored as the other Transpose wanted it, with that axis in the channel
    place, and the Slice was refused ('only positive steps on the H and W axes of a 4-D map';
    without the second Transpose it converted). Now t is stored as a reader wants it only
    when every reader can take that order."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], name="t", perm=[0, 1, 3, 2]),
             helper.make_node("Transpose", ["t"], ["u"], name="u", perm=[0, 2, 1, 3]),
             helper.make_node("Slice", ["t", "st", "en", "ax", "sp"], ["y"], name="slice")]
    inits = {"st": np.array([0], np.int64), "en": np.array([1], np.int64),
             "ax": np.array([2], np.int64), "sp": np.array([2], np.int64)}
    made = {"t": Made("Transpose"), "u": Made("Transpose"),
            "slice": Made("Slice", {"steps_ok": True})}
    return _graph(nodes, (2, 3, 4), inits, opset=10, ir=5, batch=1, made=made)


def linear_resize_of_a_transposed_map():
    """A half-pixel linear Resize doubling axis 2 of t = Transpose(x, perm 0,1,3,2) when t also
    feeds another Transpose: refused like the strided Slice ('linear resize factors
    [1, 1, 1, 2] are not [1, sH, sW, 1]') until t's order was chosen for every reader."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], name="t", perm=[0, 1, 3, 2]),
             helper.make_node("Transpose", ["t"], ["u"], name="u", perm=[0, 2, 1, 3]),
             helper.make_node("Resize", ["t", "roi", "sc"], ["y"], name="resize", mode="linear",
                              coordinate_transformation_mode="half_pixel")]
    inits = {"roi": np.zeros(0, np.float32), "sc": np.array([1, 1, 2, 1], np.float32)}
    made = {"t": Made("Transpose"), "u": Made("Transpose"),
            "resize": Made("Resize", {"factors": [1, 1, 2, 1], "mode": "linear",
                                      "coord": "half_pixel", "in_hw": (4, 3)})}
    return _graph(nodes, (2, 3, 4), inits, opset=13, ir=7, batch=1, made=made)


def ir3_initializers_not_listed_as_inputs():
    """IR 3 file whose constant operand is an initializer only (onnxruntime runs it): onnx's
    IR-3 shape inference ignores it, so the GlobalAveragePool after the Add was refused as
    'the rank of the input is unknown'."""
    nodes = [helper.make_node("Add", ["x", "k"], ["a"], name="add"),
             helper.make_node("GlobalAveragePool", ["a"], ["y"], name="pool")]
    k = np.linspace(-1, 1, 24).reshape(1, 2, 3, 4).astype(np.float32)
    made = {"add": Made("Add", {"broadcast": "full"}), "pool": Made("GlobalAveragePool",
                                                                    {"rank": 4})}
    return _graph(nodes, (2, 3, 4), {"k": k}, opset=7, ir=3, batch=1, made=made)


def valid_ceil_pool_with_a_partial_last_window():
    """MaxPool(auto_pad VALID, ceil_mode 1, kernel 2, stride 2) on H 3: onnxruntime keeps the
    last partial window (H 2), the ONNX spec's VALID size drops it (H 1); it converted to the
    spec's H 1 with exit 0. Now refused as the MaxPool condition states."""
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], name="pool", auto_pad="VALID",
                              ceil_mode=1, kernel_shape=[2, 1], strides=[2, 1])]
    made = {"pool": Made("MaxPool", {"rank": 4, "valid_partial": True})}
    return _graph(nodes, (2, 3, 4), {}, opset=10, ir=5, batch=1, made=made)


CASES = {f.__name__: f for f in (batch_size_minimum_as_data, batch_size_halved_as_data,
                                 valid_ceil_pool_with_a_partial_last_window,
                                 ir3_initializers_not_listed_as_inputs,
                                 strided_slice_of_a_transposed_map,
                                 linear_resize_of_a_transposed_map,
                                 ceil_pool_whose_last_window_starts_past_the_input,
    batchnorm_of_channel_reduced_map, nonzero_pad_under_symbolic_batch,
    full_map_constant_divisor_under_symbolic_batch,
    average_pool_divisor_fix_under_symbolic_batch)}
# case -> the generator switch of the class another change is fixing
PENDING = {"batch_size_minimum_as_data": "batch-arithmetic",
           "ir3_initializers_not_listed_as_inputs": "ir3-unlisted-initializers"}

__all__ = ["CASES", "PENDING", "onnx"]
