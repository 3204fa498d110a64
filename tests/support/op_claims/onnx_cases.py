"""One whole-pipeline case per ONNX source op (onnxruntime is the source runtime).

Shapes have distinct sizes (N 2, C 3, H 5, W 7) so that a layout mix-up cannot hide.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.support.op_claims.harness import NODE, Case, Source

X4 = (2, 3, 5, 7)
RNG = np.random.default_rng(31)


def rand(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


def _info(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def graph(nodes, inputs=None, outputs=("y",), inits=None, opset=13, context=(),
          out_types=None):
    """A builder: ``inputs`` name -> shape (float32), ``inits`` name -> array; outputs have
    inferred shapes (float32 unless ``out_types`` says otherwise)."""
    inputs = {"x": X4} if inputs is None else inputs

    def build(tmp_path) -> Source:
        out_types_ = out_types or {}
        g = helper.make_graph(
            list(nodes), "claim", [_info(n, s) for n, s in inputs.items()],
            [_info(o, None, out_types_.get(o, TensorProto.FLOAT)) for o in outputs],
            [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        path = tmp_path / "model.onnx"
        onnx.save(model, str(path))
        return Source(path, context=frozenset(context))

    return build


def node(op, inputs=("x",), outputs=("y",), name=NODE, **attrs):
    return helper.make_node(op, list(inputs), list(outputs), name=name, **attrs)


def one(op, inputs=("x",), inits=None, shapes=None, opset=13, context=(), **attrs):
    """y = op(inputs...) with the graph inputs in ``shapes`` (default x: X4)."""
    return graph([node(op, inputs, **attrs)], shapes, inits=inits, opset=opset, context=context)


def as_float(op, inputs, inits=None, shapes=None, **attrs):
    """A bool / int result (a never op) cast to float for the graph output."""
    return graph([node(op, inputs, ["r"], **attrs), node("Cast", ["r"], name="cast", to=1)],
                 shapes, inits=inits)


TWO = {"x": X4, "x2": X4}
ZERO = {"zero": np.float32(0.0)}


def _leaky(test_node: str):
    nodes = [node("Greater", ["x", "zero"], ["pos"], name="pos"),
             node("Mul", ["x", "alpha"], ["scaled"], name="scaled"),
             node("Where", ["pos", "x", "scaled"], name="where")]
    for n in nodes:
        if n.op_type == test_node:
            n.name = NODE
    return graph(nodes, inits={**ZERO, "alpha": np.float32(0.2)})


def _elu_idiom():
    nodes = [node("Greater", ["x", "zero"], ["pos"], name="pos"),
             node("Exp", ["x"], ["e"]),
             node("Sub", ["e", "one"], ["em1"], name="em1"),
             node("Mul", ["em1", "alpha"], ["scaled"], name="scaled"),
             node("Where", ["pos", "x", "scaled"], name="where")]
    return graph(nodes, inits={**ZERO, "one": np.float32(1.0), "alpha": np.float32(0.7)})


def _reduce(op, axes=(2, 3), opset=13, **attrs):
    if op == "ReduceSum" or opset >= 18:
        return one(op, ["x", "axes"], {"axes": np.array(axes, np.int64)}, opset=opset, **attrs)
    return one(op, axes=list(axes), opset=opset, **attrs)


BN = {"scale": rand(3), "b": rand(3), "mean": rand(3), "var": rand(3, low=0.5, high=2.0)}

CASES: dict[str, Case] = {
    **{op: Case(one(op)) for op in ("Abs", "Relu", "Sigmoid", "Tanh", "Neg", "Selu")},
    **{op: Case(one(op), refused=one(op, shapes={"x": (2, 3, 35)}))
       for op in ("GlobalAveragePool", "GlobalMaxPool")},
    **{op: Case(refused=one(op)) for op in ("Sqrt", "Reciprocal", "Log", "Softplus", "Erf",
                                             "Floor", "Ceil", "Round", "Sign", "Softsign")},
    "HardSwish": Case(one("HardSwish", opset=14),
                      refused=one("HardSwish", shapes={"x": (35,)}, opset=14)),
    "Elu": Case(one("Elu", alpha=0.7)),
    "LeakyRelu": Case(one("LeakyRelu", alpha=0.13)),
    "HardSigmoid": Case(one("HardSigmoid", alpha=0.3, beta=0.4)),
    "Identity": Case(graph([node("Relu", name="relu", outputs=["r"]), node("Identity", ["r"])],
                           context=["Relu"])),
    "Dropout": Case(graph([node("Relu", name="relu", outputs=["r"]), node("Dropout", ["r"])],
                          context=["Relu"]),
                    refused=one("Dropout", ["x", "ratio", "training"],
                                {"ratio": np.float32(0.5), "training": np.array(True)})),
    "Clip": Case(one("Clip", ["x", "lo", "hi"], {"lo": np.float32(-0.5), "hi": np.float32(0.4)}),
                 refused=one("Clip", ["x", "lo", "hi"], {"hi": np.float32(0.4)},
                             shapes={"x": X4, "lo": ()})),
    "PRelu": Case(one("PRelu", ["x", "slope"], {"slope": rand(3, 1, 1)}),
                  refused=one("PRelu", ["x", "slope"], shapes={"x": X4, "slope": (3, 1, 1)})),
    "Add": Case(one("Add", ["x", "x2"], shapes=TWO),
                refused=one("Add", ["x", "big"], {"big": rand(1, 1, 256, 256)},
                            shapes={"x": (1, 80, 256, 256)})),
    "Sub": Case(one("Sub", ["x", "x2"], shapes=TWO)),
    "Mul": Case(one("Mul", ["x", "x2"], shapes=TWO)),
    "Div": Case(one("Div", ["x", "d"], {"d": rand(3, 1, 1, low=0.5, high=2.0)}),
                refused=one("Div", ["x", "x2"], shapes=TWO)),
    "Max": Case(one("Max", ["x", "x2"], shapes=TWO)),
    "Min": Case(one("Min", ["x", "x2"], shapes=TWO)),
    "Sum": Case(one("Sum", ["x", "x2", "x3"], shapes={**TWO, "x3": X4})),
    "Mean": Case(one("Mean", ["x", "x2", "x3"], shapes={**TWO, "x3": X4})),
    "Where": Case(_leaky("Where"),
                  refused=graph([node("Greater", ["x", "zero"], ["pos"], name="pos"),
                                 node("Where", ["pos", "x", "x2"])], TWO, inits=ZERO)),
    "Greater": Case(_leaky("Greater"), refused=as_float("Greater", ["x", "x2"], shapes=TWO)),
    "Exp": Case(_elu_idiom(), refused=one("Exp")),
    "Softmax": Case(one("Softmax", axis=1), refused=one("Softmax", axis=2)),
    "LogSoftmax": Case(refused=one("LogSoftmax", axis=1)),
    "MatMul": Case(one("MatMul", ["x", "w"], {"w": rand(6, 4)}, shapes={"x": (2, 6)}),
                   refused=one("MatMul", ["x", "w"], {"w": rand(2, 6, 4)},
                               shapes={"x": (2, 5, 6)})),
    "Gemm": Case(one("Gemm", ["x", "w", "c"], {"w": rand(4, 6), "c": rand(4)},
                     shapes={"x": (2, 6)}, transB=1, alpha=0.5)),
    "Conv": Case(one("Conv", ["x", "w", "b"], {"w": rand(4, 3, 3, 2), "b": rand(4)},
                     strides=[2, 1], pads=[1, 0, 1, 1]),
                 refused=one("Conv", ["x", "w"], shapes={"x": X4, "w": (4, 3, 3, 3)})),
    "ConvTranspose": Case(one("ConvTranspose", ["x", "w", "b"], {"w": rand(3, 4, 3, 2),
                                                                  "b": rand(4)},
                              strides=[2, 2], pads=[1, 0, 1, 1], output_padding=[1, 0]),
                          refused=one("ConvTranspose", ["x", "w"],
                                      shapes={"x": X4, "w": (3, 4, 3, 3)})),
    "MaxPool": Case(one("MaxPool", kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1]),
                    refused=graph([node("MaxPool", outputs=["y", "idx"], kernel_shape=[2, 2])],
                                  outputs=["y", "idx"], out_types={"idx": TensorProto.INT64})),
    "AveragePool": Case(one("AveragePool", kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1], count_include_pad=1),
                        refused=one("AveragePool", kernel_shape=[2, 2], dilations=[2, 2],
                                    opset=19)),
    "BatchNormalization": Case(one("BatchNormalization", ["x", *BN], BN, epsilon=1e-3),
                               refused=one("BatchNormalization", ["x", *BN], BN,
                                           opset=15, training_mode=1)),
    "SpaceToDepth": Case(one("SpaceToDepth", shapes={"x": (2, 3, 4, 6)}, blocksize=2)),
    "DepthToSpace": Case(one("DepthToSpace", shapes={"x": (2, 12, 3, 5)}, blocksize=2,
                             mode="CRD")),
    "Upsample": Case(one("Upsample", ["x", "s"], {"s": np.array([1, 1, 2, 3], np.float32)},
                         opset=9),
                     refused=one("Upsample", ["x", "s"],
                                 {"s": np.array([1, 1, 2, 2], np.float32)}, opset=9,
                                 mode="linear")),
    "Resize": Case(one("Resize", ["x", "", "s"], {"s": np.array([1, 1, 2, 2], np.float32)},
                       mode="linear", coordinate_transformation_mode="half_pixel"),
                   refused=one("Resize", ["x", "", "s"],
                               {"s": np.array([1, 1, 2, 2], np.float32)}, mode="linear",
                               coordinate_transformation_mode="align_corners")),
    "Shape": Case(graph([node("Relu", name="relu", outputs=["r"]), node("Shape", outputs=["s"]),
                         node("Reshape", ["r", "s"], name="reshape")], {"x": (6, 35)},
                        context=["Relu"])),
    "Size": Case(graph([node("Size", outputs=["n"]),
                        node("Unsqueeze", ["n", "ax"], ["n1"], name="unsqueeze"),
                        node("Reshape", ["x", "n1"], name="reshape")], {"x": (6, 35)},
                       inits={"ax": np.array([0], np.int64)})),
    "Gather": Case(one("Gather", ["x", "i"], {"i": np.array([4, 0, 2], np.int64)},
                       shapes={"x": (6, 35)}),
                   refused=graph([node("Cast", ["f"], ["i"], name="cast", to=7),
                                  node("Gather", ["x", "i"])], {"x": (6, 35), "f": (3,)})),
    "Cast": Case(one("Cast", to=1), refused=graph([node("Cast", ["x"], ["i"], to=6),
                                                    node("Cast", ["i"], name="back", to=1)])),
    "ConstantOfShape": Case(graph([node("Shape", name="shape", outputs=["s"]),
                                   node("ConstantOfShape", ["s"], ["c"],
                                        value=numpy_helper.from_array(
                                            np.array([1.5], np.float32))),
                                   node("Add", ["x", "c"], name="add")], context=["Add"])),
    "Range": Case(graph([node("Range", ["a", "b", "d"], ["r"]),
                         node("Add", ["x", "r"], name="add")],
                        inits={"a": np.float32(0), "b": np.float32(7), "d": np.float32(1)},
                        context=["Add"])),
    "Expand": Case(one("Expand", ["x", "shape"], {"shape": np.array(X4, np.int64)},
                       shapes={"x": (2, 3, 1, 7)})),
    "Tile": Case(one("Tile", ["x", "r"], {"r": np.array([1, 1, 2, 1], np.int64)})),
    "Flatten": Case(graph([node("Flatten", outputs=["f"]),
                           node("Gemm", ["f", "w"], name="dense")],
                          inits={"w": rand(105, 4)}, context=["Dense", "Gemm"]),
                    refused=one("Flatten")),
    "Reshape": Case(one("Reshape", ["x", "s"], {"s": np.array([2, 3, 35], np.int64)}),
                    refused=one("Reshape", ["x", "s"], {"s": np.array([2, 105], np.int64)})),
    "Squeeze": Case(one("Squeeze", ["x", "ax"], {"ax": np.array([1], np.int64)},
                        shapes={"x": (2, 1, 35)})),
    "Unsqueeze": Case(one("Unsqueeze", ["x", "ax"], {"ax": np.array([1], np.int64)},
                          shapes={"x": (6, 35)})),
    "Transpose": Case(one("Transpose", shapes={"x": (6, 35)}, perm=[1, 0])),
    "Concat": Case(one("Concat", ["x", "x2"], shapes=TWO, axis=1)),
    "Split": Case(graph([node("Split", ["x", "sp"], ["a", "b"], axis=1)], outputs=["a", "b"],
                        inits={"sp": np.array([1, 2], np.int64)})),
    "Slice": Case(one("Slice", ["x", "st", "en", "ax"], {"st": np.array([1], np.int64),
                                                         "en": np.array([4], np.int64),
                                                         "ax": np.array([2], np.int64)}),
                  refused=one("Slice", ["x", "st", "en", "ax", "sp"], {
                      "st": np.array([-1], np.int64), "en": np.array([-9], np.int64),
                      "ax": np.array([3], np.int64), "sp": np.array([-1], np.int64)})),
    "Pad": Case(one("Pad", ["x", "p"], {"p": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)}),
                refused=one("Pad", ["x", "p"],
                            {"p": np.array([0, 0, -1, 0, 0, 0, 0, 0], np.int64)})),
    **{op: Case(_reduce(op)) for op in ("ReduceMean", "ReduceSum", "ReduceL1",
                                         "ReduceSumSquare")},
    **{op: Case(_reduce(op, axes=(1, 3)), refused=one(op, shapes={"x": ("N", 3, 5, 7)},
                                                     axes=[0]))
       for op in ("ReduceMax", "ReduceMin")},
    **{op: Case(refused=_reduce(op)) for op in ("ReduceProd", "ReduceL2", "ReduceLogSum",
                                                 "ReduceLogSumExp")},
    "Constant": Case(graph([node("Constant", [], ["c"],
                                 value=numpy_helper.from_array(rand(3, 1, 1))),
                            node("Add", ["x", "c"], name="add")], context=["AddBias"])),
    "Not": Case(refused=graph([node("Less", ["x", "zero"], ["neg"], name="less"),
                               node("Not", ["neg"], ["r"]),
                               node("Cast", ["r"], name="cast", to=1)], inits=ZERO)),
    "Equal": Case(refused=as_float("Equal", ["x", "x2"], shapes=TWO)),
    "Less": Case(refused=as_float("Less", ["x", "x2"], shapes=TWO)),
    **{op: Case(refused=graph([node("Less", ["x", "zero"], ["a"], name="a"),
                               node("Less", ["x2", "zero"], ["b"], name="b"),
                               node(op, ["a", "b"], ["r"]),
                               node("Cast", ["r"], name="cast", to=1)], TWO, inits=ZERO))
       for op in ("And", "Or")},
    # x ** 2 as PyTorch exports it; a near-miss exponent (the float after 2) stays refused
    "Pow": Case(one("Pow", ["x", "e"], {"e": np.float32(2)}),
                refused=one("Pow", ["x", "e"], {"e": np.nextafter(np.float32(2), np.float32(3))})),
    "ArgMax": Case(refused=as_float("ArgMax", ["x"], axis=1)),
    "LRN": Case(refused=one("LRN", size=3)),
}
