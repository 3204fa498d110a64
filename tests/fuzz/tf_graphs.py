"""Random NHWC TensorFlow graphs of raw ops, valid by construction, frozen to a GraphDef:
a plan of steps drawn op by op from one image input (static batch 1 or 3, or symbolic), each
step's shape constraints kept. TensorFlow is the oracle (``nhwc_onnx.verify`` runs it).

Each step's op is named (``name=``) so a refusal maps back to its ``claims.Made``.
"""
from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

from tests.fuzz.claims import _RESHAPE_AFTER, Made, _pin, core_condition
from tests.fuzz.oracle import Verdict, judge

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

# Idioms whose false refusal another change is fixing (see onnx_graphs.PENDING).
PENDING = {"tf-channel-shuffle": "ShuffleNet's Reshape->Transpose->Reshape on the NHWC map"}
ENABLED_BY_DEFAULT: frozenset[str] = frozenset({"tf-channel-shuffle"})
_env = os.environ.get("FUZZ_ENABLE", "")
ENABLED = ENABLED_BY_DEFAULT | (frozenset(PENDING) if _env == "all"
                                else frozenset(n for n in _env.split(",") if n))


@dataclass
class T:
    key: str
    dims: tuple[int, ...]  # after the batch (NHWC for maps)


@dataclass
class TfGraph:
    steps: list[Callable]  # step(env, tf): adds a tensor to env
    nodes: dict[str, Made]
    batch: int | None
    dims: tuple[int, ...]
    outputs: list[str]
    summary: list[str] = field(default_factory=list)


class _Builder:
    def __init__(self, draw, batch):
        self.draw, self.batch = draw, batch
        self.steps: list[Callable] = []
        self.made: dict[str, Made] = {}
        self.live: list[T] = []
        self.consumed: set[str] = set()
        self.count = 0
        self.rng = np.random.default_rng(draw(st.integers(0, 2**16)))

    def step(self, op: str, fn: Callable, inputs: list[T], dims, facts=None) -> T:
        """``fn(tf, name, *input tensors)`` makes the op named ``name``."""
        self.count += 1
        name = f"{op.lower()}_{self.count}"
        keys = [t.key for t in inputs]
        self.consumed.update(keys)
        self.steps.append(lambda env, tf, f=fn, n=name, k=keys: env.__setitem__(
            n, f(tf, n, *[env[i] for i in k])))
        self.made[name] = Made(op, dict(facts or {}))
        return T(name, tuple(dims))

    def pick(self, *values):
        return self.draw(st.sampled_from(values))

    def w(self, *shape, scale=None):
        fan = max(1, math.prod(shape[:-1]))
        return (self.rng.standard_normal(shape) * (scale or 1 / math.sqrt(fan))).astype(
            np.float32)

    def unary(self, t: T) -> T:
        op = self.pick("Relu", "Relu6", "Sigmoid", "Tanh", "Elu", "Abs", "Neg", "Selu",
                       "Square", "LeakyRelu", "Floor", "Rsqrt", "Erf", "Softplus")
        if op == "LeakyRelu":
            return self.step(op, lambda tf, n, x: tf.raw_ops.LeakyRelu(
                features=x, alpha=0.2, name=n), [t], t.dims)
        arg = "features" if op in ("Relu", "Relu6", "Elu", "Selu", "Softplus") else "x"
        return self.step(op, lambda tf, n, x: getattr(tf.raw_ops, op)(**{arg: x}, name=n),
                         [t], t.dims)

    def conv(self, t: T) -> T | None:
        if len(t.dims) != 3:
            return None
        h, w, c = t.dims
        k = self.draw(st.integers(1, min(3, h, w)))
        s = self.draw(st.integers(1, 2))
        pad = self.pick("SAME", "VALID")
        depthwise = self.draw(st.booleans())
        # TensorFlow's CPU kernels have no dilated depthwise convolution
        d = 1 if depthwise or s > 1 or not self.draw(st.booleans()) or min(h, w) <= 2 * k \
            else 2
        span = (k - 1) * d + 1
        size = (lambda n: -(-n // s)) if pad == "SAME" else (lambda n: (n - span) // s + 1)
        oh, ow = size(h), size(w)
        if oh < 1 or ow < 1:
            return None
        bias = self.w(c if depthwise else 1, scale=0.5)
        if depthwise:
            mult = self.pick(1, 2)
            kern = self.w(k, k, c, mult)
            bias = self.w(c * mult, scale=0.5)
            out_c = c * mult

            def fn(tf, n, x):
                y = tf.raw_ops.DepthwiseConv2dNative(
                    input=x, filter=kern, strides=[1, s, s, 1], padding=pad,
                    dilations=[1, d, d, 1], name=n)
                return tf.raw_ops.BiasAdd(value=y, bias=bias)
            return self.step("DepthwiseConv2dNative", fn, [t], (oh, ow, out_c), {"rank": 4})
        out_c = self.draw(st.integers(2, 7))
        kern = self.w(k, k, c, out_c)
        bias = self.w(out_c, scale=0.5)

        def conv_fn(tf, n, x):
            y = tf.raw_ops.Conv2D(input=x, filter=kern, strides=[1, s, s, 1], padding=pad,
                                  dilations=[1, d, d, 1], name=n)
            return tf.raw_ops.BiasAdd(value=y, bias=bias)
        return self.step("Conv2D", conv_fn, [t], (oh, ow, out_c), {"rank": 4})

    def pool(self, t: T) -> T | None:
        if len(t.dims) != 3:
            return None
        h, w, c = t.dims
        op = self.pick("MaxPool", "AvgPool")
        k = self.draw(st.integers(1, min(3, h, w)))
        s = self.draw(st.integers(1, 3))
        pad = self.pick("SAME", "VALID")
        size = (lambda n: -(-n // s)) if pad == "SAME" else (lambda n: (n - k) // s + 1)
        arg = "input" if op == "MaxPool" else "value"
        return self.step(op, lambda tf, n, x: getattr(tf.raw_ops, op)(
            **{arg: x}, ksize=[1, k, k, 1], strides=[1, s, s, 1], padding=pad, name=n), [t],
            (size(h), size(w), c), {"rank": 4, "dilated": False, "padded": pad == "SAME",
                                    "nonneg": False})

    def binary(self, t: T) -> T:
        op = self.pick("AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum",
                       "SquaredDifference")
        kind = self.pick("scalar", "per-channel", "full", "tensor")
        others = [o for o in self.live if o.dims == t.dims and o.key != t.key]
        if kind == "tensor" and others:
            o = self.pick(*others)
            return self.step(op, lambda tf, n, x, y: getattr(tf.raw_ops, op)(
                x=x, y=y, name=n), [t, o], t.dims, {"broadcast": "same",
                                                    "divisor_constant": False})
        kind = "scalar" if kind == "tensor" else kind
        shape = {"scalar": (), "per-channel": t.dims[-1:], "full": (1, *t.dims)}[kind]
        c = self.rng.uniform(0.5, 1.5, shape).astype(np.float32)
        return self.step(op, lambda tf, n, x: getattr(tf.raw_ops, op)(x=x, y=c, name=n),
                         [t], t.dims, {"broadcast": kind, "divisor_constant": True})

    def reduce(self, t: T) -> T | None:
        if len(t.dims) < 2:
            return None
        op = self.pick("Mean", "Sum", "Max", "Min", "Prod")
        axes = sorted(self.draw(st.sets(st.integers(1, len(t.dims)), min_size=1)))
        keep = self.draw(st.booleans())
        dims = tuple(1 if i + 1 in axes else d for i, d in enumerate(t.dims)) if keep else \
            tuple(d for i, d in enumerate(t.dims) if i + 1 not in axes)
        if not dims:
            return None
        # the TF reduction's H and W of a 4-D NHWC map are axes 1 and 2
        facts = {"rank": len(t.dims) + 1, "axes": [a + 1 if a < 3 else 1 for a in axes],
                 "symbolic_batch": self.batch is None}
        return self.step(op, lambda tf, n, x: getattr(tf.raw_ops, op)(
            input=x, axis=np.array(axes, np.int32), keep_dims=keep, name=n), [t], dims, facts)

    def transpose(self, t: T) -> T:
        rest = list(self.draw(st.permutations(range(1, len(t.dims) + 1))))
        perm = np.array([0, *rest], np.int32)
        return self.step("Transpose", lambda tf, n, x: tf.raw_ops.Transpose(
            x=x, perm=perm, name=n), [t], tuple(t.dims[p - 1] for p in rest))

    def concat(self, t: T) -> T | None:
        others = [o for o in self.live if o.dims[:-1] == t.dims[:-1] and o.key != t.key]
        if not others:
            return None
        o = self.pick(*others)
        axis = np.int32(len(t.dims))
        return self.step("ConcatV2", lambda tf, n, x, y: tf.raw_ops.ConcatV2(
            values=[x, y], axis=axis, name=n), [t, o], (*t.dims[:-1], t.dims[-1] + o.dims[-1]))

    def dense(self, t: T) -> T:
        features = math.prod(t.dims)
        units = self.draw(st.integers(2, 9))
        wm = self.w(features, units)
        flat = t
        if len(t.dims) > 1:
            via_shape = self.draw(st.booleans())

            def flatten(tf, n, x):
                if via_shape:  # Keras' Flatten: Shape -> StridedSlice -> Pack -> Reshape
                    batch = tf.raw_ops.StridedSlice(
                        input=tf.raw_ops.Shape(input=x), begin=np.array([0], np.int32),
                        end=np.array([1], np.int32), strides=np.array([1], np.int32),
                        shrink_axis_mask=1)
                    shape = tf.raw_ops.Pack(values=[batch, np.int32(features)])
                else:
                    shape = np.array([-1, features], np.int32)
                return tf.raw_ops.Reshape(tensor=x, shape=shape, name=n)
            flat = self.step("Reshape", flatten, [t], (features,))
        return self.step("MatMul", lambda tf, n, x: tf.raw_ops.MatMul(a=x, b=wm, name=n),
                         [flat], (units,), {"weight_constant": True, "weight_rank": 2,
                                            "rank": 2})

    def pad(self, t: T) -> T | None:
        if len(t.dims) != 3:
            return None
        h, w, c = t.dims
        mode = self.pick("Pad", "MirrorPad-REFLECT", "MirrorPad-SYMMETRIC")
        p = [self.draw(st.integers(0, 2)) for _ in range(4)]
        pads = np.array([[0, 0], [p[0], p[1]], [p[2], p[3]], [0, 0]], np.int32)
        dims = (h + p[0] + p[1], w + p[2] + p[3], c)
        if mode == "Pad":
            return self.step("Pad", lambda tf, n, x: tf.raw_ops.Pad(
                input=x, paddings=pads, name=n), [t], dims, {"mirrored_cells_exist": True})
        kind = mode.split("-")[1]
        limit = 0 if kind == "SYMMETRIC" else 1
        if max(p[:2]) > h - limit or max(p[2:]) > w - limit:
            return None  # TF rejects it
        return self.step("MirrorPad", lambda tf, n, x: tf.raw_ops.MirrorPad(
            input=x, paddings=pads, mode=kind, name=n), [t], dims,
            {"mirrored_cells_exist": True})

    def resize(self, t: T) -> T | None:
        if len(t.dims) != 3:
            return None
        h, w, c = t.dims
        fh, fw = self.draw(st.integers(1, 3)), self.draw(st.integers(1, 3))
        op = self.pick("ResizeNearestNeighbor", "ResizeBilinear")
        half = self.draw(st.booleans())
        corners = not half and self.draw(st.integers(0, 3)) == 0
        size = np.array([h * fh, w * fw], np.int32)
        if op == "ResizeNearestNeighbor":
            coord = "tf_half_pixel_for_nn" if half else (
                "align_corners" if corners else "asymmetric")
            facts = {"mode": "nearest", "coord": coord,
                     "nearest": "round_prefer_ceil" if corners else "floor"}
        else:
            coord = "half_pixel" if half else ("align_corners" if corners else "asymmetric")
            facts = {"mode": "linear", "coord": coord}
        facts.update(factors=[1, 1, fh, fw], in_hw=(h, w))
        return self.step(op, lambda tf, n, x: getattr(tf.raw_ops, op)(
            images=x, size=size, align_corners=corners, half_pixel_centers=half, name=n),
            [t], (h * fh, w * fw, c), facts)

    def batchnorm(self, t: T) -> T | None:
        if len(t.dims) != 3:
            return None
        c = t.dims[-1]
        scale, offset = self.w(c, scale=0.5) + 1, self.w(c, scale=0.5)
        mean, var = self.w(c, scale=0.5), np.abs(self.w(c, scale=0.5)) + 0.5
        return self.step("FusedBatchNormV3", lambda tf, n, x: tf.raw_ops.FusedBatchNormV3(
            x=x, scale=scale, offset=offset, mean=mean, variance=var, epsilon=1e-3,
            is_training=False, name=n)[0], [t], t.dims)

    def softmax(self, t: T) -> T:
        return self.step("Softmax", lambda tf, n, x: tf.raw_ops.Softmax(logits=x, name=n),
                         [t], t.dims, {"single_axis": True, "axis_size": t.dims[-1]})

    def channel_shuffle(self, t: T) -> T | None:
        if len(t.dims) != 3 or t.dims[-1] % 2 or "tf-channel-shuffle" not in ENABLED:
            return None
        h, w, c = t.dims

        def fn(tf, n, x):
            y = tf.raw_ops.Reshape(tensor=x, shape=np.array([-1, h, w, 2, c // 2], np.int32))
            y = tf.raw_ops.Transpose(x=y, perm=np.array([0, 1, 2, 4, 3], np.int32))
            return tf.raw_ops.Reshape(tensor=y, shape=np.array([-1, h, w, c], np.int32),
                                      name=n)
        return self.step("Reshape", fn, [t], t.dims)


FAMILIES = ("unary", "conv", "conv", "pool", "binary", "reduce", "transpose", "concat",
            "dense", "pad", "resize", "batchnorm", "softmax", "channel_shuffle")


@st.composite
def tf_graphs(draw, max_ops: int = 5) -> TfGraph:
    batch = draw(st.sampled_from([None, 1, 3]))
    dims = tuple(draw(st.lists(st.integers(2, 9), min_size=3, max_size=3, unique=True)))
    b = _Builder(draw, batch)
    x = T("x", dims)
    b.live.append(x)
    current, summary = x, []
    for _ in range(draw(st.integers(1, max_ops))):
        made = getattr(b, draw(st.sampled_from(FAMILIES)))(current)
        if made is None:
            continue
        summary.append(made.key)
        b.live.append(made)
        current = made if draw(st.integers(0, 3)) else draw(st.sampled_from(b.live))
    outputs = [t.key for t in b.live if t.key not in b.consumed and t.key != "x"]
    if not outputs:
        outputs = [b.unary(x).key]
    return TfGraph(b.steps, b.made, batch, dims, outputs, summary)


def frozen_graph_def(g: TfGraph) -> bytes:
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    def fn(x):
        env = {"x": x}
        for step in g.steps:
            step(env, tf)
        return [tf.identity(env[k], name=f"out_{k}") for k in g.outputs]

    spec = tf.TensorSpec([g.batch, *g.dims], tf.float32, name="x")
    concrete = tf.function(fn).get_concrete_function(spec)
    return convert_variables_to_constants_v2(concrete).graph.as_graph_def().SerializeToString()


def check_tf_graph(g: TfGraph, workdir: Path | None = None) -> Verdict:
    from nhwc_onnx.options import ConvertOptions

    data = frozen_graph_def(g)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = Path(tmp) / "fuzz.pb"
        path.write_bytes(data)
        options = ConvertOptions(outputs=[f"out_{k}" for k in g.outputs])
        batches = (1, 3) if g.batch is None else (g.batch,)
        return judge("tf", path, g.nodes, batches, None, {}, options)


def save_tf_graph(g: TfGraph, path: Path) -> Path:
    target = path.with_suffix(".pb")
    target.write_bytes(frozen_graph_def(g))
    path.with_suffix(".txt").write_text("\n".join(
        f"{name}: {m.op} {m.facts}" for name, m in g.nodes.items()) + "\n")
    return target


# The TF claims exercised, pinned to the table's text like the ONNX ones.
def _as_onnx(tf_op: str, onnx_op: str, prefix: str = "", labelled: bool = True,
             suffix: str = ""):
    text, predicate = core_condition(onnx_op)
    label = f"{onnx_op}: " if labelled else ""
    _pin("tf", tf_op, prefix + label + text + suffix, predicate)


_as_onnx("Conv2D", "Conv")
# a computed filter is reshaped to HWIO (a weight tensor, not a map: in place)
_as_onnx("DepthwiseConv2dNative", "Conv", suffix=_RESHAPE_AFTER)
_as_onnx("MaxPool", "MaxPool", labelled=False)
_as_onnx("AvgPool", "AveragePool")
for _op in ("Mul", "Sub"):
    _as_onnx(_op, _op, labelled=False)
_as_onnx("SquaredDifference", "Add", labelled=False)
_as_onnx("AddV2", "Add")
_as_onnx("RealDiv", "Div")
_as_onnx("Max", "ReduceMax")
_as_onnx("Min", "ReduceMin")
_as_onnx("MatMul", "MatMul", labelled=False)
_as_onnx("Pad", "Pad", labelled=False)
_as_onnx("MirrorPad", "Pad")
_as_onnx("Softmax", "Softmax", labelled=False)
_as_onnx("ResizeNearestNeighbor", "Resize")
_as_onnx("ResizeBilinear", "Resize")
_as_onnx("FusedBatchNormV3", "BatchNormalization", prefix="inference: is_training false; ")
