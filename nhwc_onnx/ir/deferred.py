"""Constants whose values are read on first use.

``check`` validates shapes, element types and attributes: a dialect file's weights are never
needed, so their pages of the mapped file need not be read. The reader gives such a run
``DeferredArray`` constants: shape and element type known from the file, values decoded only
if some rule asks for them.
Anything numpy would do with the array works on it unchanged; it only happens later.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

# Bytes per element of the types a DeferredArray may have (numpy's itemsize).
ITEMSIZE = {"float16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2,
            "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool": 1}


class DeferredArray:
    """An array's shape and element type now; its values from ``read()`` on first use."""

    __slots__ = ("_array", "_read", "dtype_name", "shape")

    def __init__(self, shape: tuple, dtype_name: str, read: Callable[[], Any]):
        self.shape = tuple(shape)
        self.dtype_name = dtype_name
        self._read: Callable[[], Any] | None = read
        self._array = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * ITEMSIZE[self.dtype_name]

    @property
    def dtype(self):
        import numpy as np

        return np.dtype(self.dtype_name)

    def materialize(self):
        if self._read is not None:
            self._array = self._read()
            self._read = None
        return self._array

    def __array__(self, dtype=None, copy=None):
        import numpy as np

        array = self.materialize()
        if copy:  # numpy 2 asks for a copy this way; the values may be a read-only view
            return np.array(array, dtype=dtype, copy=True)
        return array if dtype is None else np.asarray(array, dtype=dtype)

    def __getattr__(self, name: str):
        return getattr(self.materialize(), name)

    def __getitem__(self, key):
        return self.materialize()[key]

    def __len__(self) -> int:
        return len(self.materialize())

    def __iter__(self):
        return iter(self.materialize())

    def __repr__(self) -> str:
        state = "read" if self._read is None else "not read"
        return f"{type(self).__name__}({self.dtype_name}{list(self.shape)}, {state})"


def _delegate(name: str):
    def method(self, *args):
        return getattr(self.materialize(), name)(*args)

    method.__name__ = name
    return method


for _name in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
              "rfloordiv", "mod", "pow", "matmul", "rmatmul", "neg", "pos", "abs", "invert",
              "and", "or", "xor", "eq", "ne", "lt", "le", "gt", "ge", "bool", "int", "float",
              "index"):
    setattr(DeferredArray, f"__{_name}__", _delegate(f"__{_name}__"))
DeferredArray.__hash__ = None  # type: ignore[assignment,method-assign]  # the unhashable mark
# (as ndarray: compared by value), which typeshed's object.__hash__ cannot express


class ScaledWeight(DeferredArray):
    """A float32 weight times per-channel factors, as BatchNorm folding defines it: each
    product computed in float64 and rounded to float32, one factor after the other. Kept as
    the source weight (a view, often of the mapped file) plus the factors broadcast to its
    shape, so the writer computes it block by block into its own buffer: no fresh memory of
    the weight's size (on this kind of machine each fresh page costs ~3 us to fault in).
    A transpose stays deferred; anything else reads the values."""

    __slots__ = ("base", "factors")

    def __init__(self, base, factors: list):
        # The reader is not a bound method: ``self`` -> reader -> ``self`` would be a reference
        # cycle, and a replaced weight would wait for the cycle collector to be freed.
        super().__init__(base.shape, "float32", lambda: _scaled(base, factors))
        self.base = base
        self.factors = factors

    @classmethod
    def of(cls, weight, factor):
        """``weight`` (float32 ndarray or ScaledWeight) times ``factor`` (broadcastable)."""
        import numpy as np

        if isinstance(weight, ScaledWeight):
            base, factors = weight.base, weight.factors
        else:
            base, factors = weight, []
        return cls(base, [*factors, np.broadcast_to(factor, base.shape)])

    def transpose(self, *axes):
        return ScaledWeight(self.base.transpose(*axes), [f.transpose(*axes) for f in self.factors])

    @property
    def T(self):
        return self.transpose()

    def scale_into(self, out, rows: slice = slice(None)) -> None:
        """``out`` holds ``base[rows]`` as float32: multiply it, in place, by each factor."""
        _scale_into(out, self.factors, rows)


def _scale_into(out, factors: list, rows: slice) -> None:
    import numpy as np

    for factor in factors:
        np.multiply(out, factor[rows], out=out, dtype=np.float64, casting="same_kind")


def _scaled(base, factors: list):
    import numpy as np

    out = np.empty(base.shape, np.float32)
    np.copyto(out, base)  # float32 into float32: exact
    _scale_into(out, factors, slice(None))
    return out
