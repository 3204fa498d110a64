"""The exporter idioms the ONNX graph fuzzer grows (``onnx_graphs._Builder`` mixes them in):
what PyTorch, tf2onnx and Keras exports write around the core ops - Flatten->Gemm, the
Shape->Gather->Concat->Reshape batch chain, a Linear on a permuted map, squeeze-excitation,
the ELU Where idiom, Tile/Expand, size-1 Reshapes, batch arithmetic, a Flatten as the output.
Each method takes a live tensor and returns the tensor it made (None when it does not apply);
the builder supplies ``node``, ``const``, ``weights``, ``ints``, ``choice``, ``dim`` and
``draw``."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st
from onnx import TensorProto


@dataclass
class Tensor:
    name: str
    dims: tuple[int, ...]  # the axes after the batch
    nonneg: bool = False

    @property
    def rank(self) -> int:
        return len(self.dims) + 1


class ExporterIdioms:
    """The idiom half of the graph builder (the op families are in ``onnx_graphs``)."""

    def flatten_gemm(self, t: Tensor) -> Tensor:
        """Flatten -> Gemm, or the exporters' Shape->Gather->Unsqueeze->Concat->Reshape."""
        features = int(np.prod(t.dims))
        if t.rank == 2:
            flat = t.name
        elif self.draw(st.booleans()):
            flat = self.node("Flatten", [t.name], {}, axis=1)[0]
        else:
            flat = self.batch_reshape(t, [-1])
        units = self.dim()
        if self.draw(st.booleans()):
            trans = self.draw(st.booleans())
            w = self.weights((units, features) if trans else (features, units))
            inputs = [flat, w]
            if self.opset < 11 or self.draw(st.booleans()):
                inputs.append(self.const(self.rng.standard_normal(units).astype(np.float32)))
            out = self.node("Gemm", inputs, {}, transB=int(trans))[0]
        else:
            out = self.node("MatMul", [flat, self.weights((features, units))],
                            {"weight_constant": True, "weight_rank": 2, "rank": 2})[0]
        return Tensor(out, (units,))

    def batch_reshape(self, t: Tensor, rest: list[int]) -> str:
        """Reshape to (batch, *rest): the batch from Shape->Gather->Unsqueeze->Concat (as
        PyTorch exports x.view(x.size(0), ...)) or a 0 entry."""
        if self.draw(st.booleans()):
            shape = self.ints([0, *rest])
        else:
            s = self.node("Shape", [t.name], {})[0]
            n = self.node("Gather", [s, self.const(np.array(0, np.int64))], {}, axis=0)[0]
            if self.opset >= 13:
                n1 = self.node("Unsqueeze", [n, self.ints([0])], {})[0]
            else:
                n1 = self.node("Unsqueeze", [n], {}, axes=[0])[0]
            shape = self.node("Concat", [n1, self.ints(rest)], {}, axis=0)[0]
        return self.node("Reshape", [t.name, shape], {})[0]

    def linear_on_map(self, t: Tensor) -> Tensor | None:
        """PyTorch's per-pixel Linear: permute(0,2,3,1) -> Linear -> permute(0,3,1,2)."""
        if t.rank != 4:
            return None
        c, h, w = t.dims
        units = self.dim()
        p = self.node("Transpose", [t.name], {}, perm=[0, 2, 3, 1])[0]
        m = self.node("MatMul", [p, self.weights((c, units))],
                      {"weight_constant": True, "weight_rank": 2, "rank": 4})[0]
        if self.draw(st.booleans()):
            m = self.node("Add", [m, self.const(self.rng.standard_normal(units).astype(
                np.float32))], {"broadcast": "const"})[0]
        out = self.node("Transpose", [m], {}, perm=[0, 3, 1, 2])[0]
        return Tensor(out, (units, h, w))

    def se_block(self, t: Tensor) -> Tensor | None:
        """Squeeze-and-excitation: x * sigmoid(conv(global pool x)) (a size-1 broadcast)."""
        if t.rank != 4:
            return None
        c = t.dims[0]
        g = self.node("GlobalAveragePool", [t.name], {"rank": 4})[0]
        z = self.node("Conv", [g, self.weights((c, c, 1, 1))], {"rank": 4},
                      kernel_shape=[1, 1])[0]
        s = self.node("Sigmoid", [z], {})[0]
        return Tensor(self.node("Mul", [t.name, s], {"broadcast": "size1"})[0], t.dims)

    def elu_idiom(self, t: Tensor) -> Tensor | None:
        if self.opset < 9:  # Where
            return None
        alpha = self.choice([0.5, 1.0])
        g = self.node("Greater", [t.name, self.const(np.float32(0))], {"idiom": True})[0]
        e = self.node("Exp", [t.name], {"idiom": True})[0]
        em1 = self.node("Sub", [e, self.const(np.float32(1))], {"broadcast": "scalar"})[0]
        neg = self.node("Mul", [em1, self.const(np.float32(alpha))], {"broadcast": "scalar"})[0]
        return Tensor(self.node("Where", [g, t.name, neg], {"idiom": True})[0], t.dims)

    def tile_expand(self, t: Tensor) -> Tensor | None:
        if t.rank != 4:
            return None
        if self.draw(st.booleans()) or self.opset < 8:
            reps = [1, 1, self.draw(st.integers(1, 2)), self.draw(st.integers(1, 2))]
            out = self.node("Tile", [t.name, self.ints(reps)], {})[0]
            return Tensor(out, (t.dims[0], t.dims[1] * reps[2], t.dims[2] * reps[3]),
                          t.nonneg)
        ones = [i for i, d in enumerate(t.dims) if d == 1]
        if not ones:
            return None
        dims = list(t.dims)
        for i in ones:
            dims[i] = self.dim()
        out = self.node("Expand", [t.name, self.ints([1, *dims])], {})[0]
        return Tensor(out, tuple(dims), t.nonneg)

    def reshape_size1(self, t: Tensor) -> Tensor | None:
        """A Reshape that only moves size-1 axes (tf2onnx's NHWC->NCHW of one channel)."""
        if t.rank != 4 or t.dims[0] != 1:
            return None
        _, h, w = t.dims
        r = self.node("Reshape", [t.name, self.ints([0, h, w, 1])], {})[0]
        back = self.node("Reshape", [r, self.ints([0, 1, h, w])], {})[0]
        return Tensor(back, t.dims, t.nonneg)

    def batch_arithmetic(self, t: Tensor) -> Tensor:
        s = self.node("Shape", [t.name], {})[0]
        n = self.node("Gather", [s, self.const(np.array(0, np.int64))], {}, axis=0)[0]
        f = self.node("Cast", [n], {"to": "float32"}, to=TensorProto.FLOAT)[0]
        op = self.choice(["Min", "Div"])
        other = self.const(np.float32(2.0))
        # from_batch: the node computes from the batch size (its [batch] refusal's note)
        v = self.node(op, [f, other], {"broadcast": "scalar", "divisor_constant": True,
                                       "from_batch": True})[0]
        if op == "Div":  # N // 2: on a value computed from static shapes when N is fixed
            v = self.node("Floor", [v], {"constant": self.batch is not None,
                                             "from_batch": True})[0]
        return Tensor(self.node("Mul", [t.name, v], {"broadcast": "scalar",
                                                     "from_batch": True})[0], t.dims)

    def flatten_output(self, t: Tensor) -> Tensor | None:
        if t.rank != 4:
            return None
        out = self.node("Flatten", [t.name], {}, axis=1)[0]
        return Tensor(out, (int(np.prod(t.dims)),), t.nonneg)
