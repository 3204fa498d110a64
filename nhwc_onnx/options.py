"""The options of one conversion, in one frozen record.

The API (``nhwc_onnx.convert``), the command line, batches, the exact cut, the frontends and
the passes all read a ``ConvertOptions``; the report and the model's metadata record what
``to_report`` makes of it. Every value is checked and normalised once, here, when the record
is made: a mistake is a TypeError or ValueError naming the parameter, before any work.
"""
from __future__ import annotations

import dataclasses
import math
import os
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import frameworks
from .errors import UsageError

DOMAINS = {"nhwc": "nhwc", "": "", "default": ""}  # --domain default: the ONNX default ('')
SYMBOLIC = -1  # an input_shapes entry (axis 0 only) that leaves the batch symbolic


class FrozenMapping(Mapping):
    """A read-only copy of a mapping: an options record shares no mutable state with its
    caller."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping | Iterable = ()):
        self._items = dict(items)

    def __getitem__(self, key):
        return self._items[key]

    def __iter__(self) -> Iterator:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return repr(self._items)

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __reduce__(self):  # pickled for batch workers
        return (type(self), (self._items,))


def _type_error(parameter: str, expected: str, value: Any) -> TypeError:
    return TypeError(f"ConvertOptions({parameter}=...): expected {expected}, got "
                     f"{type(value).__name__} {value!r}")


def _names(value: Any, parameter: str) -> tuple[str, ...] | None:
    """Tensor names: a str is ONE comma-separated list ("a,b"), any other iterable holds one
    name per item (names containing commas can be given that way)."""
    if value is None:
        return None
    if isinstance(value, str):
        return tuple(n for n in (n.strip() for n in value.split(",")) if n) or None
    if isinstance(value, bytes) or not isinstance(value, Iterable):
        raise _type_error(parameter, "a list of tensor names or one comma-separated str", value)
    items = tuple(value)
    for item in items:
        if not isinstance(item, str) or not item:
            raise TypeError(f"ConvertOptions({parameter}=...): every name must be a non-empty "
                            f"str, got {type(item).__name__} {item!r}")
    return items or None


def _count(value: Any, parameter: str, minimum: int) -> int:
    """An int >= ``minimum`` (a numpy integer is one; a bool is not)."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise _type_error(parameter, "an int", value)
    number = value.__index__()
    if number < minimum:
        raise UsageError(f"{number} is not in the range x>={minimum}", param_hint=parameter)
    return number


def _shapes(value: Any) -> FrozenMapping:
    """input_shapes: NAME -> dims (each a positive int), in the source's layout; the first
    may be -1 (or None): the batch stays symbolic (``ir.input_shapes``)."""
    if value is None:
        return FrozenMapping()
    if not isinstance(value, Mapping):
        raise _type_error("input_shapes", "a mapping NAME -> dims such as "
                          "{'input': (1, 224, 224, 3)}", value)
    shapes = {}
    for name, dims in value.items():
        if not isinstance(name, str) or not name:
            raise TypeError("ConvertOptions(input_shapes=...): every key must be a tensor name "
                            f"(str), got {name!r}")
        where = f"input_shapes[{name!r}]"
        if isinstance(dims, (str, bytes)) or not isinstance(dims, Iterable):
            raise _type_error(where, "a sequence of ints", dims)
        dims = tuple(dims)
        shapes[name] = tuple(SYMBOLIC if i == 0 and (d is None or _is_minus_one(d))
                             else _dim(d, where, i) for i, d in enumerate(dims))
    return FrozenMapping(shapes)


def _renames(value: Any) -> FrozenMapping:
    """rename: OLD -> NEW graph input/output names, every NEW distinct."""
    if value is None:
        return FrozenMapping()
    if not isinstance(value, Mapping):
        raise _type_error("rename", "a mapping OLD -> NEW such as {'input': 'img'}", value)
    for old, new in value.items():
        for name in (old, new):
            if not isinstance(name, str) or not name:
                raise TypeError("ConvertOptions(rename=...): every name must be a non-empty "
                                f"str, got {type(name).__name__} {name!r}")
    targets = list(value.values())
    twice = sorted({n for n in targets if targets.count(n) > 1})
    if twice:
        raise UsageError(f"several names renamed to {', '.join(map(repr, twice))}",
                         param_hint="rename")
    return FrozenMapping(value)


def _channel_values(value: Any, where: str, positive: bool) -> tuple[float, ...]:
    """One number or one per channel, each finite (and > 0 for a std)."""
    if isinstance(value, (str, bytes)) or not (isinstance(value, Iterable)
                                               or hasattr(type(value), "__float__")):
        raise _type_error(where, "a number or a sequence of numbers (one per channel)", value)
    try:
        items = list(value) if isinstance(value, Iterable) else [value]
    except TypeError:  # a 0-d array: one number
        items = [value]
    numbers = []
    for item in items:
        if isinstance(item, (bool, str, bytes)) or not hasattr(type(item), "__float__"):
            raise _type_error(where, "numbers", item)
        number = float(item)
        if not math.isfinite(number) or (positive and not number > 0):
            raise UsageError(f"{number:g} is not {'a number > 0' if positive else 'finite'}",
                             param_hint=where)
        _check_float32(number, where, positive)
        numbers.append(number)
    if not numbers:
        raise UsageError("no value given (one value, or one per channel)", param_hint=where)
    return tuple(numbers)


def _as_float32(number: float) -> float | None:
    """``number`` rounded to float32, None when that is not finite."""
    try:
        single = struct.unpack("f", struct.pack("f", number))[0]
    except OverflowError:
        return None
    return single if math.isfinite(single) else None


def _check_float32(number: float, where: str, divisor: bool) -> None:
    """The model computes in float32: a mean must stay finite there, and a std (its model
    multiplies by 1/std) must stay non-zero with a finite reciprocal."""
    single = _as_float32(number)
    if single is None:
        raise UsageError(f"{number:g} is not finite in float32 (largest: 3.4e38)",
                         param_hint=where)
    if divisor and (single == 0 or _as_float32(1 / single) is None):
        raise UsageError(f"{number:g}: 1/{number:g} is not finite in float32 (a std must be at "
                         "least about 2.94e-39)", param_hint=where)


def _per_input(value: Any, parameter: str, positive: bool = False) -> FrozenMapping:
    """mean / std: values for the model's one image input, or a mapping NAME -> values; the
    key '' stands for "the image input" (there must be exactly one)."""
    if value is None:
        return FrozenMapping()
    if isinstance(value, Mapping):
        result = {}
        for name, values in value.items():
            if not isinstance(name, str):
                raise TypeError(f"ConvertOptions({parameter}=...): every key must be an input "
                                f"name (str), got {name!r}")
            result[name] = _channel_values(values, f"{parameter}[{name!r}]" if name
                                           else parameter, positive)
        return FrozenMapping(result)
    return FrozenMapping({"": _channel_values(value, parameter, positive)})


def _reversed_inputs(value: Any) -> tuple[str, ...]:
    """reverse_channels: True (the model's one image input, key ''), or input names."""
    if value is None or value is False:
        return ()
    if value is True:
        return ("",)
    if isinstance(value, str):
        return _names(value, "reverse_channels") or ()
    if isinstance(value, bytes) or not isinstance(value, Iterable):
        raise _type_error("reverse_channels", "True or input names", value)
    items = tuple(dict.fromkeys(value))
    for item in items:  # '' (the image input) may be listed, as the command line does
        if not isinstance(item, str):
            raise TypeError("ConvertOptions(reverse_channels=...): every name must be a str, "
                            f"got {type(item).__name__} {item!r}")
    return items


def path_argument(value: Any, parameter: str, what: str = "a path") -> str:
    """A path parameter of the public API (str or os.PathLike) as a str; a TypeError naming
    ``parameter`` otherwise, before the value reaches os or numpy."""
    if isinstance(value, bytes) or not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{parameter}: expected {what} (str or os.PathLike), got "
                        f"{type(value).__name__} {value!r:.60}")
    return os.fspath(value)
def _is_minus_one(value: Any) -> bool:
    return not isinstance(value, bool) and hasattr(type(value), "__index__") \
        and value.__index__() == SYMBOLIC


def _dim(value: Any, where: str, axis: int) -> int:
    if axis > 0 and (value is None or _is_minus_one(value)):
        raise UsageError(f"dimension {axis} must be given: every dimension must be positive "
                         "(the first may be -1, a symbolic batch)", param_hint=where)
    return _count(value, where, 1)


def _flag(value: Any, parameter: str) -> None:
    if not isinstance(value, bool):
        raise _type_error(parameter, "True or False", value)


@dataclass(frozen=True)
class RunState:
    """What one run tells the frontends beside the user's options; nhwc-onnx sets it
    (``ConvertOptions.running``), nothing records it.

    ``keep_going``: convert what converts and return the model with ``model.refused`` (a
    stand-in per source node not converted) instead of raising, so the pass pipeline lists
    every stage's refusals in one error (``convert`` and ``info`` set it). ``batch_probe``: the
    size an open batch takes in one of the two probe conversions (``conversion.symbolic_batch``).
    ``constant_inputs``: ONNX graph inputs given a constant value (name -> array), as test
    suites feed weights, shapes and scales.
    """

    keep_going: bool = False
    batch_probe: int | None = None
    constant_inputs: Mapping[str, Any] = field(default_factory=FrozenMapping, compare=False)

    def __post_init__(self) -> None:
        _flag(self.keep_going, "keep_going")
        if self.batch_probe is not None:
            object.__setattr__(self, "batch_probe",
                               _count(self.batch_probe, "batch_probe", 1))
        if not isinstance(self.constant_inputs, Mapping):
            raise _type_error("constant_inputs", "a mapping NAME -> array",
                              self.constant_inputs)
        object.__setattr__(self, "constant_inputs", FrozenMapping(self.constant_inputs))


@dataclass(frozen=True)
class ConvertOptions:
    """Everything a conversion can be told. Made once (by the caller, the command line or a
    batch), read by every part; ``replace`` makes a changed copy (checked again).

    Names (``inputs``, ``outputs``, ``keep_layout``) are a list of names or ONE
    comma-separated str (``"a,b"``, as on the command line), never a str read as its
    characters.
    """

    framework: str | None = None  # tf | caffe | onnx (default: from the source's name)
    inputs: tuple[str, ...] | None = None  # graph input tensors (TF: "name" or "name:0")
    outputs: tuple[str, ...] | None = None  # graph output tensors (a cut of the graph)
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=FrozenMapping)
    batch: int | None = None  # axis 0 of every graph input (None: as the source declares)
    weights: str | None = None  # Caffe: the .caffemodel, or "random"
    seed: int = 0  # seed of --weights random and of verification inputs
    signature: str = "serving_default"  # TF SavedModel signature
    domain: str = "nhwc"  # operator-set domain of dialect ops: "nhwc" or "" (ONNX's default)
    weights_as_constants: bool = False  # weights as Constant nodes, not initializers
    allow_transpose: bool = False  # a layout Transpose where NCHW semantics need one
    strict: bool = False  # refuse rounding-level rewrites too (docs/rounding.md)
    keep_layout: tuple[str, ...] = ()  # graph inputs/outputs kept in the source's axis order
    exact_cut: bool = True  # a refusal carries the checked exact cut (nhwc_onnx.conversion.cut)
    # Graph input/output names: OLD -> NEW (applied to the names the model gets by default).
    rename: Mapping[str, str] = field(default_factory=FrozenMapping)
    # Preprocessing embedded in the model (nhwc_onnx.passes.preprocess): the input then takes
    # raw pixels x and the source sees ((x, channels reversed if asked) - mean) / std. Keyed by
    # input name; '' is the model's one image input. Values in the source's channel order.
    mean: Mapping[str, tuple[float, ...]] = field(default_factory=FrozenMapping)
    std: Mapping[str, tuple[float, ...]] = field(default_factory=FrozenMapping)
    reverse_channels: tuple[str, ...] = ()  # inputs ('' = the image input) read as BGR<->RGB
    # The run's own state (``running``): never given by a caller, never recorded.
    _run: RunState = field(default_factory=RunState, repr=False, compare=False)

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        if self.framework is not None:
            if not isinstance(self.framework, str):
                raise _type_error("framework", "a str", self.framework)
            frameworks.get(self.framework, parameter="framework")
        put("inputs", _names(self.inputs, "inputs"))
        put("outputs", _names(self.outputs, "outputs"))
        put("keep_layout", _names(self.keep_layout, "keep_layout") or ())
        put("input_shapes", _shapes(self.input_shapes))
        if self.batch is not None:
            put("batch", _count(self.batch, "batch", 1))
        if self.batch is not None:
            for name, dims in self.input_shapes.items():
                if dims and dims[0] not in (SYMBOLIC, self.batch):
                    raise UsageError(
                        f"--input-shape {name} gives the batch {dims[0]} but --batch "
                        f"{self.batch} sets it for every input; give one of them (or -1 in "
                        "--input-shape)", param_hint="batch")
        if not isinstance(self._run, RunState):
            raise _type_error("_run", "a RunState", self._run)
        if self.weights is not None:
            if not isinstance(self.weights, (str, os.PathLike)):
                raise _type_error("weights", "a path or 'random'", self.weights)
            put("weights", os.fspath(self.weights) or None)
        put("seed", _count(self.seed, "seed", 0))
        if not isinstance(self.signature, str) or not self.signature:
            raise _type_error("signature", "a signature name", self.signature)
        if self.domain not in DOMAINS:
            raise UsageError(f"expected 'nhwc' or 'default' (''), got {self.domain!r}",
                             param_hint="domain")
        put("domain", DOMAINS[self.domain])
        for name in ("weights_as_constants", "allow_transpose", "strict", "exact_cut"):
            _flag(getattr(self, name), name)
        put("rename", _renames(self.rename))
        put("mean", _per_input(self.mean, "mean"))
        put("std", _per_input(self.std, "std", positive=True))
        put("reverse_channels", _reversed_inputs(self.reverse_channels))

    def replace(self, **changes: Any) -> ConvertOptions:
        """A copy with ``changes`` (checked like the original)."""
        return dataclasses.replace(self, **changes)

    def running(self, **state: Any) -> ConvertOptions:
        """A copy whose run state (``RunState``: keep_going, batch_probe, constant_inputs) has
        ``state`` changed: what nhwc-onnx tells its own stages, apart from the user's options."""
        return dataclasses.replace(self, _run=dataclasses.replace(self._run, **state))

    @property
    def keep_going(self) -> bool:
        return self._run.keep_going

    @property
    def batch_probe(self) -> int | None:
        return self._run.batch_probe

    @property
    def constant_inputs(self) -> Mapping[str, Any]:
        return self._run.constant_inputs

    def to_report(self) -> dict[str, Any]:
        """The options as the report and the model's metadata record them (plain JSON
        values). Defaults that change no conversion are left out, as they always were, so a
        conversion's bytes stay the same from version to version."""
        recorded: dict[str, Any] = {}
        for name in ("inputs", "outputs", "input_shapes", "batch", "weights", "seed",
                     "signature"):
            value = getattr(self, name)
            if value is None or (name in ("inputs", "outputs", "input_shapes") and not value):
                continue
            if name == "input_shapes":
                value = {k: list(v) for k, v in value.items()}
            elif isinstance(value, tuple):
                value = list(value)
            recorded[name] = value
        recorded.update(domain=self.domain, weights_as_constants=self.weights_as_constants,
                        allow_transpose=self.allow_transpose)
        if self.strict:
            recorded["strict"] = True
        if self.keep_layout:
            recorded["keep_layout"] = list(self.keep_layout)
        if self.rename:
            recorded["rename"] = dict(self.rename)
        for name in ("mean", "std"):  # as given: a list for the image input, else by name
            values = getattr(self, name)
            if values:
                recorded[name] = (list(values[""]) if list(values) == [""] else
                                  {k: list(v) for k, v in values.items()})
        if self.reverse_channels:
            recorded["reverse_channels"] = (True if self.reverse_channels == ("",)
                                            else list(self.reverse_channels))
        return recorded
