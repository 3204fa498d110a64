"""One whole-pipeline case per TensorFlow source op (TensorFlow is the source runtime).

Graphs are built in graph mode with ``tf.raw_ops`` (the node under test named ``node``) and
written as a GraphDef; images are NHWC (2, 5, 7, 3).
"""
from __future__ import annotations

import os

import numpy as np

from nhwc_onnx.options import ConvertOptions
from tests.support.op_claims.harness import NODE, Case, Source

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

X4 = (2, 5, 7, 3)
RNG = np.random.default_rng(37)


def rand(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


def graph(build, inputs=None, context=(), **options):
    """A builder: ``build(tf, r, **placeholders)`` adds the nodes (``r`` is tf.raw_ops)."""
    inputs = {"x": X4} if inputs is None else inputs

    def builder(tmp_path) -> Source:
        import tensorflow as tf

        g = tf.Graph()
        with g.as_default():
            feeds = {n: tf.compat.v1.placeholder(tf.float32, s, name=n)
                     for n, s in inputs.items()}
            build(tf, tf.raw_ops, **feeds)
        path = tmp_path / "model.pb"
        path.write_bytes(g.as_graph_def().SerializeToString())
        return Source(path, ConvertOptions(**options), context=frozenset(context))

    return builder


FEATURES = {"Relu", "Relu6", "Elu", "Selu", "Softplus", "LeakyRelu"}  # their input's name


def unary(op, **attrs):
    key = "features" if op in FEATURES else "x"
    return graph(lambda tf, r, x: getattr(r, op)(**{key: x}, name=NODE, **attrs))


def binary(op, shapes=None):
    return graph(lambda tf, r, x, x2: getattr(r, op)(x=x, y=x2, name=NODE),
                 shapes or {"x": X4, "x2": X4})


def as_float(make, inputs=None):
    """A bool / int result (a never op) cast to float for the graph output."""
    def build(tf, r, **feeds):
        r.Cast(x=make(tf, r, **feeds), DstT=tf.float32, name="cast")

    return graph(build, inputs)


def const(tf, array, name):
    return tf.constant(np.asarray(array), name=name)


def _leaky(test_op):
    def build(tf, r, x):
        pos = r.Greater(x=x, y=const(tf, np.float32(0), "zero"),
                        name=NODE if test_op == "Greater" else "pos")
        scaled = r.Mul(x=x, y=const(tf, np.float32(0.2), "alpha"), name="scaled")
        r.SelectV2(condition=pos, t=x, e=scaled, name=NODE if test_op == "SelectV2" else "sel")

    return graph(build)


def _elu_idiom(tf, r, x):
    pos = r.Greater(x=x, y=const(tf, np.float32(0), "zero"), name="pos")
    em1 = r.Sub(x=r.Exp(x=x, name=NODE), y=const(tf, np.float32(1), "one"), name="em1")
    scaled = r.Mul(x=const(tf, np.float32(0.7), "alpha"), y=em1, name="scaled")
    r.SelectV2(condition=pos, t=x, e=scaled, name="sel")


def _reduce(op, axes=(1, 2), batch=X4[0]):
    return graph(lambda tf, r, x: getattr(r, op)(input=x, axis=const(tf, list(axes), "axes"),
                                                 keep_dims=True, name=NODE),
                 {"x": (batch, *X4[1:])})


def _pool(op, **attrs):
    def build(tf, r, x):
        if op == "MaxPoolV2":
            r.MaxPoolV2(input=x, ksize=const(tf, np.array([1, 3, 2, 1], np.int32), "k"),
                        strides=const(tf, np.array([1, 2, 2, 1], np.int32), "s"),
                        padding="SAME", name=NODE)
        else:
            key = "value" if op == "AvgPool" else "input"
            getattr(r, op)(**{key: x}, ksize=[1, 3, 2, 1], strides=[1, 2, 2, 1],
                           padding="SAME", name=NODE)

    return graph(build)


def _fused_bn(op, training=False):
    def build(tf, r, x):
        params = {k: const(tf, rand(3, low=0.5, high=1.5), k)
                  for k in ("scale", "offset", "mean", "variance")}
        getattr(r, op)(x=x, epsilon=1e-3, is_training=training, name=NODE, **params)

    return graph(build)


def _conv2d(runtime_filter=False):
    def build(tf, r, x, **f):
        w = f["w"] if runtime_filter else const(tf, rand(3, 2, 3, 4), "w")
        r.Conv2D(input=x, filter=w, strides=[1, 2, 1, 1], padding="SAME", name=NODE)

    return graph(build, {"x": X4, "w": (3, 2, 3, 4)} if runtime_filter else None)


def _backprop(padding="SAME"):
    def build(tf, r, x):
        extra = {"explicit_paddings": [0, 0, 1, 1, 1, 1, 0, 0]} if padding == "EXPLICIT" else {}
        r.Conv2DBackpropInput(input_sizes=const(tf, np.array([2, 10, 14, 4], np.int32), "sizes"),
                              filter=const(tf, rand(3, 3, 4, 3), "w"), out_backprop=x,
                              strides=[1, 2, 2, 1], padding=padding, name=NODE, **extra)

    return graph(build)


def _resize(op, size, **attrs):
    return graph(lambda tf, r, x: getattr(r, op)(images=x, size=const(tf, np.array(
        size, np.int32), "size"), name=NODE, **attrs))


def _slice(strides, begin=(0, 1, 0, 0), end=(0, 4, 0, 0), begin_mask=0b1101,
           end_mask=0b1101):
    return graph(lambda tf, r, x: r.StridedSlice(
        input=x, begin=const(tf, list(begin), "b"), end=const(tf, list(end), "e"),
        strides=const(tf, list(strides), "st"), begin_mask=begin_mask, end_mask=end_mask,
        name=NODE))


def _pad(op, **extra):
    def build(tf, r, x):
        paddings = const(tf, np.array([[0, 0], [1, 2], [2, 1], [0, 0]], np.int32), "p")
        if op == "PadV2":
            r.PadV2(input=x, paddings=paddings, constant_values=const(tf, np.float32(0.5), "v"),
                    name=NODE)
        elif op == "MirrorPad":
            r.MirrorPad(input=x, paddings=paddings, mode="REFLECT", name=NODE)
        else:
            r.Pad(input=x, paddings=paddings, name=NODE)

    return graph(build)


def _shape(op):
    def build(tf, r, x):
        relu = r.Relu(features=x, name="relu")
        target = getattr(r, op)(input=x, name=NODE)
        if op == "Size":
            target = r.Reshape(tensor=target, shape=const(tf, [1], "one"), name="as_list")
        r.Reshape(tensor=relu, shape=target, name="reshape")

    return graph(build, context=["Relu"])


def _identity_like(op, **attrs):
    key = {"IdentityN": "input", "CheckNumerics": "tensor"}.get(op, "input")

    def build(tf, r, x):
        relu = r.Relu(features=x, name="relu")
        getattr(r, op)(**{key: [relu] if op == "IdentityN" else relu}, name=NODE, **attrs)

    return graph(build, context=["Relu"])


def _noop(tf, r, x):
    noop = r.NoOp(name=NODE)
    with tf.control_dependencies([noop]):
        r.Relu(features=x, name="relu")


def _batch_matmul(op):
    extra = {"Tout": "float32"} if op == "BatchMatMulV3" else {}

    def build(tf, r, x, x2):
        getattr(r, op)(x=x, y=x2, name=NODE, **extra)

    return graph(build, {"x": (2, 5, 6), "x2": (2, 6, 4)})


def _gather(op, runtime_indices=False, **extra):
    def build(tf, r, x, **feeds):
        idx = const(tf, np.array([4, 0, 2], np.int32), "i")
        if runtime_indices:
            idx = r.Cast(x=feeds["i"], DstT=tf.int32, name="cast")
        if op == "Gather":
            r.Gather(params=x, indices=idx, name=NODE)
        else:
            r.GatherV2(params=x, indices=idx, axis=const(tf, np.int32(0), "axis"), name=NODE,
                       **extra)

    return graph(build, {"x": (6, 35), "i": (3,)} if runtime_indices else {"x": (6, 35)})


def _split(op):
    def build(tf, r, x):
        if op == "Split":
            r.Split(axis=const(tf, np.int32(3), "axis"), value=x, num_split=3, name=NODE)
        else:
            r.SplitV(value=x, size_splits=const(tf, [1, 2], "sizes"),
                     axis=const(tf, np.int32(3), "axis"), num_split=2, name=NODE)

    return graph(build)


def _concat(op):
    def build(tf, r, x, x2):
        axis = const(tf, np.int32(3), "axis")
        if op == "Concat":
            r.Concat(concat_dim=axis, values=[x, x2], name=NODE)
        else:
            r.ConcatV2(values=[x, x2], axis=axis, name=NODE)

    return graph(build, {"x": X4, "x2": X4})


BIAS = rand(3)
CASES: dict[str, Case] = {
    **{op: Case(unary(op)) for op in ("Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Square",
                                       "Relu6", "Elu", "Selu")},
    **{op: Case(refused=unary(op)) for op in ("Sqrt", "Rsqrt", "Log", "Softplus", "Floor",
                                               "Ceil", "Sign", "Reciprocal", "Inv", "Erf",
                                               "Round", "Erfc")},
    "LeakyRelu": Case(unary("LeakyRelu", alpha=0.13)),
    "LRN": Case(refused=graph(lambda tf, r, x: r.LRN(input=x, depth_radius=1, bias=1.5,
                                                      alpha=0.2, beta=0.6, name=NODE))),
    "Exp": Case(graph(_elu_idiom), refused=unary("Exp")),
    "LogicalNot": Case(refused=as_float(lambda tf, r, x: r.LogicalNot(
        x=r.Less(x=x, y=const(tf, np.float32(0), "z"), name="less"), name=NODE))),
    **{op: Case(binary(op)) for op in ("Add", "AddV2", "Sub", "Mul", "Maximum", "Minimum",
                                        "SquaredDifference")},
    **{op: Case(graph(lambda tf, r, x, op=op: getattr(r, op)(
        x=x, y=const(tf, rand(3, low=0.5, high=2.0), "d"), name=NODE)),
        refused=binary(op)) for op in ("RealDiv", "Div")},
    "Pow": Case(graph(lambda tf, r, x: r.Pow(x=x, y=const(tf, np.float32(2), "e"), name=NODE)),
                refused=graph(lambda tf, r, x: r.Pow(x=x, y=const(tf, np.float32(0.5), "e"),
                                                     name=NODE))),
    **{op: Case(refused=as_float(lambda tf, r, x, x2, op=op: getattr(r, op)(
        x=x, y=x2, name=NODE), {"x": X4, "x2": X4})) for op in ("Equal", "Less")},
    **{op: Case(refused=as_float(lambda tf, r, x, x2, op=op: getattr(r, op)(
        x=r.Less(x=x, y=x2, name="a"), y=r.Less(x=x2, y=x, name="b"), name=NODE),
        {"x": X4, "x2": X4})) for op in ("LogicalAnd", "LogicalOr")},
    "Greater": Case(_leaky("Greater"), refused=as_float(
        lambda tf, r, x, x2: r.Greater(x=x, y=x2, name=NODE), {"x": X4, "x2": X4})),
    "SelectV2": Case(_leaky("SelectV2"), refused=graph(lambda tf, r, x, x2: r.SelectV2(
        condition=r.Greater(x=x, y=x2, name="pos"), t=x, e=x2, name=NODE),
        {"x": X4, "x2": X4})),
    "AddN": Case(graph(lambda tf, r, x, x2, x3: r.AddN(inputs=[x, x2, x3], name=NODE),
                       {"x": X4, "x2": X4, "x3": X4})),
    **{op: Case(_reduce(op)) for op in ("Mean", "Sum")},
    **{op: Case(_reduce(op, axes=(1, 3)), refused=_reduce(op, axes=(0,), batch=None))
       for op in ("Max", "Min")},
    "Prod": Case(refused=_reduce("Prod")),
    **{op: Case(refused=as_float(lambda tf, r, x, op=op: getattr(r, op)(
        input=x, dimension=const(tf, np.int32(3), "dim"), name=NODE)))
       for op in ("ArgMax", "ArgMin")},
    "MatMul": Case(graph(lambda tf, r, x: r.MatMul(a=x, b=const(tf, rand(6, 4), "w"),
                                                   name=NODE), {"x": (2, 6)})),
    **{op: Case(_batch_matmul(op)) for op in ("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")},
    "Cast": Case(graph(lambda tf, r, x: r.Cast(x=r.Relu(features=x, name="relu"),
                                               DstT=tf.float32, name=NODE), context=["Relu"]),
                 refused=graph(
        lambda tf, r, x: r.Cast(x=r.Cast(x=x, DstT=tf.int32, name=NODE), DstT=tf.float32,
                                name="back"))),
    "Conv2D": Case(_conv2d(), refused=_conv2d(runtime_filter=True)),
    "DepthwiseConv2dNative": Case(graph(lambda tf, r, x: r.DepthwiseConv2dNative(
        input=x, filter=const(tf, rand(3, 3, 3, 2), "w"), strides=[1, 2, 2, 1], padding="SAME",
        name=NODE))),
    "Conv2DBackpropInput": Case(_backprop(), refused=_backprop("EXPLICIT")),
    **{op: Case(graph(lambda tf, r, x, op=op: getattr(r, op)(
        value=x, bias=const(tf, BIAS, "b"), name=NODE))) for op in ("BiasAdd", "BiasAddV1")},
    **{op: Case(_fused_bn(op), refused=_fused_bn(op, training=True))
       for op in ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")},
    **{op: Case(_pool(op)) for op in ("MaxPool", "AvgPool", "MaxPoolV2")},
    "ResizeBilinear": Case(_resize("ResizeBilinear", [10, 14], half_pixel_centers=True),
                           refused=_resize("ResizeBilinear", [10, 14], align_corners=True)),
    "ResizeNearestNeighbor": Case(_resize("ResizeNearestNeighbor", [10, 21])),
    "SpaceToDepth": Case(graph(lambda tf, r, x: r.SpaceToDepth(input=x, block_size=2,
                                                               name=NODE), {"x": (2, 4, 6, 3)})),
    "DepthToSpace": Case(graph(lambda tf, r, x: r.DepthToSpace(input=x, block_size=2,
                                                               name=NODE), {"x": (2, 3, 5, 12)})),
    "Softmax": Case(graph(lambda tf, r, x: r.Softmax(logits=x, name=NODE))),
    "LogSoftmax": Case(refused=graph(lambda tf, r, x: r.LogSoftmax(logits=x, name=NODE))),
    "StridedSlice": Case(_slice([1, 1, 2, 1]), refused=_slice([1, 1, -1, 1])),
    "Reshape": Case(graph(lambda tf, r, x: r.Reshape(tensor=x, shape=const(tf, [2, 35, 3], "s"),
                                                     name=NODE))),
    "Squeeze": Case(graph(lambda tf, r, x: r.Squeeze(input=x, axis=[1], name=NODE),
                          {"x": (2, 1, 7, 3)})),
    "ExpandDims": Case(graph(lambda tf, r, x: r.ExpandDims(
        input=x, axis=const(tf, np.int32(1), "axis"), name=NODE), {"x": (6, 35)})),
    **{op: Case(_concat(op)) for op in ("Concat", "ConcatV2")},
    "Pack": Case(graph(lambda tf, r, x, x2: r.Pack(values=[x, x2], axis=1, name=NODE),
                       {"x": (6, 35), "x2": (6, 35)})),
    "Unpack": Case(graph(lambda tf, r, x: r.Unpack(value=x, num=3, axis=1, name=NODE),
                         {"x": (6, 3, 35)})),
    **{op: Case(_split(op)) for op in ("Split", "SplitV")},
    **{op: Case(_pad(op)) for op in ("Pad", "PadV2", "MirrorPad")},
    "Transpose": Case(graph(lambda tf, r, x: r.Transpose(x=x, perm=const(tf, [0, 2, 1, 3], "p"),
                                                         name=NODE))),
    "Slice": Case(graph(lambda tf, r, x: r.Slice(input=x, begin=const(tf, [0, 1, 2, 0], "b"),
                                                 size=const(tf, [-1, 3, 4, -1], "s"),
                                                 name=NODE))),
    **{op: Case(_shape(op)) for op in ("Shape", "Size")},
    "Fill": Case(graph(lambda tf, r, x: r.AddV2(x=x, y=r.Fill(
        dims=const(tf, list(X4), "dims"), value=const(tf, np.float32(1.5), "v"), name=NODE),
        name="add"), context=["Add"])),
    "Range": Case(graph(lambda tf, r, x: r.AddV2(x=x, y=r.Range(
        start=const(tf, np.float32(0), "a"), limit=const(tf, np.float32(3), "b"),
        delta=const(tf, np.float32(1), "d"), name=NODE), name="add"), context=["AddBias"])),
    **{op: Case(_gather(op), refused=_gather(op, runtime_indices=True))
       for op in ("Gather", "GatherV2")},
    "Tile": Case(graph(lambda tf, r, x: r.Tile(input=x, multiples=const(tf, [1, 2, 1, 1], "m"),
                                               name=NODE))),
    "ClipByValue": Case(graph(lambda tf, r, x: r.ClipByValue(
        t=x, clip_value_min=const(tf, np.float32(-0.5), "lo"),
        clip_value_max=const(tf, np.float32(0.4), "hi"), name=NODE))),
    "BroadcastTo": Case(graph(lambda tf, r, x: r.BroadcastTo(
        input=x, shape=const(tf, list(X4), "s"), name=NODE), {"x": (2, 1, 7, 3)})),
    **{op: Case(graph(lambda tf, r, x, op=op: r.AddV2(x=x, y=getattr(r, op)(x=x, name=NODE),
                                                      name="add"), context=["Add"]))
       for op in ("ZerosLike", "OnesLike")},
    "Rank": Case(graph(lambda tf, r, x: r.Mul(x=x, y=r.Cast(x=r.Rank(input=x, name=NODE),
                                                            DstT=tf.float32, name="cast"),
                                              name="mul"), context=["Scale"])),
    "FloorDiv": Case(refused=binary("FloorDiv")),
    "FloorMod": Case(refused=graph(lambda tf, r, x: r.FloorMod(
        x=x, y=const(tf, np.float32(0.7), "m"), name=NODE))),
    "Const": Case(graph(lambda tf, r, x: r.AddV2(x=x, y=const(tf, BIAS, NODE), name="add"),
                        context=["AddBias"])),
    "Placeholder": Case(graph(lambda tf, r, node: r.Relu(features=node, name="relu"),
                              {"node": X4}, context=["Relu"])),
    "PlaceholderWithDefault": Case(graph(lambda tf, r, x: r.AddV2(x=x, y=r.PlaceholderWithDefault(
        input=const(tf, BIAS, "default"), shape=[3], name=NODE), name="add"),
        context=["AddBias"])),
    **{op: Case(_identity_like(op)) for op in ("Identity", "StopGradient", "Snapshot",
                                                "PreventGradient", "IdentityN")},
    "CheckNumerics": Case(_identity_like("CheckNumerics", message="nan")),
    "EnsureShape": Case(_identity_like("EnsureShape", shape=list(X4))),
    "DebugIdentity": Case(_identity_like("DebugIdentity", tensor_name="relu:0")),
    "NoOp": Case(graph(_noop, context=["Relu"])),
}
