"""The fuzzer's oracle for refusals: the ``ops`` table (``nhwc_onnx.support.claims``) and, for each
``when`` claim the generators exercise, a predicate that decides the claim's condition on a
generated node.

The table stays the one home of what converts: a predicate is written for one condition text and
pinned to it (``CONDITIONS``); when the table's text changes, ``test_condition_predicates_pin_
the_table_text`` fails until the predicate is re-read against the new text. A generator records
for each node it makes the facts the predicate reads (``Made.facts``).

A refused node is explained when its claim is ``never``, or ``when`` with the predicate false
for it. Anything else refused (an ``always`` op, a ``when`` op inside its condition, a node of
no claim) is a false refusal or a false claim; so is a ``never`` op on run-time data that
converts.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from nhwc_onnx.passes.to_dialect.op_table import ALWAYS, NEVER, WHEN
from nhwc_onnx.support.claims import frontend_registry, support_of


@dataclass
class Made:
    """A node the generator made: its source op and what the condition predicate reads."""

    op: str
    facts: dict = field(default_factory=dict)


def _broadcast_exact(f: dict) -> bool:
    return f.get("broadcast", "same") in ("same", "size1", "per-channel", "scalar", "full", "const")


def _resize_reads_upsampling_cells(f: dict) -> bool:
    """Resize/Upsample: integer growth on every axis and the cells UpSampling2D reads (nearest:
    out // factor; bilinear: half-pixel centres)."""
    factors = f["factors"]
    if any(s != int(s) or s < 1 for s in factors) or any(s != 1 for s in factors[:2]):
        return False
    mode, coord = f["mode"], f.get("coord", "asymmetric")
    if mode == "linear":
        return coord in ("half_pixel", "pytorch_half_pixel") or all(s == 1 for s in factors)
    if mode != "nearest":
        return False
    for size, s in zip(f["in_hw"], factors[2:]):
        out = np.arange(int(size * s))
        if not np.array_equal(nearest_source_cells(out, s, size, coord, f.get("nearest")),
                              out // int(s)):
            return False
    return True


def nearest_source_cells(out, scale, size, coord, nearest_mode) -> np.ndarray:
    """The input cell ONNX Resize(nearest) reads for each output cell (onnx reference rule)."""
    out_size = int(size * scale)
    if coord == "half_pixel":
        x = (out + 0.5) / scale - 0.5
    elif coord == "pytorch_half_pixel":
        x = (out + 0.5) / scale - 0.5 if out_size > 1 else np.zeros_like(out, dtype=float)
    elif coord == "align_corners":
        x = out * (size - 1) / (out_size - 1) if out_size > 1 else np.zeros_like(out, float)
    elif coord == "tf_half_pixel_for_nn":
        x = (out + 0.5) / scale
    else:  # asymmetric
        x = out / scale
    nearest_mode = nearest_mode or "round_prefer_floor"
    if nearest_mode == "floor":
        idx = np.floor(x)
    elif nearest_mode == "ceil":
        idx = np.ceil(x)
    elif nearest_mode == "round_prefer_ceil":
        idx = np.floor(x + 0.5)
    else:
        idx = np.ceil(x - 0.5)
    return np.clip(idx, 0, size - 1).astype(int)


def _max_pool_exact(f: dict) -> bool:
    if f.get("indices_used") or f.get("rank", 4) != 4 or f.get("valid_partial"):
        return False
    return not (f.get("dilated") and f.get("padded") and not f.get("nonneg"))


def _softmax_last_axis(f: dict) -> bool:
    # opset < 13 normalises all axes from `axis` on (one axis only when it is the last); after
    # the NHWC layout --allow-transpose moves any single axis last.
    return f["single_axis"] and f["axis_size"] > 1


def _reshape_keeps_meaning(f: dict) -> bool:
    """The Reshape (or Flatten) a converter emits around its op (a 1-D pool or convolution as
    2-D, opset < 13 Softmax's 2-D coercion) keeps its meaning on the stored layout: in place
    where the stored bytes allow it, else through the layout Transpose that --allow-transpose
    permits; the oracle converts with --allow-transpose, so the clause always holds there."""
    return f.get("allow_transpose", True)


def _keeps_a_symbolic_batch(f: dict) -> bool:
    """ReduceMax/Min: any axes but the batch axis of a symbolic batch."""
    return not (0 in f["axes"] and f["symbolic_batch"])


# The table's clause for a Reshape or Flatten that mixes a map's channel axis with its spatial axes.
_MIXES_AXES = ("it keeps its meaning on the stored layout: in a channels-first source (its maps "
               "stored NHWC) one that mixes a map's channel axis with its spatial axes converts "
               "only where the stored bytes allow it (a channel shuffle, size-1 axes) or where "
               "it feeds weight products (Dense, Gemm, MatMul) whose constant weights absorb the "
               "order; else it needs a layout Transpose (--allow-transpose)")

# (framework, op) -> (the table's condition text the predicate was written for, predicate)
CONDITIONS: dict[tuple[str, str], tuple[str, Callable[[dict], bool]]] = {}


def _pin(framework: str, op: str, text: str, predicate: Callable[[dict], bool]) -> None:
    CONDITIONS[(framework, op)] = (text, predicate)


_BROADCAST = ("every input has the output's shape or broadcasts to it exactly: a tensor along "
              "its size-1 axes, a per-channel or single-value constant, or any other constant "
              "of at most 16 MB once broadcast")
_RESIZE = ("every axis grows by an integer factor and the result equals UpSampling2D: nearest "
           "neighbours that read the same source cells, or bilinear with half_pixel / "
           "pytorch_half_pixel coordinates on H and W")
for _op in ("Add", "Mul", "Sub", "Sum"):
    _pin("onnx", _op, _BROADCAST, _broadcast_exact)
_pin("onnx", "Mean", _BROADCAST + " (x * (1/n): exact for n a power of two, else refused by "
     "--strict)", _broadcast_exact)
_VALID_CEIL = "auto_pad VALID only with ceil_mode 0 or whole windows; "
_pin("onnx", "AveragePool", "dilations are 1; " + _VALID_CEIL + "a 2-D pool of a 4-D map "
     "without dilation whose windows read the same cells as a SAME or VALID pool (another "
     "divisor is corrected by a constant ratio map per sample, refused by --strict and with a "
     "symbolic batch); Reshape: " + _MIXES_AXES,
     # the ratio map under a symbolic batch is a [batch] refusal: the oracle holds it to
     # the symbolic-batch note (it converts with --batch 3, oracle.judge)
     lambda f: not f.get("dilated") and f.get("rank", 4) == 4 and not f.get("valid_partial")
     and _reshape_keeps_meaning(f))
_pin("onnx", "BatchNormalization", "inference: training_mode 0, the statistics outputs unused; "
     "scale, bias, mean and variance are constant and it normalises the channel axis (folded "
     "into the convolution or Dense before it when it can be)", lambda f: True)
_pin("onnx", "Cast", "it casts float32 to float32 (no change)", lambda f: f["to"] == "float32")
_pin("onnx", "Clip", "the bounds are constant (attributes before opset 11; inputs given by "
     "initializers or computed from static shapes after)", lambda f: f["bounds_constant"])
_pin("onnx", "Conv", "a 2-D convolution of a 4-D map with constant weights and bias (explicit "
     "padding becomes SAME or a zero Pad and VALID); Reshape: " + _MIXES_AXES,
     lambda f: f.get("rank", 4) == 4 and _reshape_keeps_meaning(f))
_pin("onnx", "ConvTranspose", "2-D; an output_shape needs no zero-filling before the output "
     "(with SAME_UPPER: is not larger than the full output); a 2-D transposed convolution of "
     "a 4-D map with constant weights and bias", lambda f: f.get("rank", 4) == 4)
_pin("onnx", "Div", "the divisor is constant (x * (1/c): exact for powers of two, else within "
     "one rounding, refused by --strict)", lambda f: f["divisor_constant"])
_pin("onnx", "Dropout", "inference: training_mode absent or a constant false, the mask output "
     "unused", lambda f: True)
_pin("onnx", "Exp", "it is the exp(x) - 1 of an ELU Where idiom", lambda f: f.get("idiom"))
_pin("onnx", "Greater", "it is the x > 0 test of an ELU or leaky-ReLU Where idiom",
     lambda f: f.get("idiom"))
_pin("onnx", "Where", "it is an ELU or leaky-ReLU idiom: Where(x > 0, x or Elu(x), alpha * x, "
     "alpha * Elu(x) or alpha * (Exp(x) - 1))", lambda f: f.get("idiom"))
_pin("onnx", "Expand", "the input is a tensor, or a constant of at most 16 MB once expanded",
     lambda f: True)
_pin("onnx", "Gather", "the indices are a constant scalar or 1-D list", lambda f: True)
for _framework, _ops in (("onnx", ("Flatten", "Reshape")), ("tf", ("Reshape",)),
                         ("caffe", ("Reshape",))):
    for _op in _ops:
        _pin(_framework, _op, _MIXES_AXES, _reshape_keeps_meaning)
# Caffe's Flatten is written with a Flatten or a Reshape: the clause once per core op
_pin("caffe", "Flatten", _MIXES_AXES + "; Reshape: " + _MIXES_AXES, _reshape_keeps_meaning)
_pin("onnx", "GlobalAveragePool", "the input is a 4-D map", lambda f: f["rank"] == 4)
_pin("onnx", "GlobalMaxPool", "the input is a 4-D map", lambda f: f["rank"] == 4)
_pin("onnx", "HardSwish", "the input has rank 2 or more (a channel axis)",
     lambda f: f["rank"] >= 2)
_pin("onnx", "MatMul", "both operands are computed (MatMul), or a constant 2-D second operand "
     "multiplies a 2-D first operand (Dense) or each position of a rank >= 3 one (a 1x1 Conv; "
     "also when the rank >= 3 tensor is flattened to 2-D for the product and reshaped back, as "
     "TensorFlow's Tensordot does)",
     lambda f: not f["weight_constant"] or (f["weight_rank"] == 2 and f["rank"] >= 2))
_pin("onnx", "MaxPool", "the Indices output is unused; " + _VALID_CEIL + "a 2-D pool of a "
     "4-D map whose windows have an exact form: SAME or VALID, a zero Pad in front on an input "
     ">= 0, else border cells replicated; a dilated pool as shifted Slices and Max (padding only "
     "on an input >= 0); Reshape: " + _MIXES_AXES,
     lambda f: _max_pool_exact(f) and _reshape_keeps_meaning(f))
_pin("onnx", "PRelu", "the slope is constant", lambda f: True)
_pin("onnx", "Pad", "pads are non-negative, mode constant, reflect or edge; zero padding "
     "(negative pads crop); other constant values, edge, reflect and symmetric padding when no "
     "pad is negative and mirrored cells exist", lambda f: f["mirrored_cells_exist"])
_pin("onnx", "Pow", "the exponent is a constant 1, 2 or 3 (x, x*x, x*x*x; the cube within 2 "
     "float32 ulps, refused by --strict); 0.5, negative and other exponents have no dialect "
     "form", lambda f: f["exponent"] in (1, 2, 3))
_REDUCE_MAX = ("it does not reduce the batch axis of a symbolic batch: H and W of a 4-D map as "
               "a global pool, other axes as a MaxPool over each run of adjacent reduced axes "
               "(the same bytes reshaped, a 1-wide window)")
_pin("onnx", "ReduceMax", _REDUCE_MAX, _keeps_a_symbolic_batch)
_pin("onnx", "ReduceMin", _REDUCE_MAX + " (of -x)", _keeps_a_symbolic_batch)
_pin("onnx", "Resize", "mode nearest or linear; " + _RESIZE, _resize_reads_upsampling_cells)
_pin("onnx", "Upsample", "opset 7 or later, mode nearest or linear; Resize: " + _RESIZE,
     _resize_reads_upsampling_cells)
_pin("onnx", "Slice", "steps are 1, or positive on the H and W axes of a 4-D map (a 1x1 "
     "MaxPool with that stride)", lambda f: f["steps_ok"])
_pin("onnx", "Softmax", "it normalises the last axis with more than one element (after the "
     "NHWC layout); --allow-transpose moves another axis last; Flatten: " + _MIXES_AXES
     + "; Reshape: " + _MIXES_AXES,
     lambda f: _softmax_last_axis(f) and _reshape_keeps_meaning(f))
_pin("onnx", "SpaceToDepth", "mode DCR (the only one before opset 25)", lambda f: True)
_pin("onnx", "Tile", "the repeats are constant", lambda f: True)


# The ONNX converter's own part of a condition (before the core op's text from op_table).
ONNX_PREFIX = {"MaxPool": "the Indices output is unused; " + _VALID_CEIL,
               "AveragePool": "dilations are 1; " + _VALID_CEIL,
               "Pad": "pads are non-negative, mode constant, reflect or edge; ",
               "Resize": "mode nearest or linear; ",
               "BatchNormalization": "inference: training_mode 0, the statistics outputs "
                                     "unused; "}


# ... and the clauses of the plumbing it emits (a Reshape of a 1-D form, a 2-D coercion).
_RESHAPE_AFTER = "; Reshape: " + _MIXES_AXES
ONNX_SUFFIX = {"Conv": _RESHAPE_AFTER, "MaxPool": _RESHAPE_AFTER, "AveragePool": _RESHAPE_AFTER,
               "Softmax": "; Flatten: " + _MIXES_AXES + _RESHAPE_AFTER}


def core_condition(onnx_op: str) -> tuple[str, Callable[[dict], bool]]:
    """The core op's condition text (as other frontends quote it) and its predicate."""
    text, predicate = CONDITIONS[("onnx", onnx_op)]
    text = text.removeprefix(ONNX_PREFIX.get(onnx_op, ""))
    return text.removesuffix(ONNX_SUFFIX.get(onnx_op, "")), predicate


def claim_of(framework: str, op: str):
    return support_of(frontend_registry(framework), op)


def explained(framework: str, made: Made | None) -> str | None:
    """Why the table predicts this node's refusal, or None (a refusal it does not explain)."""
    if made is None:
        return None
    claim = claim_of(framework, made.op)
    if claim.converts == NEVER:
        return f"{made.op} is never: {claim.condition}"
    if claim.converts == WHEN:
        pinned = CONDITIONS.get((framework, made.op))
        if pinned is not None and not pinned[1](made.facts):
            return f"{made.op} outside its condition: {claim.condition}"
    return None


def must_refuse(framework: str, made: Made, fixed_batch: bool = False) -> bool:
    """A node the table says is refused: a ``never`` op on run-time data (a value computed
    from the batch size alone is a constant once --batch fixes it)."""
    constant = made.facts.get("constant") or (fixed_batch and made.facts.get("from_batch"))
    return claim_of(framework, made.op).converts == NEVER and not constant


def claim_kind(framework: str, op: str) -> str:
    return claim_of(framework, op).converts


__all__ = ["ALWAYS", "CONDITIONS", "Made", "claim_kind", "claim_of", "explained",
           "must_refuse", "nearest_source_cells"]
