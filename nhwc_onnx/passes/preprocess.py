"""Input preprocessing inside the model (options ``mean``, ``std``, ``reverse_channels``).

The graph input then takes raw pixels ``x`` and the source model sees
``((x with its channel order reversed, if asked) - mean) / std``, mean and std listed in the
channel order the source sees. Exact forms only:

- the reversal is one Slice per channel and a Concat in reverse order (data movement);
- subtracting the mean is ``Add(x, -mean)``, legalised to ``AddBias``: x + (-m) rounds like
  x - m, bit for bit;
- dividing by std is a core ``Div`` that legalisation turns into a multiply by ``1/std``,
  like every ``x / c`` (one home for that rule: a rounding-level rewrite listed in the report
  unless every std is a power of two, refused under ``strict``).

The ops are core ops, so the dialect passes select and legalise them like the source's own.
The pass runs right after the layout pass, on the stored graph inputs: that pass has decided
which inputs are images and stored each of them channels-last (an input the source itself
transposes, as tf2onnx writes it, is recognised there; ops inserted before it would hide the
Transpose), so the channel axis is the last one and the input stays NHWC. No later pass
folds these ops into a neighbour: bias fusion and BatchNorm folding fold an affine only into
the op that *produces* its input (here the graph input or the Concat), never into a following
convolution, whose zero padding would then see ``-mean`` instead of zeros at the border.
"""
from __future__ import annotations

import json

import numpy as np

from ..errors import UsageError
from ..ir import CORE, NHWC, Model, Value
from ..ir.io_names import public_names
from ..ir.metadata import KEY_PREPROCESSING
from .base import Pass, PassContext, PassResult
from .rewrite import const, emit

_FLAGS = {"mean": "--mean", "std": "--std", "reverse_channels": "--reverse-channels"}


class EmbedPreprocessing(Pass):
    name = "preprocess"

    def call(self, model: Model, ctx: PassContext) -> PassResult:
        options = ctx.options
        if not (options.mean or options.std or options.reverse_channels):
            return PassResult(False)
        plan = _plan(model, options)
        recorded = {}
        for v, (mean, std, reverse) in plan.items():
            _insert(model, v, mean, std, reverse)
            step = {"mean": mean.tolist(), "std": std.tolist(), "reverse_channels": reverse}
            recorded[v.name] = step
            ctx.record("preprocessing", v.name, _describe(step), **step)
        model.metadata[KEY_PREPROCESSING] = json.dumps(recorded, sort_keys=True)
        return PassResult(True)


def _describe(step: dict) -> str:
    x = "x with its channels reversed" if step["reverse_channels"] else "x"
    return (f"takes raw pixels x; the source sees ({x} - mean) / std, mean {step['mean']}, "
            f"std {step['std']}")


def _image_inputs(model: Model) -> list[Value]:
    """Graph inputs stored as NHWC images (rank 4): what preprocessing applies to."""
    return [v for v in model.graph.inputs if not v.is_const and v.shape is not None
            and len(v.shape) == 4 and v.layout == NHWC]


def _resolve(model: Model, name: str, flag: str) -> Value:
    """The image input an option names ('' = the model's one image input)."""
    images = _image_inputs(model)
    if name == "":
        if len(images) == 1:
            return images[0]
        if not images:
            raise UsageError("the model has no image input (a rank-4 input stored NHWC); "
                             f"inputs: {_listing(model)}", param_hint=flag)
        raise UsageError(f"the model has {len(images)} image inputs "
                         f"({', '.join(v.name for v in images)}): name the one meant, "
                         f"{flag} NAME=...", param_hint=flag)
    for v in model.graph.inputs:
        if name in public_names(v):
            if v not in images:
                raise UsageError(f"input '{v.name}' is not an image (a rank-4 input stored "
                                 f"NHWC; it is {_shape(v)}{_why_not(v)}): preprocessing applies "
                                 "to image inputs only", param_hint=flag)
            return v
    raise UsageError(f"'{name}' is not a graph input (they are: {_listing(model)})",
                     param_hint=flag)


def _plan(model: Model, options) -> dict[Value, tuple[np.ndarray, np.ndarray, bool]]:
    """Per image input: (mean, std) with one value per channel, and whether to reverse."""
    chosen: dict[str, dict[Value, object]] = {}
    for option in ("mean", "std"):
        chosen[option] = {}
        for name, values in getattr(options, option).items():
            v = _resolve(model, name, _FLAGS[option])
            if v in chosen[option]:
                raise UsageError(f"input '{v.name}' is given twice", param_hint=_FLAGS[option])
            assert v.shape is not None  # an image input (_resolve): rank 4
            channels = int(v.shape[-1])
            if len(values) not in (1, channels):
                raise UsageError(f"{len(values)} values for input '{v.name}', which has "
                                 f"{channels} channels: give one value or {channels}",
                                 param_hint=_FLAGS[option])
            chosen[option][v] = np.broadcast_to(np.asarray(values, np.float64), (channels,))
    reverse = {_resolve(model, name, _FLAGS["reverse_channels"])
               for name in options.reverse_channels}
    plan = {}
    for v in model.graph.inputs:
        if v in chosen["mean"] or v in chosen["std"] or v in reverse:
            if any(out is v for out in model.graph.outputs):
                raise UsageError(f"input '{v.name}' is also a graph output: preprocessing it "
                                 "would change that output", param_hint="--mean")
            assert v.shape is not None  # an image input (_resolve): rank 4
            channels = int(v.shape[-1])
            plan[v] = (np.array(chosen["mean"].get(v, np.zeros(channels))),
                       np.array(chosen["std"].get(v, np.ones(channels))), v in reverse)
    return plan


def _insert(model: Model, v: Value, mean: np.ndarray, std: np.ndarray, reverse: bool) -> None:
    """Put the preprocessing between graph input ``v`` and its readers."""
    graph = model.graph
    readers = v.uses()
    if not readers:
        return
    assert v.shape is not None  # an image input (_resolve): rank 4
    shape = tuple(v.shape)
    channels = int(shape[-1])
    base = f"{v.name}/preprocess"
    x = v
    if reverse and channels > 1:
        pieces = [emit(graph, "Slice", [x], {"starts": [c], "ends": [c + 1], "axes": [3]},
                       f"{base}/channel{c}", shape[:3] + (1,), domain=CORE)
                  for c in reversed(range(channels))]
        x = emit(graph, "Concat", pieces, {"axis": 3}, f"{base}/reverse_channels", shape,
                 domain=CORE)
    if np.any(mean != 0):
        # float32 negation is exact: x + (-m) is x - m bit for bit
        negated = const(graph, -mean.astype(np.float32), f"{base}/negated_mean")
        x = emit(graph, "Add", [x, negated], None, f"{base}/mean", shape, domain=CORE)
    if np.any(std != 1):
        divisor = std.astype(np.float32)
        divisor = divisor[:1] if np.all(divisor == divisor[0]) else divisor
        x = emit(graph, "Div", [x, const(graph, divisor, f"{base}/std_value")], None,
                 f"{base}/std", shape, domain=CORE)
    for node, index in readers:
        node.set_input(index, x)


def _shape(v: Value) -> str:
    """The input's dims; a symbolic batch by its name (``N x 32 x 32 x 3``), never the size
    it is converted at (``symbolic_batch``'s probe)."""
    dims = ["?" if not isinstance(d, int) else str(d) for d in v.shape or ()]
    if dims and "batch_symbol" in v.meta:
        dims[0] = v.meta["batch_symbol"]
    return " x ".join(dims) or "?"


def _why_not(v: Value) -> str:
    if v.shape is not None and len(v.shape) == 4:
        return ", kept in the source's axis order"
    return ""


def _listing(model: Model) -> str:
    return ", ".join(f"{v.name} ({_shape(v)})" for v in model.graph.inputs) or "none"
