"""Converting a source whose batch is symbolic: two probe conversions, one model.

A source that leaves axis 0 of a graph input open (ONNX ``dim_param`` or no value, TensorFlow
-1 / None, ``--input-shape NAME=-1,...``) and is converted without ``--batch`` keeps its batch
symbolic. The frontends and passes work on static shapes, so the source is converted with the
batch at ``PROBES[0]`` and, when some input took it, again at ``PROBES[1]``;
``symbolic_batch_proof`` then checks the two conversions are one per-sample graph and
writes the batch as a name. Equal results at both sizes prove nothing of a number computed
from the batch's size (``min(N, 5)`` is 5 at both): such numbers are tracked while they fold
(``schemas.batch_values``), and the nodes both conversions find reading one where the
dialect cannot write the batch are refused. A source with a fixed batch is converted once, exactly
as before (the probe size never enters it), so its output and time do not change.

Only the first conversion speaks: its warnings, decisions and errors are the ones reported,
with the probe size written as the batch's name; the second runs quietly.
"""
from __future__ import annotations

import logging
from typing import Any

from .. import frameworks
from ..errors import NhwcOnnxError, NodeProblem, UnsupportedOpError
from ..ir import Model
from ..ir.input_shapes import PROBES, probing  # noqa: F401  (probing: this module's API)
from ..ir.io_names import name_graph_io
from ..options import ConvertOptions

log = logging.getLogger("nhwc_onnx.passes")  # where the passes log their warnings


def probed_inputs(model: Model) -> dict[str, str]:
    """Graph input -> the name of its symbolic batch, for the inputs a probe size stands in."""
    return {v.name: v.meta["batch_symbol"] for v in model.graph.inputs
            if "batch_symbol" in v.meta}


def explain_failure(exc: NhwcOnnxError, symbols: dict[str, str], source,
                    framework: frameworks.Framework, options: ConvertOptions,
                    try_fixed: bool) -> NhwcOnnxError:
    """The first conversion's error, said with the batch in mind. With ``try_fixed`` the
    source is converted once more at batch 1: when that converts, the failure is the
    symbolic batch's and the remedy is a fixed batch; when it fails too, a refusal is left as
    it is (the batch has nothing to do with it). Without it an error only says that its
    sizes were read at the probe size."""
    names = ", ".join(f"'{n}'" for n in symbols)
    probe = f"the batch of input(s) {names} is symbolic and was converted as {PROBES[0]}"
    if try_fixed and _converts_at_batch_1(source, framework, options):
        note = f"{probe}; with a fixed batch the model converts: --batch 1 (or its batch size)"
    elif isinstance(exc, UnsupportedOpError):
        return exc
    else:
        note = probe
    if isinstance(exc, UnsupportedOpError):
        hint = f"{exc.hint}; {note}" if exc.hint else note
        noted = UnsupportedOpError(exc.problems, exc.framework, hint=hint)
        noted.__dict__.update({k: v for k, v in vars(exc).items()  # keep_layout_suggestion
                               if k not in ("problems", "framework", "hint")})
        noted.__cause__ = exc.__cause__
        return noted
    exc.args = (f"{exc.args[0] if exc.args else exc} ({note})", *exc.args[1:])
    return exc


def _converts_at_batch_1(source, framework: frameworks.Framework,
                         options: ConvertOptions) -> bool:
    from ..passes import PassContext
    from ..passes.pipeline import to_dialect

    fixed = options.replace(batch=1, exact_cut=False)
    try:
        to_dialect(frameworks.load_source(source, framework, fixed),
                   PassContext(options=fixed, log_warnings=False))
    except NhwcOnnxError:
        return False
    return True


def load_at_second_probe(source, framework: frameworks.Framework,
                         options: ConvertOptions) -> Model:
    """The source read with its open batch at the second probe size, its graph inputs and
    outputs named as the first conversion's."""
    second = frameworks.load_source(source, framework, options.running(batch_probe=PROBES[1]))
    name_graph_io(second, options.rename)
    return second


def finish(model: Model, ctx, source, framework: frameworks.Framework,
           options: ConvertOptions, symbols: dict[str, str], second: Model | None = None
           ) -> dict[str, Any]:
    """Convert ``source`` again at the second probe size (``second``: already read by
    ``load_at_second_probe``) and make ``model`` (the first conversion, ``ctx`` its context)
    symbolic. Returns the report's ``batch`` entry; raises UnsupportedOpError naming every
    node that mixes the batch with other axes."""
    from ..passes import PassContext
    from ..passes.pipeline import to_dialect
    from .symbolic_batch_proof import (
        REMEDY,
        generalize,
        generalize_decisions,
        generalize_text,
    )

    quiet = PassContext(options=options, log_warnings=False)
    try:
        if second is None:
            second = load_at_second_probe(source, framework, options)
        to_dialect(second, quiet)
    except NhwcOnnxError as exc:
        problems = getattr(exc, "problems", None) or [NodeProblem("", "graph", str(exc))]
        raise UnsupportedOpError(
            [NodeProblem(p.node, p.op, "converts at one batch size but not at another: "
                         f"{p.reason}", "batch") for p in problems],
            framework.name, hint=f"the batch is symbolic; {REMEDY}") from None
    # A number computed from the batch's size is refused where both conversions find it
    # (schemas.batch_values): a real dimension equal to one probe size is tagged there only.
    both = {(p.node, p.op) for p in second.batch_findings}
    computed = [p for p in model.batch_findings if (p.node, p.op) in both]
    result = generalize(model, second, symbols)
    if computed or result.problems:
        named = {p.node for p in computed}
        raise UnsupportedOpError(computed + [p for p in result.problems if p.node not in named],
                                 framework.name,
                                 hint="the source's batch is symbolic: every op must then "
                                 "compute each sample alone, and no number may depend on the "
                                 "batch's size")
    ctx.decisions[:] = generalize_decisions(ctx.decisions, quiet.decisions, result.symbol)
    if len(ctx.warnings) == len(quiet.warnings):
        ctx.warnings[:] = [generalize_text(a, b, result.symbol)
                           for a, b in zip(ctx.warnings, quiet.warnings)]
    for message in ctx.warnings:  # the first conversion collected them without logging
        log.debug("warning: %s", message)
    return result.record()
