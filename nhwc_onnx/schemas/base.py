"""Op schemas as data: ports, typed attributes, layout class, shape inference, lowering.

Two registries use this machinery: ``DIALECT_OPS`` (the 37 target ops, domain ``nhwc``) and
``CORE_OPS`` (the framework-neutral ops that frontends emit, domain ``core``).
"""
from __future__ import annotations

import enum
import importlib
from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import numpy as np

from ..ir.deferred import DeferredArray

if TYPE_CHECKING:
    from ..ir import Node


class AttrKind(enum.Enum):
    INT = "int"
    FLOAT = "float"
    STRING = "string"
    INTS = "ints"
    FLOATS = "floats"
    STRINGS = "strings"
    TENSOR = "tensor"


class LayoutClass(enum.Enum):
    """How an op relates to the data layout (tflite2onnx's classification). A dialect op
    declares its class; a core op's is the class of its NCHW->NHWC layout rule
    (``passes.layout.table.layout_class``)."""

    IMPLICIT = "implicit"  # layout lives in the weights / spatial semantics (Conv, Pool)
    TRANSPARENT = "transparent"  # elementwise: any layout works unchanged (Relu, Add)
    ATTRIBUTE = "attribute"  # an axis attribute or per-axis list is remapped (Concat, Tile)
    TERMINATE = "terminate"  # axes change meaning or are read in source order (Reshape, MatMul)


# Named tuples and plain classes, not dataclasses: see errors.py.
class Attr(namedtuple("Attr", "kind required default allowed doc",
                      defaults=(False, None, None, ""))):
    """An attribute of an op: its AttrKind; whether a node must set it; the default;
    ``allowed``: a tuple of the allowed values (scalars) or elements (lists), or None."""

    __slots__ = ()


class Port(namedtuple("Port", "name optional variadic dtypes constant doc",
                      defaults=(False, False, ("float32",), False, ""))):
    """An input or output of an op: its name; whether it may be absent; whether it repeats
    (the last input only); the element types it takes; ``constant``: it must be a constant
    (an initializer: weights, shapes)."""

    __slots__ = ()


class RuleError(Exception):
    """Raised by shape inference / checks: one broken rule of one node."""

    def __init__(self, rule: str, message: str, expected: Any = "", found: Any = ""):
        self.rule = rule
        self.message = message
        self.expected = "" if expected == "" else str(expected)
        self.found = "" if found == "" else str(found)
        super().__init__(message)


class InferContext:
    """What shape inference sees of one node."""

    __slots__ = ("attrs", "consts", "node", "shapes")

    def __init__(self, node: Node, attrs: dict[str, Any], shapes: list[tuple | None],
                 consts: list[np.ndarray | None]):
        self.node = node
        self.attrs = attrs  # with defaults filled in
        self.shapes = shapes  # per input (None: absent or unknown)
        self.consts = consts  # per input, the constant value if any

    def attr(self, name: str) -> Any:
        return self.attrs.get(name)

    def shape(self, index: int) -> tuple:
        shape = self.shapes[index] if index < len(self.shapes) else None
        if shape is None:
            raise RuleError("shape", f"shape of input {index} is unknown")
        return shape

    def has(self, index: int) -> bool:
        return index < len(self.shapes) and self.node.input(index) is not None

    def fail(self, rule: str, message: str, expected: Any = "", found: Any = "") -> NoReturn:
        raise RuleError(rule, message, expected, found)

    def require(self, cond: bool, rule: str, message: str, expected: Any = "", found: Any = ""):
        if not cond:
            raise RuleError(rule, message, expected, found)


class Lowerer(Protocol):
    """What a lowering function may do: emit standard ONNX nodes (default domain)."""

    def op(
        self, op_type: str, inputs: Sequence[str], outputs: int | Sequence[str] = 1, **attrs: Any
    ) -> list[str]:
        """Emit one standard ONNX node; returns its output names."""
        ...

    def const(self, array: np.ndarray, hint: str = "c") -> str:
        """Emit a constant tensor; returns its name."""
        ...


# lower(node, L, inputs, outputs): emit standard ONNX computing node's outputs (names given)
# from the names in ``inputs`` (None for an absent optional input). Shapes: node.inputs[i].shape.
LowerFn = Callable[["Node", Lowerer, list, list], None]
InferFn = Callable[[InferContext], list]
EvalFn = Callable[["Node", list], list]  # numpy evaluator for constant folding (core ops)
DtypeFn = Callable[["Node", list], list]  # (node, input element types) -> output element types


class OpSchema:
    """One op: its ports and attributes, its layout class (dialect ops; None for a core op,
    whose class follows from its layout rule in the passes), whether it is elementwise, and the
    functions that infer its shapes and element types, lower it to standard ONNX and evaluate
    it (core ops)."""

    def __init__(self, name: str, domain: str, doc: str, inputs: list[Port],
                 outputs: list[Port], attrs: dict[str, Attr] | None = None,
                 layout: LayoutClass | None = LayoutClass.TRANSPARENT,
                 infer: InferFn | None = None, lower: LowerFn | None = None,
                 evaluate: EvalFn | None = None, infer_dtype: DtypeFn | None = None,
                 elementwise: bool = False, source: str = ""):
        self.name = name
        self.domain = domain
        self.doc = doc
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = {} if attrs is None else attrs
        self.layout = layout
        self.infer = infer
        self.lower = lower
        self.evaluate = evaluate
        self.infer_dtype = infer_dtype
        # Each output element is computed from the same-position elements of the inputs
        # (numpy broadcasting): Relu, Add, Cast, Where ... (core ops)
        self.elementwise = elementwise
        self.source = source  # where the spec text is, e.g. "dialect spec v0.1 (docs/design.md)"

    def __repr__(self) -> str:
        return f"OpSchema({self.domain}.{self.name})"

    @property
    def min_inputs(self) -> int:
        return sum(1 for p in self.inputs if not p.optional and not p.variadic) + (
            1 if any(p.variadic and not p.optional for p in self.inputs) else 0
        )

    @property
    def max_inputs(self) -> int | None:
        return None if any(p.variadic for p in self.inputs) else len(self.inputs)

    def port(self, index: int) -> Port:
        if index < len(self.inputs):
            return self.inputs[index]
        if self.inputs and self.inputs[-1].variadic:
            return self.inputs[-1]
        raise IndexError(index)

    def with_defaults(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # Called for every node by every inference: the defaults are gathered once (a schema's
        # attributes do not change after it is declared).
        defaults = self.__dict__.get("_defaults")
        if defaults is None:
            defaults = {k: a.default for k, a in self.attrs.items() if a.default is not None}
            self.__dict__["_defaults"] = defaults
        out = dict(defaults)
        out.update(attrs)
        return out

    def attr(self, node: Node, name: str) -> Any:
        """The node's attribute ``name``, or the schema's default when the node does not set it."""
        if name in node.attrs:
            return node.attrs[name]
        return self.attrs[name].default


class Registry:
    """Schemas by name; registering a name twice is a bug and raises.

    ``defined_in`` names the modules whose import registers the schemas. They are imported on
    the first lookup, so a command that never looks up an op of a domain does not define them:
    `check` reads no core op, and defining them was 4% of its instructions (311 -> 300 M).
    """

    def __init__(self, domain: str, defined_in: tuple[str, ...] = ()):
        self.domain = domain
        self._schemas: dict[str, OpSchema] = {}
        self._undefined = defined_in  # modules not imported yet

    def register(self, schema: OpSchema) -> OpSchema:
        if schema.domain != self.domain:
            raise ValueError(f"schema {schema.name} has domain {schema.domain}, not {self.domain}")
        if schema.name in self._schemas:
            raise ValueError(f"op {schema.name!r} is registered twice in domain {self.domain!r}")
        self._schemas[schema.name] = schema
        return schema

    def _defined(self) -> dict[str, OpSchema]:
        if self._undefined:
            modules, self._undefined = self._undefined, ()
            try:
                for module in modules:
                    importlib.import_module(module)
            except BaseException:
                self._undefined = modules  # a definition that fails fails every lookup
                raise
        return self._schemas

    # Lookups run per node and pass: a name already registered is found without a look at
    # what is left to define.
    def get(self, name: str) -> OpSchema | None:
        schema = self._schemas.get(name)
        if schema is None and self._undefined:
            schema = self._defined().get(name)
        return schema

    def __getitem__(self, name: str) -> OpSchema:
        schema = self._schemas.get(name)
        if schema is None:
            schema = self._defined()[name]
        return schema

    def __contains__(self, name: str) -> bool:
        return name in self._schemas or name in self._defined()

    def names(self) -> list[str]:
        return sorted(self._defined())

    def all(self) -> list[OpSchema]:
        schemas = self._defined()
        return [schemas[n] for n in sorted(schemas)]


DIALECT_OPS = Registry("nhwc", defined_in=tuple(
    f"nhwc_onnx.schemas.{family}" for family in ("dialect_conv", "dialect_elementwise",
                                                   "dialect_pool", "dialect_tensor")))
CORE_OPS = Registry("core", defined_in=("nhwc_onnx.schemas.core",))


def attr(node: Node, name: str) -> Any:
    """A node's attribute ``name``, or the default its op's schema declares (core or dialect).

    An attribute its schema does not declare raises KeyError: a misspelt name is a bug."""
    registry = CORE_OPS if node.domain == CORE_OPS.domain else DIALECT_OPS
    return registry[node.op].attr(node, name)


def check_attr_value(name: str, spec: Attr, value: Any) -> str | None:
    """Return why ``value`` does not fit ``spec``, or None when it fits."""
    kind = spec.kind
    ok = True
    if kind is AttrKind.INT:
        ok = is_int(value)
    elif kind is AttrKind.FLOAT:
        ok = is_number(value)
    elif kind is AttrKind.STRING:
        ok = isinstance(value, str)
    elif kind is AttrKind.INTS:
        ok = isinstance(value, (list, tuple)) and all(is_int(x) for x in value)
    elif kind is AttrKind.FLOATS:
        ok = isinstance(value, (list, tuple)) and all(
            is_number(x) or isinstance(x, bool) for x in value)  # bools pass, as they always did
    elif kind is AttrKind.STRINGS:
        ok = isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value)
    elif kind is AttrKind.TENSOR:
        ok = isinstance(value, (np.ndarray, DeferredArray))
    if not ok:
        return f"attribute '{name}' must be of kind {kind.value}, found {_describe(value)}"
    if spec.allowed is not None:
        items = value if kind in (AttrKind.INTS, AttrKind.FLOATS, AttrKind.STRINGS) else [value]
        bad = [x for x in items if x not in spec.allowed]
        if bad:
            allowed = ", ".join(repr(a) for a in spec.allowed)
            return f"attribute '{name}' has value {value!r}; allowed: {allowed}"
    return None


def is_int(value: Any) -> bool:
    """A Python or numpy integer, not a bool."""
    return (isinstance(value, int) and not isinstance(value, bool)) \
        or isinstance(value, np.integer)


def is_number(value: Any) -> bool:
    """A Python or numpy integer or float, not a bool."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) \
        or isinstance(value, (np.integer, np.floating))


def _describe(value: Any) -> str:
    if isinstance(value, (np.ndarray, DeferredArray)):
        return f"tensor {value.dtype}{list(value.shape)}"
    if isinstance(value, (list, tuple)):
        kinds = sorted({type(x).__name__ for x in value})
        return f"list of {'/'.join(kinds) or 'nothing'} {list(value)!r}"
    return f"{type(value).__name__} {value!r}"


# -- shape arithmetic shared by dialect and core schemas ----------------------------------------


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def same_tf(i: int, k: int, s: int, d: int = 1) -> tuple[int, int, int]:
    """TF SAME: (output size, pad at begin, pad at end). The odd pixel goes at the end."""
    e = (k - 1) * d + 1
    o = ceil_div(i, s)
    total = max((o - 1) * s + e - i, 0)
    return o, total // 2, total - total // 2


def valid_tf(i: int, k: int, s: int, d: int = 1) -> int:
    """TF VALID output size (may be <= 0 when the kernel does not fit)."""
    e = (k - 1) * d + 1
    return ceil_div(i - e + 1, s)


def conv_transpose_axis(size: int, kernel: int, stride: int, dilation: int, out_pad: int,
                        pad_begin: int, pad_end: int, auto_pad: str,
                        output_size: int | None = None) -> tuple[int, int, int]:
    """ConvTranspose along one axis (the core op's rule): (output size, crop at begin, crop at
    end). The output is the window [begin, begin + output size) of the full transposed
    convolution, (size-1)*stride + effective kernel + out_pad long; a negative end crop means
    zero-fill at the end."""
    full = (size - 1) * stride + (kernel - 1) * dilation + 1 + out_pad
    if output_size is not None:
        target = output_size
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = size * stride
    elif auto_pad == "VALID":
        target = full
    else:
        return full - pad_begin - pad_end, pad_begin, pad_end
    if auto_pad == "VALID":
        return target, 0, full - target
    total = max(full - target, 0)
    begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
    return target, begin, full - target - begin


def conv_transpose_tf(
    i: int, k: int, s: int, d: int, out_pad: int, mode: str, out: int | None = None
) -> tuple[int, int, int]:
    """ConvTranspose per docs/design.md (the dialect rules): (output size, crop at begin, crop at
    end). The core rule with TF's SAME (the odd cropped pixel at the end) or VALID.

    A negative end crop means zero-fill at the end (TF SAME with kernel shorter than stride).
    """
    auto_pad = "SAME_UPPER" if mode == "SAME" else "VALID"
    return conv_transpose_axis(i, k, s, d, out_pad, 0, 0, auto_pad, out)
