"""Padding normalisation: every core Conv / MaxPool / AveragePool gets TF SAME or VALID padding.

The source's padding (explicit per-side pads or auto_pad, floor or ceil rounding, whether padded
cells count in an average) is compared window by window with the dialect's forms
(``padding_math``). The node is rewritten to the canonical core form the op selection maps
one-to-one onto the dialect: ``auto_pad`` "SAME_UPPER" (= TF SAME) or "VALID", no pads,
``ceil_mode`` 0, ``count_include_pad`` 0, with an explicit zero core ``Pad`` in front when that
is the exact form (for a MaxPool whose input may be negative, an edge-replicating Pad, which
legalisation writes as Slices + Concat). A zero ``Pad`` feeding a VALID-equivalent Conv is merged
into it when the result is exactly SAME (Keras ZeroPadding2D + valid Conv2D).

An AveragePool that reads the same cells as a dialect form but divides by other counts
(count_include_pad=0 with asymmetric padding, Caffe's clipped ceil windows) becomes that form
times a constant ratio map: a rounding-level rewrite (``rounding``), refused under ``strict``.
Nodes with no form are left unchanged and recorded as refused; legalisation raises one
UnsupportedOpError listing them with every other unconvertible node. ConvTranspose padding is
decided by op selection (its dialect form always exists: SAME, VALID, or VALID then a Slice).
"""
from __future__ import annotations

import numpy as np

from ...ir import CORE, Graph, Node, Value
from ...schemas import batch_values
from ...schemas.base import attr
from ..base import Pass, PassContext, PassResult
from ..rewrite import append_after, const, dims, emit, int_pair, present, refuse, sole_consumer
from . import padding_math as pm
from . import rounding
from .op_table import windowed_ops
from .value_range import is_nonnegative

BATCH_REMEDY = batch_values.REMEDY

_KINDS = windowed_ops()  # op -> window kind, as op_table declares


def analyse_node(node: Node, kind: str) -> tuple[tuple[pm.AxisVerdict, pm.AxisVerdict], str]:
    """Per-axis verdicts of a core windowed node on its (static, NHWC) input."""
    x = dims(node.inputs[0])
    if kind == pm.CONV:
        w = dims(node.inputs[1])
        layout = attr(node, "weight_layout")
        kernel = node.attrs.get("kernel_shape") or (w[2:4] if layout == "OIHW" else w[0:2])
        kernel = [int(k) for k in kernel]
    else:
        kernel = [int(k) for k in node.attrs["kernel_shape"]]
    strides = int_pair(node, "strides", 1)
    dilations = int_pair(node, "dilations", 1)
    pads = [int(p) for p in (node.attrs.get("pads") or [0, 0, 0, 0])]
    auto_pad = attr(node, "auto_pad")
    ceil_mode = kind != pm.CONV and bool(attr(node, "ceil_mode"))
    cip = kind == pm.AVG and bool(attr(node, "count_include_pad"))
    verdicts = []
    for axis in range(2):
        src = pm.resolve_axis(int(x[1 + axis]), kernel[axis], strides[axis], dilations[axis],
                              pads[axis], pads[axis + 2], auto_pad, ceil_mode, cip)
        dialect_dilation = dilations[axis] if kind == pm.CONV else 1
        verdicts.append(pm.analyse_axis(src, kind, dialect_dilation))
    return (verdicts[0], verdicts[1]), _describe(kernel, strides, dilations, pads, auto_pad,
                                                 ceil_mode, cip, x)


def _describe(kernel, strides, dilations, pads, auto_pad, ceil_mode, cip, x) -> str:
    text = (f"input {tuple(x)}, kernel {kernel}, strides {strides}, dilations {dilations}, "
            f"pads {pads}, auto_pad {auto_pad}")
    if ceil_mode:
        text += ", ceil_mode 1"
    if cip:
        text += ", count_include_pad 1"
    return text


class NormalizePadding(Pass):
    name = "normalize_padding"

    def call(self, model, ctx: PassContext) -> PassResult:
        graph = model.graph
        modified = self._merge_zero_pads(graph, ctx)
        for node in graph.nodes:
            if node.domain != CORE or node.op not in _KINDS:
                continue
            if attr(node, "data_format") != "NHWC":
                refuse(ctx, node, "data_format is not NHWC after layout conversion", "padding")
                continue
            if not _static(node.inputs[0]):
                refuse(ctx, node, f"input shape {node.inputs[0].shape} is not static", "padding")
                continue
            before = (dict(node.attrs), node.input(0))
            try:
                why = self._normalize(graph, node, _KINDS[node.op], ctx)
            except pm.WindowTooLarge as exc:
                why = str(exc)
            if why:
                refuse(ctx, node, why, "batch" if why.endswith(BATCH_REMEDY) else "padding")
            elif before != (node.attrs, node.input(0)):
                modified = True
        return PassResult(modified)

    def _normalize(self, graph: Graph, node: Node, kind: str, ctx: PassContext) -> str | None:
        verdicts, desc = analyse_node(node, kind)
        decision = pm.decide(verdicts, kind, node.attrs.get("auto_pad") == "VALID")
        if decision.mode not in ("SAME", "VALID"):
            decision = self._whole_axes(node, verdicts, kind) or decision
        approximate = ""
        # A MaxPool reading padded cells: zeros are exact only on a non-negative input; else
        # replicate the border cells (edge padding, legalised as Slice + Concat): a contiguous
        # window that reads a padded cell also reads the real border cell it copies, so the
        # copy never changes the window's maximum.
        edge = (decision.mode == "PAD" and decision.needs_nonnegative
                and not is_nonnegative(present(node.inputs[0])))
        if edge:
            decision = pm.PaddingDecision(
                "PAD", decision.pads, False, "edge-replicating Pad then VALID: every window "
                "that reads a padded cell also reads the border cell it copies")
        if decision.mode is None:
            exact_reason = decision.reason
            decision, approximate = self._approximation(verdicts, kind, decision)
            if decision.mode is None:
                return f"{desc}: {exact_reason}"
            if rounding.strict(ctx):
                return f"{desc}: {exact_reason}; {rounding.refusal('average_divisor_ratio')}"
        if approximate and kind == pm.AVG and batch_values.probe_size(graph) is not None:
            return (f"{desc}: {exact_reason}; the divisor would be corrected by multiplying "
                    "each output position by a constant ratio, and the dialect's Mul does not "
                    "broadcast: the ratio map is one constant per sample, which a symbolic "
                    f"batch cannot have; {BATCH_REMEDY}")
        self._apply(graph, node, decision, "edge" if edge else "constant")
        if approximate and kind == pm.AVG:
            ratio = self._divisor_ratio(verdicts, decision)
            factor = const(graph, ratio[None, :, :, None], f"{node.name}/divisor_ratio")
            append_after(graph, node, "Mul", [factor], None, "divisor_fix", domain=CORE)
        detail = f"{node.op} -> {decision.mode if decision.mode != 'PAD' else 'Pad+VALID'}"
        if edge:
            detail = f"{node.op} -> edge Pad+VALID"
        ctx.record("padding", node.name, f"{detail}: {decision.reason}; {desc}",
                   choice=decision.mode, pads=list(decision.pads), approximate=bool(approximate))
        if approximate:
            rounding.record(ctx, node, "average_divisor_ratio", approximate)
        return None

    @staticmethod
    def _whole_axes(node: Node, verdicts, kind: str) -> pm.PaddingDecision | None:
        """A pool whose single window covers a whole axis: VALID with kernel = that axis."""
        whole = [pm.whole_axis(v.source, kind) for v in verdicts]
        if not any(whole) or not all(w or v.valid for v, w in zip(verdicts, whole)):
            return None
        kernel = [int(k) for k in node.attrs["kernel_shape"]]
        strides = int_pair(node, "strides", 1)
        for axis, w in enumerate(whole):
            if w:
                kernel[axis], strides[axis] = verdicts[axis].source.size, 1
        node.attrs["kernel_shape"], node.attrs["strides"] = kernel, strides
        node.attrs.pop("dilations", None)
        return pm.PaddingDecision("VALID", reason=f"the window covers whole axes {whole}: "
                                  f"VALID with kernel {kernel}")

    @staticmethod
    def _approximation(verdicts, kind, refused: pm.PaddingDecision):
        """AveragePool reading the same cells but dividing by other counts: that form, then a
        multiply by the per-position count ratio (a few float32 roundings off the source)."""
        if kind != pm.AVG:
            return refused, ""
        cells = tuple(pm.analyse_axis(v.source, pm.MAX) for v in verdicts)
        decision = pm.decide(cells, pm.MAX)  # same cells; zeros add nothing to a sum
        if decision.mode is None:
            return refused, ""
        decision = pm.PaddingDecision(decision.mode, decision.pads, False,
                                      "same cells, divisor corrected by a constant ratio map")
        return decision, ("outputs whose divisor differs are rescaled by a constant "
                          "(dialect count / source count)")

    @staticmethod
    def _divisor_ratio(verdicts, decision: pm.PaddingDecision) -> np.ndarray:
        """(oH, oW): dialect divisor / source divisor at every output position."""
        factors = []
        assert decision.mode is not None  # a decided form
        for axis, v in enumerate(verdicts):
            if decision.mode == "PAD":
                form = pm.AxisForm("PAD", decision.pads[2 * axis], decision.pads[2 * axis + 1])
            else:
                form = pm.AxisForm(decision.mode)
            ours = pm.dialect_windows(v.source, form, 1).divisor.astype(np.float64)
            theirs = pm.source_windows(v.source, pm.AVG).divisor.astype(np.float64)
            factors.append(ours / theirs)
        return np.outer(factors[0], factors[1])

    @staticmethod
    def _apply(graph: Graph, node: Node, decision: pm.PaddingDecision,
               pad_mode: str = "constant") -> None:
        if decision.mode == "PAD":
            hb, he, wb, we = decision.pads
            x = node.inputs[0]
            n, h, w, c = dims(x)
            padded = emit(graph, "Pad", [x], {"pads": [0, hb, wb, 0, 0, he, we, 0],
                                              "mode": pad_mode, "value": 0.0},
                          f"{node.name}/pad", (n, h + hb + he, w + wb + we, c), domain=CORE)
            node.set_input(0, padded)
        node.attrs["auto_pad"] = "SAME_UPPER" if decision.mode == "SAME" else "VALID"
        node.attrs.pop("pads", None)
        node.attrs.pop("ceil_mode", None)
        node.attrs.pop("count_include_pad", None)

    def _merge_zero_pads(self, graph: Graph, ctx: PassContext) -> bool:
        """Zero Pad (H and W only) -> Conv: fold into the conv's pads when that gives SAME."""
        modified = False
        for pad in graph.nodes:
            if pad.domain != CORE or pad.op != "Pad" or pad.graph is None:
                continue
            conv = sole_consumer(graph, pad.output)
            hw = _zero_hw_pads(pad)
            if conv is None or hw is None or conv.op != "Conv" or conv.domain != CORE:
                continue
            if conv.input(0) is not pad.output or not _static(present(pad.inputs[0])):
                continue
            if conv.attrs.get("data_format") != "NHWC" or not _plain_explicit(conv):
                continue
            saved = dict(conv.attrs)
            own = [int(p) for p in (conv.attrs.get("pads") or [0, 0, 0, 0])]
            conv.attrs["pads"] = [own[0] + hw[0], own[1] + hw[1], own[2] + hw[2], own[3] + hw[3]]
            conv.attrs["auto_pad"] = "NOTSET"
            conv.set_input(0, pad.inputs[0])
            try:
                verdicts, desc = analyse_node(conv, pm.CONV)
                merged = pm.decide(verdicts, pm.CONV).mode == "SAME"
            except pm.WindowTooLarge:
                merged = False  # the conv itself is refused by the main loop
            if not merged:
                conv.attrs = saved
                conv.set_input(0, pad.output)
                continue
            graph.remove_node(pad)
            ctx.record("padding", conv.name, f"zero Pad '{pad.name}' merged: Conv -> SAME; "
                       f"{desc}", choice="SAME", merged_pad=pad.name)
            modified = True
        return modified


def _static(value: Value) -> bool:
    return value.static and value.rank == 4


def _plain_explicit(conv: Node) -> bool:
    return attr(conv, "auto_pad") in ("NOTSET", "VALID") and (
        attr(conv, "auto_pad") == "NOTSET" or not any(conv.attrs.get("pads") or []))


def _zero_hw_pads(pad: Node) -> list[int] | None:
    """[h_begin, w_begin, h_end, w_end] of a constant-zero Pad touching only H and W (NHWC)."""
    pads = [int(p) for p in pad.attrs.get("pads", [])]
    if attr(pad, "mode") != "constant" or float(attr(pad, "value")) != 0:
        return None
    if len(pads) != 8 or any(p < 0 for p in pads):
        return None
    if pads[0] or pads[3] or pads[4] or pads[7]:
        return None
    return [pads[1], pads[2], pads[5], pads[6]]
