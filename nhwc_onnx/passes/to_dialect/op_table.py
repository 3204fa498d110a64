"""What converts, declared: for every core op, the dialect op(s) it becomes and when.

One entry per core op (``TABLE``), read by every place that needs to know: op selection and
legalisation run the entry's handlers (``select`` first, then ``legalize``), padding
normalisation takes the windowed ops from it, the up-front scan (``scan.py``) refuses what the
declaration rules out before the passes run, and ``nhwc-onnx ops`` / docs/ops.md derive each
source op's claim from it.

``converts`` is about a node that computes on run-time data. A node whose inputs are all
constants (weights, or values computed from static shapes) is folded into a constant before
any of this matters, whatever its op.

- ``ALWAYS``: every such node converts (``condition`` is empty).
- ``WHEN``: it converts when ``condition`` (in words) holds; ``refuted(node, runtime)``, when
  given, returns the reason the condition is false already on the core graph (``runtime(v)``:
  v is computed from run-time data), else None (not decided there).
- ``NEVER``: no dialect form; ``condition`` is the reason.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ...ir import Node, Value
from . import activation_idioms, legalize, legalize_tensor, select_ops, select_spatial
from . import padding_math as pm
from .legalize_pool import dilated_max_pool

ALWAYS, WHEN, NEVER = "always", "when", "never"

Handler = Callable  # handler(graph, node, ctx) -> bool: True when it rewrote the node
Refuted = Callable[[Node, Callable[[Value], bool]], "str | None"]


class Lowering(NamedTuple):
    converts: str
    dialect_ops: tuple[str, ...]  # what the node may become (empty: removed or folded)
    condition: str = ""
    select: Handler | None = None
    legalize: Handler | None = None
    window: str | None = None  # padding_math kind: padding normalisation decides its pads
    refuted: Refuted | None = None


_REDUCE_MAX = ("it does not reduce the batch axis of a symbolic batch: H and W of a 4-D map "
               "as a global pool, other axes as a MaxPool over each run of adjacent reduced "
               "axes (the same bytes reshaped, a 1-wide window)")


_MIXES_AXES = ("it keeps its meaning on the stored layout: in a channels-first source (its maps "
               "stored NHWC) one that mixes a map's channel axis with its spatial axes "
               "converts only where the stored bytes allow it (a channel shuffle, size-1 axes) "
               "or where it feeds weight products (Dense, Gemm, MatMul) whose constant weights "
               "absorb the order; else it needs a layout Transpose (--allow-transpose)")


# -- conditions the scan can decide on the core graph ------------------------------------------


def _input_at_run_time(index: int, reason: str) -> Refuted:
    def refuted(node: Node, runtime) -> str | None:
        v = node.input(index)
        return reason if v is not None and runtime(v) else None

    return refuted


def _rank_below(rank: int, reason: str) -> Refuted:
    def refuted(node: Node, runtime) -> str | None:
        x = node.input(0)
        return reason if x is not None and x.rank is not None and x.rank < rank else None

    return refuted


def _rank_not(rank: int, reason: str) -> Refuted:
    def refuted(node: Node, runtime) -> str | None:
        x = node.input(0)
        return reason if x is not None and x.rank is not None and x.rank != rank else None

    return refuted


def _cast_changes_type(node: Node, runtime) -> str | None:
    x, to = node.input(0), str(node.attrs.get("to"))
    assert x is not None  # Cast's one input is required
    if to != "float32" or (x.dtype not in (None, "float32")):
        return f"cast from {x.dtype or 'a run-time value'} to {to}: the dialect computes " \
               "in float32 only"
    return None


def _any_weight_at_run_time(node: Node, runtime) -> str | None:
    if any(runtime(v) for v in node.inputs[1:] if v is not None):
        return "its weights or bias are computed at run time, not constants"
    return None


def _negative_step(node: Node, runtime) -> str | None:
    steps = [int(s) for s in (node.attrs.get("steps") or [])]
    if any(s < 1 for s in steps):
        return f"steps {steps}: only positive steps (on the H and W axes of a 4-D map) have " \
               "a dialect form"
    return None


def _not_an_idiom_test(node: Node, runtime) -> str | None:
    """Where: only Where(x > 0, ...) idioms convert."""
    test = node.input(0)
    producer = test.producer() if test is not None else None
    if producer is None or producer.op != "Greater":
        return "the condition is not a test x > 0 of an ELU or leaky-ReLU idiom"
    return None


def _read_by_no_where(node: Node, runtime) -> str | None:
    """Greater: only the x > 0 test of a Where idiom converts (absorbed into it)."""
    if not all(user.op == "Where" and index == 0 for user, index in node.output.uses()):
        return "a comparison computed at run time has no dialect form (only the x > 0 test " \
               "of an ELU or leaky-ReLU Where idiom converts)"
    return None


def _no_product_form(node: Node, runtime) -> str | None:
    """Pow: a run-time exponent, or a constant one other than 1, 2 or 3."""
    if runtime(node.input(1)):
        return "the exponent is computed at run time: no dialect op raises to a tensor's power"
    found = legalize.pow_exponent(node)
    return found if isinstance(found, str) else None


def _not_exp_minus_one(node: Node, runtime) -> str | None:
    """Exp: only inside alpha * (Exp(x) - 1) of an ELU idiom."""
    if not all(user.op in ("Sub", "Add") and index == 0 for user, index in node.output.uses()):
        return "no dialect op computes exp (only alpha * (exp(x) - 1) of an ELU idiom " \
               "converts)"
    return None


# -- the table ------------------------------------------------------------------------------------

_BROADCAST = ("every input has the output's shape or broadcasts to it exactly: a tensor "
              "along its size-1 axes, a per-channel or single-value constant, or any other "
              "constant of at most 16 MB once broadcast")
_FOLDED = "its inputs are constant or computed from static shapes (it is folded into a constant)"
_FLOAT_ONLY = "the dialect computes in float32 only"


def _never(reason: str) -> Lowering:
    return Lowering(NEVER, (), reason)


def _unary(op: str) -> Lowering:
    return Lowering(ALWAYS, (op,), select=select_ops.unary)


TABLE: dict[str, Lowering] = {
    # activations
    **{op: _unary(op) for op in ("Relu", "Sigmoid", "Tanh", "Abs", "Elu", "LeakyRelu")},
    "Clip": Lowering(ALWAYS, ("Relu6", "Relu", "Max", "Scale", "Reshape"),
                     select=select_ops.clip, legalize=legalize.clip),
    "HardSigmoid": Lowering(ALWAYS, ("BatchNormalization", "Relu", "Scale", "Max", "Reshape"),
                            legalize=legalize.hard_sigmoid),
    "HardSwish": Lowering(WHEN, ("BatchNormalization", "Relu", "Scale", "Max", "Mul"),
                          "the input has rank 2 or more (a channel axis)",
                          legalize=legalize.hard_swish,
                          refuted=_rank_below(2, "the input has rank below 2 (no channel axis)")),
    "PRelu": Lowering(WHEN, ("PRelu", "Relu", "Scale", "Mul", "Add"), "the slope is constant",
                      select=select_ops.prelu, legalize=legalize.prelu,
                      refuted=_input_at_run_time(1, "the slope is computed at run time")),
    "Softmax": Lowering(WHEN, ("Softmax", "Transpose"),
                        "it normalises the last axis with more than one element (after the "
                        "NHWC layout); --allow-transpose moves another axis last",
                        select=select_ops.softmax),
    "Where": Lowering(WHEN, ("Elu", "LeakyRelu"),
                      "it is an ELU or leaky-ReLU idiom: Where(x > 0, x or Elu(x), alpha * x, "
                      "alpha * Elu(x) or alpha * (Exp(x) - 1))",
                      select=activation_idioms.where, refuted=_not_an_idiom_test),
    "Greater": Lowering(WHEN, ("Elu", "LeakyRelu"),
                        "it is the x > 0 test of an ELU or leaky-ReLU Where idiom",
                        refuted=_read_by_no_where),
    "Exp": Lowering(WHEN, ("Elu",), "it is the exp(x) - 1 of an ELU Where idiom",
                    refuted=_not_exp_minus_one),
    # arithmetic
    "Add": Lowering(WHEN, ("Add", "AddBias", "BatchNormalization", "PRelu", "UpSampling2D",
                           "Reshape"), _BROADCAST, select=select_ops.add, legalize=legalize.arith),
    "Mul": Lowering(WHEN, ("Mul", "Scale", "BatchNormalization", "UpSampling2D", "Reshape"),
                    _BROADCAST, select=select_ops.add_mul, legalize=legalize.arith),
    "Sub": Lowering(WHEN, ("Add", "Scale", "AddBias", "BatchNormalization", "UpSampling2D",
                           "Reshape"), _BROADCAST, legalize=legalize.sub),
    "Div": Lowering(WHEN, ("Mul", "Scale", "BatchNormalization", "UpSampling2D", "Reshape"),
                    "the divisor is constant (x * (1/c): exact for powers of two, else within "
                    "one rounding, refused by --strict)", legalize=legalize.div,
                    refuted=_input_at_run_time(1, "division by a tensor computed at run time "
                                                  "has no dialect form")),
    "Neg": Lowering(ALWAYS, ("Scale",), legalize=legalize.neg),
    "Square": Lowering(ALWAYS, ("Mul",), legalize=legalize.square),
    "Pow": Lowering(WHEN, ("Mul", "Reshape", "UpSampling2D"),
                    "the exponent is a constant 1, 2 or 3 (x, x*x, x*x*x; the cube within 2 "
                    "float32 ulps, refused by --strict); 0.5, negative and other exponents have "
                    "no dialect form", legalize=legalize.power, refuted=_no_product_form),
    "SquaredDifference": Lowering(WHEN, ("Add", "Scale", "Mul", "UpSampling2D", "Reshape"),
                                  _BROADCAST, legalize=legalize.squared_difference),
    "Min": Lowering(ALWAYS, ("Relu6", "Max", "Scale"), select=select_ops.min_op,
                    legalize=legalize.min_op),
    "Max": Lowering(ALWAYS, ("Max", "LeakyRelu", "Relu6"), select=select_ops.max_op),
    "Sum": Lowering(WHEN, ("Sum", "UpSampling2D", "Reshape"), _BROADCAST,
                    select=select_ops.sum_op, legalize=legalize.sum_op),
    "Mean": Lowering(WHEN, ("Sum", "Scale", "UpSampling2D", "Reshape"), _BROADCAST + " (x * "
                     "(1/n): exact for n a power of two, else refused by --strict)",
                     legalize=legalize.mean),
    "MatMul": Lowering(WHEN, ("Dense", "Conv", "MatMul", "Reshape"),
                       "both operands are computed (MatMul), or a constant 2-D second operand "
                       "multiplies a 2-D first operand (Dense) or each position of a rank >= 3 "
                       "one (a 1x1 Conv; also when the rank >= 3 tensor is flattened to 2-D "
                       "for the product and reshaped back, as TensorFlow's Tensordot does)",
                       select=select_ops.matmul),
    "Gemm": Lowering(ALWAYS, ("Dense", "Conv", "Gemm"), select=select_ops.gemm),
    # spatial
    "Conv": Lowering(WHEN, ("Conv", "DepthwiseConv2d", "AddBias", "Pad"),
                     "a 2-D convolution of a 4-D map with constant weights and bias (explicit "
                     "padding becomes SAME or a zero Pad and VALID)", select=select_spatial.conv,
                     window=pm.CONV, refuted=_any_weight_at_run_time),
    "ConvTranspose": Lowering(WHEN, ("ConvTranspose", "Slice"),
                              "a 2-D transposed convolution of a 4-D map with constant weights "
                              "and bias", select=select_spatial.conv_transpose,
                              refuted=_any_weight_at_run_time),
    "MaxPool": Lowering(WHEN, ("MaxPool", "Pad", "Slice", "Concat", "Max"),
                        "a 2-D pool of a 4-D map whose windows have an exact form: SAME or "
                        "VALID, a zero Pad in front on an input >= 0, else border cells "
                        "replicated; a dilated pool as shifted Slices and Max (padding only "
                        "on an input >= 0)", select=select_spatial.pool,
                        legalize=dilated_max_pool, window=pm.MAX),
    "AveragePool": Lowering(WHEN, ("AveragePool", "Pad", "Mul"),
                            "a 2-D pool of a 4-D map without dilation whose windows read the "
                            "same cells as a SAME or VALID pool (another divisor is corrected "
                            "by a constant ratio map per sample, refused by --strict and with "
                            "a symbolic batch)",
                            select=select_spatial.pool, window=pm.AVG),
    "GlobalAveragePool": Lowering(WHEN, ("GlobalAveragePool",), "the input is a 4-D map",
                                  select=select_spatial.global_pool,
                                  refuted=_rank_not(4, "the input is not a 4-D map")),
    "GlobalMaxPool": Lowering(WHEN, ("GlobalMaxPool",), "the input is a 4-D map",
                              select=select_spatial.global_pool,
                              refuted=_rank_not(4, "the input is not a 4-D map")),
    "BatchNormalization": Lowering(WHEN, ("BatchNormalization", "Conv", "DepthwiseConv2d",
                                          "Dense", "ConvTranspose", "AddBias", "Transpose"),
                                   "scale, bias, mean and variance are constant and it "
                                   "normalises the channel axis (folded into the convolution "
                                   "or Dense before it when it can be)",
                                   select=select_ops.batchnorm, refuted=_any_weight_at_run_time),
    "Resize": Lowering(WHEN, ("UpSampling2D",),
                       "every axis grows by an integer factor and the result equals "
                       "UpSampling2D: nearest neighbours that read the same source cells, or "
                       "bilinear with half_pixel / pytorch_half_pixel coordinates on H and W",
                       legalize=legalize_tensor.resize),
    "SpaceToDepth": Lowering(ALWAYS, ("SpaceToDepth",), select=select_ops.space_to_depth),
    "DepthToSpace": Lowering(ALWAYS, ("Reshape", "Transpose"),
                             legalize=legalize_tensor.depth_to_space),
    # tensors
    "Identity": Lowering(ALWAYS, (), select=select_ops.bypass),
    "Dropout": Lowering(ALWAYS, (), select=select_ops.bypass),
    "Flatten": Lowering(WHEN, ("Flatten", "Reshape"), _MIXES_AXES,
                        select=select_ops.flatten),
    "Reshape": Lowering(WHEN, ("Reshape",), _MIXES_AXES, select=select_ops.reshape_to_output),
    "Unsqueeze": Lowering(ALWAYS, ("Reshape",), select=select_ops.reshape_to_output),
    "Squeeze": Lowering(ALWAYS, ("Squeeze",), select=select_ops.squeeze),
    "Transpose": Lowering(ALWAYS, ("Transpose",), select=select_ops.transpose),
    "Concat": Lowering(ALWAYS, ("Concat",), select=select_ops.concat),
    "Split": Lowering(ALWAYS, ("Slice",), legalize=legalize_tensor.split),
    "Slice": Lowering(WHEN, ("Slice", "MaxPool", "Reshape"),
                      "steps are 1, or positive on the H and W axes of a 4-D map (a 1x1 "
                      "MaxPool with that stride)", select=select_ops.slice_op,
                      refuted=_negative_step),
    "Pad": Lowering(WHEN, ("Pad", "Slice", "Concat", "Reshape"),
                    "zero padding (negative pads crop); other constant values, edge, reflect "
                    "and symmetric padding when no pad is negative and mirrored cells exist",
                    select=select_ops.pad, legalize=legalize_tensor.pad),
    "Tile": Lowering(WHEN, ("Concat", "Reshape"), "the repeats are constant",
                     legalize=legalize_tensor.tile,
                     refuted=_input_at_run_time(1, "the repeats are computed at run time")),
    "Expand": Lowering(WHEN, ("UpSampling2D", "Reshape"),
                       "the input is a tensor, or a constant of at most 16 MB once expanded",
                       legalize=legalize_tensor.expand),
    "Gather": Lowering(WHEN, ("Slice", "Concat", "Reshape"),
                       "the indices are a constant scalar or 1-D list",
                       legalize=legalize_tensor.gather,
                       refuted=_input_at_run_time(1, "the indices are computed at run time")),
    "Cast": Lowering(WHEN, (), "it casts float32 to float32 (no change)", select=select_ops.cast,
                     refuted=_cast_changes_type),
    "ReduceMean": Lowering(ALWAYS, ("ReduceMean", "Reshape"), select=select_ops.reduce_mean),
    "ReduceSum": Lowering(ALWAYS, ("ReduceMean", "Scale", "Reshape"),
                          legalize=legalize_tensor.reduce),
    "ReduceMax": Lowering(WHEN, ("GlobalMaxPool", "MaxPool", "Reshape"), _REDUCE_MAX,
                          legalize=legalize_tensor.reduce),
    "ReduceMin": Lowering(WHEN, ("GlobalMaxPool", "MaxPool", "Scale", "Reshape"),
                          f"{_REDUCE_MAX} (of -x)", legalize=legalize_tensor.reduce),
    # shape computations: folded once shapes are static
    "Shape": Lowering(ALWAYS, ()),
    "Size": Lowering(ALWAYS, ()),
    "ConstantOfShape": Lowering(WHEN, (), _FOLDED),
    "Range": Lowering(WHEN, (), _FOLDED),
    # no dialect form for a node computing on run-time data
    "Sqrt": _never("no dialect op computes a square root"),
    "Rsqrt": _never("no dialect op computes 1 / sqrt(x)"),
    "Reciprocal": _never("1 / x of a tensor computed at run time has no dialect form"),
    "Log": _never("no dialect op computes a logarithm"),
    "LogSoftmax": _never("no dialect op computes a logarithm"),
    "Softplus": _never("no dialect op computes log(1 + exp(x))"),
    "Erf": _never("no dialect op computes the error function"),
    "ReduceProd": _never("no dialect op multiplies along an axis"),
    **{op: _never("no dialect op rounds to integers") for op in ("Floor", "Ceil", "Round")},
    "Sign": _never("no dialect op computes the sign"),
    **{op: _never(f"a comparison or logical result (bool): {_FLOAT_ONLY}")
       for op in ("Equal", "Less", "And", "Or", "Not")},
    "ArgMax": _never(f"the result holds int64 indices: {_FLOAT_ONLY}"),
}


def handlers(stage: str) -> dict[str, Handler]:
    """op -> handler of one stage ("select" or "legalize")."""
    return {op: getattr(entry, stage) for op, entry in TABLE.items()
            if getattr(entry, stage) is not None}


def windowed_ops() -> dict[str, str]:
    """op -> padding_math window kind, for padding normalisation."""
    return {op: entry.window for op, entry in TABLE.items() if entry.window is not None}


def pass_through_ops() -> frozenset[str]:
    """Ops removed by the clean-up (they pass their input through)."""
    return frozenset(op for op, entry in TABLE.items() if entry.select is select_ops.bypass)


def default_reason(op: str) -> str:
    """Why a node of ``op`` left unconverted cannot be (when no pass said more)."""
    entry = TABLE.get(op)
    if entry is None:
        return f"core op '{op}' has no exact equivalent in the dialect"
    if entry.converts == NEVER:
        return entry.condition
    if entry.converts == WHEN:
        return f"converts only when {entry.condition}"
    return "no exact dialect rewrite for these shapes"


__all__ = ["ALWAYS", "NEVER", "TABLE", "WHEN", "Lowering", "default_reason", "handlers",
           "pass_through_ops", "windowed_ops"]
