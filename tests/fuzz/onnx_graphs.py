"""Random NCHW ONNX graphs, valid by construction (NNSmith-style): a graph grows op by op from
one image input, each op drawn among those that apply to a live tensor's shape, with every
dimension, axis and attribute drawn within the op's shape constraints. Opsets 7-22 (each op
written in its opset's form), IR 3-10, static or symbolic batch (always axis 0: no op moves it).

Each node is recorded as a ``claims.Made`` (its source op and the facts its ``when`` predicate
reads). Idioms whose conversion another change is fixing are drawn only when their name is in
``ENABLED`` (see ``PENDING``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from tests.fuzz.claims import Made
from tests.fuzz.onnx_idioms import ExporterIdioms, Tensor

# Idioms that find known false refusals being fixed elsewhere; generated only when enabled
# (FUZZ_ENABLE=name,name or FUZZ_ENABLE=all). Each name says what the idiom builds.
PENDING = {
    "ir3-unlisted-initializers": "IR 3 files whose initializers are not graph inputs (as old "
                                 "converters wrote them; onnxruntime runs them)",
    "batch-arithmetic": "Shape->Gather(0)->Min/Div computing data from the batch size (folded "
                        "to the probes' value: wrong at other batch sizes)",
}
# The integrator adds a name here once the fix of its class is merged.
ENABLED_BY_DEFAULT: frozenset[str] = frozenset({"batch-arithmetic", "ir3-unlisted-initializers"})
_env = os.environ.get("FUZZ_ENABLE", "")
ENABLED = ENABLED_BY_DEFAULT | (frozenset(PENDING) if _env == "all"
                                else frozenset(n for n in _env.split(",") if n))

MIN_IR = {7: 3, 8: 3, 9: 4, 10: 5, 11: 6, 12: 7, 13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8,
          19: 9, 20: 9, 21: 10, 22: 10}
NEVER_UNARY = ("Floor", "Ceil", "Log", "Erf", "Sign", "Reciprocal", "Softplus", "Round")
NEVER_SINCE = {"Erf": 9, "Sign": 9, "Round": 11}


@dataclass
class OnnxGraph:
    model: onnx.ModelProto
    nodes: dict[str, Made]
    batch: int | None  # None: symbolic (checked at several sizes)
    input_dims: dict[str, tuple[int, ...]]
    summary: list[str] = field(default_factory=list)


class _Builder(ExporterIdioms):
    def __init__(self, draw, opset: int, batch: int | None):
        self.draw, self.opset, self.batch = draw, opset, batch
        self.nodes: list[onnx.NodeProto] = []
        self.inits: dict[str, np.ndarray] = {}
        self.made: dict[str, Made] = {}
        self.live: list[Tensor] = []
        self.consumed: set[str] = set()
        self.count = 0
        self.rng = np.random.default_rng(draw(st.integers(0, 2**16)))

    # -- plumbing --
    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def const(self, array, stem: str = "k") -> str:
        name = self.fresh(stem)
        self.inits[name] = np.asarray(array)
        return name

    def weights(self, shape, scale: float | None = None) -> str:
        fan = max(1, int(np.prod(shape[1:]))) if len(shape) > 1 else 1
        w = self.rng.standard_normal(shape) * (scale or 1.0 / np.sqrt(fan))
        return self.const(w.astype(np.float32), "w")

    def node(self, op: str, inputs, facts=None, outputs=1, record=True, **attrs) -> list[str]:
        name = self.fresh(op.lower() + "_")
        outs = [f"{name}_out{i}" if outputs > 1 else name for i in range(outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=name, **attrs))
        self.consumed.update(i for i in inputs if i)
        if record:
            self.made[name] = Made(op, dict(facts or {}))
        return outs

    def ints(self, values) -> str:
        return self.const(np.asarray(values, np.int64), "i")

    def choice(self, options):
        return self.draw(st.sampled_from(list(options)))

    def dim(self) -> int:
        return self.draw(st.integers(2, 7))

    # -- op families: each returns the new tensor or None when it does not apply --
    def unary(self, t: Tensor) -> Tensor:
        op = self.choice(["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Elu", "LeakyRelu",
                          "HardSigmoid", "Selu", "Clip", "Identity", "HardSwish", "Cast",
                          "Dropout", "PRelu"])
        attrs, inputs, facts = {}, [t.name], {"rank": t.rank}
        if op in ("Elu", "LeakyRelu", "HardSigmoid"):
            attrs["alpha"] = self.choice([0.1, 0.3, 1.0])
        if op == "HardSwish" and self.opset < 14:
            op = "HardSigmoid"
        if op == "Clip":
            lo, hi = self.choice([(0.0, 6.0), (-0.5, 0.5), (-1.0, None), (None, 0.25)])
            facts["bounds_constant"] = True
            if self.opset < 11:
                attrs.update({k: v for k, v in (("min", lo), ("max", hi)) if v is not None})
            else:
                inputs += [self.const(np.float32(lo)) if lo is not None else "",
                           self.const(np.float32(hi)) if hi is not None else ""]
                while inputs and inputs[-1] == "":
                    inputs.pop()
        if op == "Cast":
            attrs["to"] = TensorProto.FLOAT
            facts["to"] = "float32"
        if op == "PRelu":
            slope = self.rng.uniform(0.05, 0.5, (t.dims[0],) + (1,) * (t.rank - 2))
            inputs.append(self.const(slope.astype(np.float32)))
        if op == "Dropout" and self.opset >= 12 and self.draw(st.booleans()):
            inputs += [self.const(np.float32(0.5)), self.const(np.bool_(False))]
        out = self.node(op, inputs, facts, **attrs)[0]
        nonneg = op in ("Relu", "Sigmoid", "Abs", "HardSigmoid") or (op == "Clip" and lo == 0)
        return Tensor(out, t.dims, nonneg or (op in ("Identity", "Cast", "Dropout")
                                              and t.nonneg))

    def never_unary(self, t: Tensor) -> Tensor:
        op = self.choice([o for o in NEVER_UNARY if self.opset >= NEVER_SINCE.get(o, 7)])
        return Tensor(self.node(op, [t.name])[0], t.dims)

    def binary_const(self, t: Tensor) -> Tensor:
        op = self.choice(["Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean", "Pow"])
        kind = self.choice(["scalar", "per-channel", "full"])
        shape = {"scalar": (), "per-channel": (t.dims[0],) + (1,) * (t.rank - 2),
                 "full": t.dims}[kind]
        if op == "Pow":
            e = self.choice([1.0, 2.0, 3.0, 0.5, -1.0])
            out = self.node(op, [t.name, self.const(np.float32(e))], {"exponent": e})[0]
            return Tensor(out, t.dims, e == 2.0 or t.nonneg)
        c = self.rng.uniform(0.5, 1.5, shape).astype(np.float32)
        if op in ("Max", "Min", "Sum", "Mean") and self.opset < 8:
            op = "Add"  # no broadcasting before opset 8
        facts = {"broadcast": kind, "divisor_constant": True}
        args = [t.name, self.const(c[None] if kind == "full" else c)]
        if op in ("Add", "Mul", "Max", "Min", "Sum", "Mean") and self.draw(st.booleans()):
            args.reverse()
        return Tensor(self.node(op, args, facts)[0], t.dims)

    def binary_tensors(self, t: Tensor) -> Tensor | None:
        others = [o for o in self.live if o.dims == t.dims and o.name != t.name]
        size1 = [o for o in self.live if o.rank == t.rank and o.name != t.name and all(
            a in (1, b) for a, b in zip(o.dims, t.dims)) and o.dims != t.dims]
        if not others and not size1:
            return None
        op = self.choice(["Add", "Sub", "Mul", "Max", "Min", "Sum", "Mean", "Div", "MatMul"])
        pool = others if others and (not size1 or self.draw(st.booleans())) else size1
        o = self.choice(pool)
        if op in ("Max", "Min", "Sum", "Mean") and self.opset < 8 and o.dims != t.dims:
            op = "Add"
        if op == "MatMul":
            if len(t.dims) < 2 or t.dims[-1] != t.dims[-2] or o.dims != t.dims:
                op = "Add"
            else:
                return Tensor(self.node(op, [t.name, o.name], {
                    "weight_constant": False, "rank": t.rank})[0], t.dims)
        facts = {"broadcast": "same" if o.dims == t.dims else "size1",
                 "divisor_constant": False}
        return Tensor(self.node(op, [t.name, o.name], facts)[0], t.dims)

    def conv(self, t: Tensor) -> Tensor | None:
        if t.rank != 4:
            return None
        c, h, w = t.dims
        kh, kw = self.draw(st.integers(1, min(3, h))), self.draw(st.integers(1, min(3, w)))
        group = self.choice([g for g in (1, c) if c % g == 0])
        out_c = self.dim() if group == 1 else c * self.choice([1, 2])
        strides = [self.draw(st.integers(1, 2)), self.draw(st.integers(1, 2))]
        dil = [1, 1] if self.draw(st.booleans()) else [
            self.draw(st.integers(1, 2)) if h > 2 * kh else 1,
            self.draw(st.integers(1, 2)) if w > 2 * kw else 1]
        pads = [self.draw(st.integers(0, k - 1)) for k in (kh, kw, kh, kw)]
        attrs = {"kernel_shape": [kh, kw], "strides": strides, "dilations": dil}
        auto = self.choice(["NOTSET", "NOTSET", "SAME_UPPER", "VALID"])
        if auto == "SAME_UPPER" and dil != [1, 1]:
            auto = "NOTSET"  # onnxruntime has no dilated SAME convolution
        if auto == "NOTSET":
            attrs["pads"] = pads
        else:
            attrs["auto_pad"] = auto
        inputs = [t.name, self.weights((out_c, c // group, kh, kw))]
        if self.draw(st.booleans()):
            inputs.append(self.const(self.rng.standard_normal(out_c).astype(np.float32)))
        if group > 1:
            attrs["group"] = group
        oh, ow = _conv_out((h, w), (kh, kw), strides, dil, pads, auto)
        if oh < 1 or ow < 1:
            return None
        return Tensor(self.node("Conv", inputs, {"rank": 4}, **attrs)[0], (out_c, oh, ow))

    def conv_transpose(self, t: Tensor) -> Tensor | None:
        if t.rank != 4:
            return None
        c, h, w = t.dims
        k = [self.draw(st.integers(1, 3)), self.draw(st.integers(1, 3))]
        s = [self.draw(st.integers(1, 2)), self.draw(st.integers(1, 2))]
        pads = [self.draw(st.integers(0, kk - 1)) for kk in k + k]
        out_pad = [self.draw(st.integers(0, ss - 1)) for ss in s]
        oc = self.dim()
        oh = (h - 1) * s[0] + k[0] + out_pad[0] - pads[0] - pads[2]
        ow = (w - 1) * s[1] + k[1] + out_pad[1] - pads[1] - pads[3]
        if oh < 1 or ow < 1:
            return None
        attrs = {"kernel_shape": k, "strides": s, "pads": pads}
        if any(out_pad):
            attrs["output_padding"] = out_pad
        out = self.node("ConvTranspose", [t.name, self.weights((c, oc, *k))], {"rank": 4},
                        **attrs)[0]
        return Tensor(out, (oc, oh, ow))

    def pool(self, t: Tensor) -> Tensor | None:
        if t.rank != 4:
            return None
        c, h, w = t.dims
        op = self.choice(["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"])
        if op.startswith("Global"):
            return Tensor(self.node(op, [t.name], {"rank": 4})[0], (c, 1, 1), t.nonneg)
        k = [self.draw(st.integers(1, min(3, h))), self.draw(st.integers(1, min(3, w)))]
        s = [self.draw(st.integers(1, 3)), self.draw(st.integers(1, 3))]
        pads = [self.draw(st.integers(0, kk - 1)) for kk in k + k]
        attrs = {"kernel_shape": k, "strides": s}
        ceil = self.opset >= 10 and self.draw(st.booleans())
        dil = [1, 1]
        if op == "MaxPool" and self.opset >= 10 and self.draw(st.booleans()):
            dil = [self.draw(st.integers(1, 2)), self.draw(st.integers(1, 2))]
        auto = self.choice(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
        if auto == "NOTSET":
            attrs["pads"] = pads
        else:
            attrs["auto_pad"] = auto
            pads = [0, 0, 0, 0]
        if ceil:
            attrs["ceil_mode"] = 1
        if dil != [1, 1]:
            attrs["dilations"] = dil
        if op == "AveragePool":
            attrs["count_include_pad"] = int(self.draw(st.booleans()))
        oh, ow = _pool_out((h, w), k, s, dil, pads, auto, ceil)
        if oh < 1 or ow < 1 or any(p >= kk for p, kk in zip(pads, k + k)):
            return None
        spans = [(kk - 1) * dd + 1 for kk, dd in zip(k, dil)]
        facts = {"rank": 4, "dilated": dil != [1, 1], "nonneg": t.nonneg,
                 "padded": any(pads) or auto.startswith("SAME") or ceil,
                 "valid_partial": auto == "VALID" and ceil and any(
                     n >= sp and (n - sp) % ss for n, sp, ss in zip((h, w), spans, s))}
        return Tensor(self.node(op, [t.name], facts, **attrs)[0], (c, oh, ow), t.nonneg)

    def batchnorm(self, t: Tensor) -> Tensor | None:
        if t.rank < 3:
            return None
        c = t.dims[0]
        stats = [self.const(self.rng.uniform(0.5, 1.5, c).astype(np.float32)),
                 self.const(self.rng.uniform(-0.5, 0.5, c).astype(np.float32)),
                 self.const(self.rng.uniform(-0.5, 0.5, c).astype(np.float32)),
                 self.const(self.rng.uniform(0.5, 1.5, c).astype(np.float32))]
        return Tensor(self.node("BatchNormalization", [t.name, *stats], {}, epsilon=1e-3)[0],
                      t.dims)

    def reduce(self, t: Tensor) -> Tensor | None:
        if t.rank < 3:
            return None
        op = self.choice(["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL1",
                          "ReduceSumSquare", "ReduceL2", "ReduceProd"])
        axes = sorted(self.draw(st.sets(st.integers(1, t.rank - 1), min_size=1)))
        keep = int(self.draw(st.booleans()))
        attrs, inputs = {"keepdims": keep}, [t.name]
        takes_input = self.opset >= 18 or (op == "ReduceSum" and self.opset >= 13)
        if takes_input:
            inputs.append(self.ints(axes))
        else:
            attrs["axes"] = axes
        dims = tuple(1 if i + 1 in axes else d for i, d in enumerate(t.dims)) if keep else \
            tuple(d for i, d in enumerate(t.dims) if i + 1 not in axes)
        out = self.node(op, inputs, {"rank": t.rank, "axes": axes,
                                         "symbolic_batch": self.batch is None}, **attrs)[0]
        return Tensor(out, dims, op in ("ReduceL1", "ReduceSumSquare", "ReduceL2"))

    def transpose(self, t: Tensor) -> Tensor:
        rest = list(self.draw(st.permutations(range(1, t.rank))))
        perm = [0] + rest
        return Tensor(self.node("Transpose", [t.name], {}, perm=perm)[0],
                      tuple(t.dims[p - 1] for p in rest), t.nonneg)

    def transpose_chain(self, t: Tensor) -> Tensor:
        first = self.transpose(t)
        self.live.append(first)
        return self.transpose(first)

    def softmax(self, t: Tensor) -> Tensor:
        axis = self.draw(st.integers(1, t.rank - 1))
        single = self.opset >= 13 or axis == t.rank - 1
        out = self.node("Softmax", [t.name], {"single_axis": single,
                                              "axis_size": t.dims[axis - 1]}, axis=axis)[0]
        return Tensor(out, t.dims, True)

    def concat(self, t: Tensor) -> Tensor | None:
        axis = self.draw(st.integers(1, t.rank - 1))
        others = [o for o in self.live if o.rank == t.rank and all(
            a == b for i, (a, b) in enumerate(zip(o.dims, t.dims)) if i != axis - 1)]
        if not others:
            return None
        parts = [t, self.choice(others)] + ([t] if self.draw(st.booleans()) else [])
        dims = list(t.dims)
        dims[axis - 1] = sum(p.dims[axis - 1] for p in parts)
        out = self.node("Concat", [p.name for p in parts], {}, axis=axis)[0]
        return Tensor(out, tuple(dims), all(p.nonneg for p in parts))

    def split(self, t: Tensor) -> Tensor | None:
        axis = self.draw(st.integers(1, t.rank - 1))
        size = t.dims[axis - 1]
        if size < 2:
            return None
        cut = self.draw(st.integers(1, size - 1))
        sizes = [cut, size - cut]
        attrs, inputs = {"axis": axis}, [t.name]
        if self.opset >= 13:
            inputs.append(self.ints(sizes))
        else:
            attrs["split"] = sizes
        outs = self.node("Split", inputs, {}, outputs=2, **attrs)
        made = []
        for o, n in zip(outs, sizes):
            dims = list(t.dims)
            dims[axis - 1] = n
            made.append(Tensor(o, tuple(dims), t.nonneg))
        self.live.append(made[1])
        return made[0]

    def slice(self, t: Tensor) -> Tensor | None:
        axis = self.draw(st.integers(1, t.rank - 1))
        size = t.dims[axis - 1]
        start = self.draw(st.integers(0, size - 1))
        end = self.draw(st.integers(start + 1, size))
        step = 1
        if self.opset >= 10 and self.draw(st.booleans()):
            step = self.choice([2, 3, -1])
        if step < 0:  # a flip from `end - 1` down to the first cell (ends beyond the axis)
            start, end = end - 1, -size - 1
            n = start + 1
        else:
            n = len(range(start, end, step))
        dims = list(t.dims)
        dims[axis - 1] = n
        steps_ok = step == 1 or (step > 0 and t.rank == 4 and axis >= 2)
        if self.opset < 10:
            out = self.node("Slice", [t.name], {"steps_ok": True}, starts=[start], ends=[end],
                            axes=[axis])[0]
        else:
            inputs = [t.name, self.ints([start]), self.ints([end]), self.ints([axis])]
            if step != 1 or self.draw(st.booleans()):
                inputs.append(self.ints([step]))
            out = self.node("Slice", inputs, {"steps_ok": steps_ok})[0]
        return Tensor(out, tuple(dims), t.nonneg)

    def pad(self, t: Tensor) -> Tensor | None:
        if t.rank != 4:
            return None
        mode = self.choice(["constant", "reflect", "edge"])
        _, h, w = t.dims
        pads = [0, 0] + [self.draw(st.integers(0, 2)) for _ in range(2)] + \
            [0, 0] + [self.draw(st.integers(0, 2)) for _ in range(2)]
        mirrored = mode != "reflect" or (max(pads[2], pads[6]) < h and max(pads[3], pads[7]) < w)
        value = self.choice([0.0, 0.5]) if mode == "constant" else 0.0
        if self.opset < 11:
            attrs = {"mode": mode, "pads": pads}
            if value:
                attrs["value"] = value
            out = self.node("Pad", [t.name], {"mirrored_cells_exist": mirrored}, **attrs)[0]
        else:
            inputs = [t.name, self.ints(pads)]
            if value:
                inputs.append(self.const(np.float32(value)))
            out = self.node("Pad", inputs, {"mirrored_cells_exist": mirrored}, mode=mode)[0]
        dims = (t.dims[0], h + pads[2] + pads[6], w + pads[3] + pads[7])
        return Tensor(out, dims, t.nonneg and value >= 0)

    def resize(self, t: Tensor) -> Tensor | None:
        if t.rank != 4:
            return None
        c, h, w = t.dims
        factors = [1.0, 1.0, float(self.draw(st.integers(1, 3))),
                   float(self.draw(st.integers(1, 3)))]
        if self.draw(st.integers(0, 5)) == 0:
            factors[self.choice([2, 3])] = 1.5
        mode = self.choice(["nearest", "linear"])
        dims = (c, int(h * factors[2]), int(w * factors[3]))
        facts = {"factors": factors, "mode": mode, "in_hw": (h, w), "coord": "asymmetric",
                 "nearest": "floor"}
        if self.opset < 9:
            return Tensor(self.node("Upsample", [t.name], facts, mode=mode, scales=factors)[0],
                          dims)
        scales = self.const(np.asarray(factors, np.float32))
        if self.opset < 10:
            attrs = {"mode": mode}
            inputs = [t.name, scales]
            return Tensor(self.node("Upsample", inputs, facts, **attrs)[0], dims)
        if self.opset == 10:
            return Tensor(self.node("Resize", [t.name, scales], facts, mode=mode)[0], dims)
        coord = self.choice(["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                             "tf_half_pixel_for_nn" if mode == "nearest" else "half_pixel"])
        nearest = self.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
        facts.update(coord=coord, nearest=nearest)
        attrs = {"mode": mode, "coordinate_transformation_mode": coord}
        if mode == "nearest":
            attrs["nearest_mode"] = nearest
        roi = "" if self.opset >= 13 else self.const(np.zeros(0, np.float32))
        if self.draw(st.booleans()) or factors[2] != int(factors[2]) or \
                factors[3] != int(factors[3]):
            inputs = [t.name, roi, scales]
        else:
            if self.batch is None:
                return None  # sizes would fix the batch
            no_scales = "" if self.opset >= 13 else self.const(np.zeros(0, np.float32))
            inputs = [t.name, roi, no_scales, self.ints([self.batch, *dims])]
        return Tensor(self.node("Resize", inputs, facts, **attrs)[0], dims)

    def depth_space(self, t: Tensor) -> Tensor | None:
        if t.rank != 4:
            return None
        c, h, w = t.dims
        if c % 4 == 0 and self.draw(st.booleans()):
            attrs = {"blocksize": 2}
            if self.opset >= 11:
                attrs["mode"] = self.choice(["DCR", "CRD"])
            out = self.node("DepthToSpace", [t.name], {}, **attrs)[0]
            return Tensor(out, (c // 4, h * 2, w * 2), t.nonneg)
        if h % 2 == 0 and w % 2 == 0:
            out = self.node("SpaceToDepth", [t.name], {}, blocksize=2)[0]
            return Tensor(out, (c * 4, h // 2, w // 2), t.nonneg)
        return None

    def squeeze_unsqueeze(self, t: Tensor) -> Tensor | None:
        ones = [i + 1 for i, d in enumerate(t.dims) if d == 1]
        if ones and self.draw(st.booleans()):
            axes = sorted(self.draw(st.sets(st.sampled_from(ones), min_size=1)))
            op, dims = "Squeeze", tuple(d for i, d in enumerate(t.dims) if i + 1 not in axes)
            if len(dims) == 0:
                return None
        else:
            if t.rank >= 5:
                return None
            axes = [self.draw(st.integers(1, t.rank))]
            dims = list(t.dims)
            dims.insert(axes[0] - 1, 1)
            op, dims = "Unsqueeze", tuple(dims)
        if self.opset >= 13:
            out = self.node(op, [t.name, self.ints(axes)], {})[0]
        else:
            out = self.node(op, [t.name], {}, axes=axes)[0]
        result = Tensor(out, dims, t.nonneg)
        if op == "Unsqueeze" and result.rank == 5:  # a rank-5 tensor: back to rank 4 at once
            return self.squeeze_back(result, axes[0])
        return result

    def squeeze_back(self, t: Tensor, axis: int) -> Tensor:
        dims = tuple(d for i, d in enumerate(t.dims) if i + 1 != axis)
        if self.opset >= 13:
            out = self.node("Squeeze", [t.name, self.ints([axis])], {})[0]
        else:
            out = self.node("Squeeze", [t.name], {}, axes=[axis])[0]
        return Tensor(out, dims, t.nonneg)

def _conv_out(hw, k, s, d, pads, auto):
    out = []
    for i, size in enumerate(hw):
        span = (k[i] - 1) * d[i] + 1
        if auto.startswith("SAME"):
            out.append(-(-size // s[i]))
        elif auto == "VALID":
            out.append((size - span) // s[i] + 1 if size >= span else 0)
        else:
            total = size + pads[i] + pads[i + 2]
            out.append((total - span) // s[i] + 1 if total >= span else 0)
    return out


def _pool_out(hw, k, s, d, pads, auto, ceil):
    out = []
    for i, size in enumerate(hw):
        span = (k[i] - 1) * d[i] + 1
        if auto.startswith("SAME"):
            n = -(-size // s[i])
            out.append(n if (n - 1) * s[i] + span >= size else 0)  # no negative padding
            continue
        total = size + pads[i] + pads[i + 2] if auto == "NOTSET" else size
        if total < span:
            out.append(0)
            continue
        n = (total - span + (s[i] - 1 if ceil else 0)) // s[i] + 1
        if ceil and (n - 1) * s[i] >= size + pads[i]:
            # onnxruntime drops a last window starting past the input, onnx's shape
            # inference keeps it: a constant of either shape after it is refused by one of
            # them (the converter follows onnxruntime: a named regression case)
            return [0, 0]
        out.append(n)
    return out


FAMILIES = ("unary", "binary_const", "binary_tensors", "conv", "conv_transpose", "pool",
            "batchnorm", "reduce", "transpose", "transpose_chain", "softmax", "concat",
            "split", "slice", "pad", "resize", "depth_space", "squeeze_unsqueeze",
            "flatten_gemm", "linear_on_map", "se_block", "elu_idiom", "tile_expand",
            "reshape_size1", "flatten_output", "never_unary")
FAMILY_PENDING = {"batch_arithmetic": "batch-arithmetic"}


@st.composite
def onnx_graphs(draw, max_ops: int = 6, never_ops: bool = True) -> OnnxGraph:
    opset = draw(st.integers(7, 22))
    ir = draw(st.integers(MIN_IR[opset], 10))
    symbolic = draw(st.booleans())
    batch = None if symbolic else draw(st.sampled_from([1, 3]))
    b = _Builder(draw, opset, batch)
    dims = tuple(draw(st.lists(st.integers(2, 9), min_size=3, max_size=3, unique=True)))
    x = Tensor("x", dims)
    b.live.append(x)
    families = [f for f in FAMILIES if never_ops or f != "never_unary"]
    families += [f for f, name in FAMILY_PENDING.items() if name in ENABLED]
    current = x
    summary = []
    for _ in range(draw(st.integers(1, max_ops))):
        family = draw(st.sampled_from(families))
        made = getattr(b, family)(current)
        if made is None:
            continue
        summary.append(family)
        b.live.append(made)
        grown = [t for t in b.live if t.rank >= 2]  # every family reads a non-batch axis
        current = made if made.rank >= 2 and draw(st.integers(0, 4)) else \
            draw(st.sampled_from(grown))
    outputs = [t for t in b.live if t.name not in b.consumed and t.name != "x"]
    if not outputs:
        outputs = [b.unary(x)]
    graph_inputs = [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["N" if symbolic else batch, *dims])]
    inits = [numpy_helper.from_array(a, n) for n, a in b.inits.items()]
    # IR 3 lists initializers as inputs; old converters did not always
    if ir < 4 and ("ir3-unlisted-initializers" not in ENABLED or draw(st.booleans())):
        graph_inputs += [helper.make_tensor_value_info(
            i.name, i.data_type, list(i.dims)) for i in inits]
    graph = helper.make_graph(
        b.nodes, "fuzz", graph_inputs,
        [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, None) for t in outputs],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir
    return OnnxGraph(model, b.made, batch, {"x": dims}, summary)
