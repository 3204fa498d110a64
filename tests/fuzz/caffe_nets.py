"""Random Caffe prototxts (random weights), valid by construction: a net grows layer by layer
from one NCHW input (batch 1 or 3: Caffe shapes are static), each layer drawn among those
that apply to a live blob's shape. OpenCV is the oracle (``nhwc_onnx.verify`` runs it)."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

from tests.fuzz.claims import CONDITIONS, Made, _pin
from tests.fuzz.oracle import Verdict, judge, refused


@dataclass
class Blob:
    name: str
    dims: tuple[int, ...]  # after the batch
    nonneg: bool = False


@dataclass
class CaffeNet:
    prototxt: str
    nodes: dict[str, Made]
    batch: int
    summary: list[str] = field(default_factory=list)


def _layer(name, type_, bottoms, tops, params=""):
    bs = " ".join(f'bottom: "{b}"' for b in bottoms)
    ts = " ".join(f'top: "{t}"' for t in tops)
    return f'layer {{ name: "{name}" type: "{type_}" {bs} {ts} {params} }}\n'


class _Builder:
    def __init__(self, draw):
        self.draw = draw
        self.layers: list[str] = []
        self.made: dict[str, Made] = {}
        self.live: list[Blob] = []
        self.consumed: set[str] = set()
        self.count = 0

    def add(self, type_, bottoms, params="", facts=None, tops=1) -> list[str]:
        self.count += 1
        name = f"{type_.lower()}{self.count}"
        outs = [name] if tops == 1 else [f"{name}_{i}" for i in range(tops)]
        self.layers.append(_layer(name, type_, [b.name for b in bottoms], outs, params))
        self.consumed.update(b.name for b in bottoms)
        self.made[name] = Made(type_, dict(facts or {}))
        return outs

    def pick(self, *values):
        return self.draw(st.sampled_from(values))

    def activation(self, b: Blob) -> Blob:
        kind = self.pick("ReLU", "LeakyReLU", "Sigmoid", "TanH", "AbsVal", "ELU", "Dropout",
                         "Power", "BNLL")
        params, facts = "", {}
        if kind == "LeakyReLU":
            kind, params = "ReLU", "relu_param { negative_slope: 0.1 }"
        if kind == "Power":
            power = self.pick(1, 2, 3, 0.5)
            params = f"power_param {{ power: {power} scale: 0.5 shift: 0.25 }}"
            facts = {"power": power}
        out = self.add(kind, [b], params, facts)[0]
        return Blob(out, b.dims, kind in ("ReLU", "Sigmoid", "AbsVal") and "slope" not in params)

    def conv(self, b: Blob) -> Blob | None:
        c, h, w = b.dims
        k = self.draw(st.integers(1, min(3, h, w)))
        s = self.draw(st.integers(1, 2))
        p = self.draw(st.integers(0, k - 1))
        d = self.draw(st.integers(1, 2)) if min(h, w) > 2 * k else 1
        group = self.pick(*[g for g in (1, c) if c % g == 0])
        out_c = c if group > 1 else self.draw(st.integers(2, 7))
        bias = self.pick("true", "false")
        kind = self.pick("Convolution", "Deconvolution") if d == 1 and group == 1 else \
            "Convolution"
        params = (f"convolution_param {{ num_output: {out_c} kernel_size: {k} stride: {s} "
                  f"pad: {p} dilation: {d} group: {group} bias_term: {bias} "
                  "weight_filler { type: \"gaussian\" std: 0.3 } }")
        span = (k - 1) * d + 1
        if kind == "Deconvolution":
            oh, ow = (h - 1) * s + k - 2 * p, (w - 1) * s + k - 2 * p
        else:
            oh, ow = (h + 2 * p - span) // s + 1, (w + 2 * p - span) // s + 1
        if oh < 1 or ow < 1:
            return None
        return Blob(self.add(kind, [b], params, {})[0], (out_c, oh, ow))

    def pool(self, b: Blob) -> Blob | None:
        c, h, w = b.dims
        mode = self.pick("MAX", "AVE")
        if self.draw(st.integers(0, 4)) == 0:
            out = self.add("Pooling", [b], f"pooling_param {{ pool: {mode} global_pooling: "
                           "true }", {"stride_ok": True})[0]
            return Blob(out, (c, 1, 1), b.nonneg)
        k = self.draw(st.integers(1, min(3, h, w)))
        s = self.draw(st.integers(1, 3))
        p = self.draw(st.integers(0, k - 1))
        params = f"pooling_param {{ pool: {mode} kernel_size: {k} stride: {s} pad: {p} }}"

        def size(n):  # Caffe rounds up, then drops a window starting in the padding
            out = -(-(n + 2 * p - k) // s) + 1
            return out - 1 if p and (out - 1) * s >= n + p else out
        oh, ow = size(h), size(w)
        if oh < 1 or ow < 1:
            return None
        out = self.add("Pooling", [b], params, {"stride_ok": s <= k})[0]
        return Blob(out, (c, oh, ow), b.nonneg)

    def batchnorm(self, b: Blob) -> Blob:
        bn = self.add("BatchNorm", [b], "batch_norm_param { use_global_stats: true }")[0]
        out = self.add("Scale", [Blob(bn, b.dims)], "scale_param { bias_term: true }")[0]
        return Blob(out, b.dims)

    def eltwise(self, b: Blob) -> Blob | None:
        others = [o for o in self.live if o.dims == b.dims and o.name != b.name]
        if not others:
            return None
        op = self.pick("SUM", "PROD", "MAX")
        coeff = " coeff: 1 coeff: -0.5" if op == "SUM" and self.draw(st.booleans()) else ""
        out = self.add("Eltwise", [b, self.pick(*others)],
                       f"eltwise_param {{ operation: {op}{coeff} }}")[0]
        return Blob(out, b.dims)

    def concat_slice(self, b: Blob) -> Blob | None:
        c = b.dims[0]
        if c >= 2 and self.draw(st.booleans()):
            cut = self.draw(st.integers(1, c - 1))
            tops = self.add("Slice", [b], f"slice_param {{ axis: 1 slice_point: {cut} }}",
                            tops=2)
            self.live.append(Blob(tops[1], (c - cut, *b.dims[1:]), b.nonneg))
            return Blob(tops[0], (cut, *b.dims[1:]), b.nonneg)
        others = [o for o in self.live if o.dims[1:] == b.dims[1:] and o.name != b.name]
        if not others:
            return None
        o = self.pick(*others)
        out = self.add("Concat", [b, o], "concat_param { axis: 1 }")[0]
        return Blob(out, (b.dims[0] + o.dims[0], *b.dims[1:]))

    def dense(self, b: Blob) -> Blob:
        units = self.draw(st.integers(2, 9))
        out = self.add("InnerProduct", [b], f"inner_product_param {{ num_output: {units} "
                       "weight_filler { type: \"gaussian\" std: 0.2 } }")[0]
        return Blob(out, (units,))

    def softmax(self, b: Blob) -> Blob:
        return Blob(self.add("Softmax", [b], "", {"single_axis": True,
                                                  "axis_size": b.dims[0]})[0], b.dims, True)

    def flatten_or_permute(self, b: Blob) -> Blob:
        if self.draw(st.booleans()):
            import math
            return Blob(self.add("Flatten", [b])[0], (math.prod(b.dims),), b.nonneg)
        order = [0] + list(self.draw(st.permutations([1, 2, 3])))
        out = self.add("Permute", [b], "permute_param { " + " ".join(
            f"order: {o}" for o in order) + " }")[0]
        return Blob(out, tuple(b.dims[o - 1] for o in order[1:]), b.nonneg)

    def lrn(self, b: Blob) -> Blob:
        return Blob(self.add("LRN", [b], "lrn_param { local_size: 3 }")[0], b.dims)


MAP_FAMILIES = ("activation", "conv", "conv", "pool", "batchnorm", "eltwise", "concat_slice",
                "softmax", "flatten_or_permute", "lrn")


@st.composite
def caffe_nets(draw, max_layers: int = 5) -> CaffeNet:
    batch = draw(st.sampled_from([1, 3]))
    dims = tuple(draw(st.lists(st.integers(2, 9), min_size=3, max_size=3, unique=True)))
    b = _Builder(draw)
    x = Blob("data", dims)
    b.live.append(x)
    current, summary = x, []
    for _ in range(draw(st.integers(1, max_layers))):
        if len(current.dims) == 3:
            family = draw(st.sampled_from(MAP_FAMILIES + ("dense",)))
        else:
            family = draw(st.sampled_from(("activation", "dense", "softmax")))
        made = getattr(b, family)(current)
        if made is None:
            continue
        summary.append(family)
        b.live.append(made)
        current = made if draw(st.integers(0, 3)) else draw(st.sampled_from(b.live))
    if not [t for t in b.live if t.name not in b.consumed and t.name != "data"]:
        b.activation(x)
    shape = " ".join(f"dim: {d}" for d in (batch, *dims))
    text = f'input: "data"\ninput_shape {{ {shape} }}\n' + "".join(b.layers)
    return CaffeNet(text, b.made, batch, summary)


def check_caffe_net(net: CaffeNet, workdir: Path | None = None) -> Verdict:
    from nhwc_onnx.errors import UnsupportedOpError
    from nhwc_onnx.frontends.caffe import random_weights
    from nhwc_onnx.options import ConvertOptions
    from tests.frontends.caffe.caffe_testlib import layer_types, write_caffemodel_pb

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        proto = Path(tmp) / "fuzz.prototxt"
        proto.write_text(net.prototxt)
        try:
            _, blobs = random_weights(proto, ConvertOptions(seed=0))
        except UnsupportedOpError as exc:  # refused while reading the net
            verdict = Verdict()
            verdict.failures += [f"unexplained refusal: {p}"
                                 for p in refused("caffe", exc, net.nodes, verdict)]
            return verdict
        weights = Path(tmp) / "fuzz.caffemodel"
        write_caffemodel_pb(weights, blobs, layer_types(net.prototxt))
        return judge("caffe", proto, net.nodes, (net.batch,), None, {},
                     ConvertOptions(weights=str(weights)))


def save_caffe_net(net: CaffeNet, path: Path) -> Path:
    target = path.with_suffix(".prototxt")
    target.write_text(net.prototxt)
    return target


_POOL = CONDITIONS[("onnx", "MaxPool")][0]
_pin("caffe", "Pooling", "MAX or AVE without a mask top; with ceil rounding, a stride no "
     "larger than the kernel; MaxPool: " + _POOL + "; AveragePool: "
     + CONDITIONS[("onnx", "AveragePool")][0] + "; GlobalMaxPool: the input is a 4-D map; "
     "GlobalAveragePool: the input is a 4-D map", lambda f: f["stride_ok"])
_pin("caffe", "Power", "power is 1, 2 or 3 (3: x*x*x within 2 float32 ulps, refused by "
     "--strict); a square root, reciprocal or other power has no dialect form",
     lambda f: f["power"] in (1, 2, 3))
_pin("caffe", "Softmax", CONDITIONS[("onnx", "Softmax")][0],
     lambda f: f["single_axis"] and f["axis_size"] > 1)
_pin("caffe", "BatchNorm", "use_global_stats (the default at test time): batch statistics "
     "have no dialect form", lambda f: True)
for _op in ("Convolution", "Deconvolution"):
    _pin("caffe", _op, "2-D", lambda f: True)
