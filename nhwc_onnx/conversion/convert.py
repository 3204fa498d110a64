"""``convert``: one source to one dialect model, in named stages.

``read`` the source through its frontend (an open batch at the first probe size), ``convert``
it through the passes (and, for a symbolic batch, prove it per sample at the second probe
size), ``record`` what was done in the report and the model's metadata, ``prove`` it when the
caller asks (``before_write``: ``--verify``) and ``write`` it atomically. A refusal leaves
through ``explain_refusal``, which adds the exact cut.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__, frameworks
from ..errors import InvalidModelError, UnsupportedOpError, UsageError
from ..ir import Model
from ..ir.io_names import name_graph_io
from ..ir.metadata import (
    CONVERTER,
    KEY_BATCH,
    KEY_CONVERTER,
    KEY_CONVERTER_VERSION,
    KEY_OPTIONS,
    KEY_REQUESTED_OUTPUTS,
    KEY_SOURCE_FILE,
    KEY_SOURCE_FRAMEWORK,
    KEY_SOURCE_NAMES,
)
from ..options import ConvertOptions, path_argument
from .report import ConversionReport, ConversionResult
from .source_info import describe_value, source_op_counts

DEFAULT_SIGNATURE = ConvertOptions().signature


def _log():
    # imported here, not at the top: ``check`` imports the API and logs nothing
    import logging

    return logging.getLogger("nhwc_onnx.convert")


@dataclass
class _Conversion:
    """One conversion's facts, as the stages hand them on."""

    src: Path
    output: str | os.PathLike | None
    options: ConvertOptions
    fw: frameworks.Framework
    report: ConversionReport
    stage: Callable[[str], None]
    follow_symlinks: bool
    started: float = field(default_factory=time.perf_counter)
    model: Model | None = None
    ctx: Any = None
    manager: Any = None
    source_names: dict[str, str] = field(default_factory=dict)


def convert(
    source: str | os.PathLike,
    output: str | os.PathLike | None = None,
    options: ConvertOptions | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    before_write: Callable[..., bool] | None = None,  # (model, report), or (pipeline)
    follow_symlinks: bool = True,
    split: bool = False,
) -> ConversionResult:
    """Convert ``source`` to the dialect with ``options``; write ``output`` (atomically) when
    given.

    With ``split`` a refused source becomes a ``nhwc_onnx.pipeline.Pipeline`` (returned):
    dialect segments and standard ONNX segments for the refused nodes; ``output`` is then
    the pipeline's folder and ``before_write(pipeline)`` is asked before it is written.

    Raises a subclass of NhwcOnnxError when the model cannot be converted exactly; nothing is
    written in that case. With ``options.exact_cut`` a refusal (UnsupportedOpError) carries the
    checked exact cut in ``.exact_cut`` (see ``nhwc_onnx.conversion.cut``) and its message ends
    with it. ``progress(stage)`` is called as each stage starts: load, passes, cut, write,
    done. ``before_write(model, report)`` is asked once the model is complete; when it returns
    False nothing is written and ``.output`` is None (``--verify``: a model that does not
    compute the source's numbers is not written). A symlink at ``output`` is written through
    to its target; with ``follow_symlinks=False`` (an output name derived by a batch) the link
    is replaced.
    """
    if split:
        return _convert_split(source, output, checked_options(options), before_write)
    job = _start(source, output, options, progress or (lambda _name: None), follow_symlinks)
    try:
        symbols = read(job)
        convert_read(job, symbols)
    except UnsupportedOpError as exc:
        explain_refusal(job, exc)
        raise
    assert job.model is not None  # read() made it
    record(job)
    written = job.output is not None and (before_write is None
                                          or before_write(job.model, job.report))
    if written:
        write(job)
    else:
        job.report.output = None
    job.report.timings["total"] = time.perf_counter() - job.started
    _log().info("done: %.3f s in all", job.report.timings["total"])
    job.stage("done")
    return ConversionResult(job.model, job.report, str(job.output) if written else None)


def _convert_split(source, output, options: ConvertOptions, before_write):
    """``convert(..., split=True)``: the pipeline, its folder written when ``output`` is
    given and ``before_write`` (if any) accepts it."""
    from ..files.writes import plan_targets
    from ..pipeline import MANIFEST
    from ..pipeline import split as split_source

    src = Path(path_argument(source, "source", "the path of a source model"))
    fw = frameworks.of(options, src)
    check_options_apply(fw, src, options)
    inputs = source_files(src, options)
    if output is not None:
        output = Path(path_argument(output, "output", "the folder of the pipeline to write"))
        plan_targets([("pipeline folder", output / MANIFEST)], inputs)

    def convert_part(part_options: ConvertOptions, path: Path = src):
        result = convert(path, options=part_options.replace(
            framework=part_options.framework if path != src else fw.name))
        return result.model, result.report

    pipeline = split_source(src, fw, options, convert_part)
    if output is not None and (before_write is None or before_write(pipeline)):
        pipeline.save(output, source_files=inputs)
    return pipeline


def _start(source, output, options, stage, follow_symlinks: bool) -> _Conversion:
    """The arguments checked, the framework known and the output path cleared for writing."""
    from ..files.writes import plan_targets

    options = checked_options(options)
    src = Path(path_argument(source, "source", "the path of a source model"))
    if output is not None:
        output = path_argument(output, "output", "the path of the .onnx file to write")
    fw = frameworks.of(options, src)
    check_options_apply(fw, src, options)
    if output is not None:
        plan_targets([("output", Path(output))], source_files(src, options),
                     follow_symlinks=follow_symlinks)
    report = ConversionReport(source=str(src), framework=fw.name,
                              output=str(output) if output else None)
    report.options = options.to_report()
    return _Conversion(src, output, options, fw, report, stage, follow_symlinks)


def read(job: _Conversion) -> dict[str, str]:
    """The source in core ops; returns the graph inputs whose batch is open (input -> name)."""
    from . import symbolic_batch

    job.stage("load")
    # The frontend keeps going past refused nodes so the passes judge the rest: one error
    # then lists the refusals of every stage. An open batch takes the probe size.
    job.model = model = frameworks.load_source(
        job.src, job.fw, symbolic_batch.probing(job.options.running(keep_going=True)))
    name_graph_io(model, job.options.rename)
    seconds = job.report.timings["load"] = time.perf_counter() - job.started
    _log().info("load %s (%s): %.3f s", job.src, job.fw.name, seconds)
    job.report.source_ops = source_op_counts(model)
    _log().debug("loaded %d core nodes from %d source nodes", len(model.graph),
                 sum(job.report.source_ops.values()))
    job.source_names = {v.name: v.meta.get("source_name", v.name)
                        for v in model.graph.inputs + model.graph.outputs}
    return symbolic_batch.probed_inputs(model)


def convert_read(job: _Conversion, symbols: dict[str, str]) -> None:
    """The passes to a validated dialect model; a symbolic batch is proven and written back."""
    from ..passes import PassContext
    from ..passes.pipeline import to_dialect
    from . import symbolic_batch

    assert job.model is not None  # read() made it
    job.stage("passes")
    began = time.perf_counter()
    try:
        # A symbolic batch's warnings are logged once it is named (symbolic_batch.finish)
        job.manager, job.ctx = to_dialect(job.model, PassContext(options=job.options,
                                                                 log_warnings=not symbols))
    except (InvalidModelError, UnsupportedOpError) as exc:
        if not symbols:
            raise
        raise symbolic_batch.explain_failure(exc, symbols, job.src, job.fw, job.options,
                                             try_fixed=job.options.exact_cut) from None
    if symbols:  # a symbolic batch: the second probe conversion, then one model
        probe = time.perf_counter()
        job.report.batch = symbolic_batch.finish(job.model, job.ctx, job.src, job.fw,
                                                 job.options, symbols)
        job.report.timings["symbolic_batch"] = time.perf_counter() - probe
    job.report.timings["passes"] = time.perf_counter() - began
    _log().info("passes and validation: %.3f s, %d dialect nodes",
                job.report.timings["passes"], len(job.model.graph))


def explain_refusal(job: _Conversion, exc: UnsupportedOpError) -> None:
    """A refusal says what would help: a dialect file needs no conversion; otherwise the
    exact cut is computed (unless the refusal is about the batch, whose remedy is --batch)."""
    if is_dialect_file(job.src):  # checked only here: free when it converts
        raise InvalidModelError(
            f"{job.src}: already an nhwc dialect model (written by nhwc-onnx), so there is "
            "nothing to convert; check, info and run read it as it is, and lower writes "
            "it as standard ONNX") from None
    if job.options.exact_cut and not _about_the_batch(exc):
        job.stage("cut")
        _attach_exact_cut(exc, job.src, job.options.replace(framework=job.fw.name))


def record(job: _Conversion) -> None:
    """What the conversion did, in the report and in the model's metadata."""
    model, report, ctx = job.model, job.report, job.ctx
    assert model is not None  # read() made it
    report.target_ops = model.graph.op_counts()
    report.decisions = [d.to_dict() for d in ctx.decisions]
    report.warnings = list(ctx.warnings)
    report.io_permutations = dict(model.io_permutations)
    report.passes = [asdict(s) for s in job.manager.stats]
    report.inputs = [describe_value(v) for v in model.graph.inputs]
    report.outputs = [describe_value(v) for v in model.graph.outputs]
    model.metadata.update({
        KEY_CONVERTER: CONVERTER,
        KEY_CONVERTER_VERSION: __version__,
        KEY_SOURCE_FRAMEWORK: job.fw.name,
        KEY_SOURCE_FILE: job.src.name,
        KEY_OPTIONS: json.dumps(report.options, sort_keys=True),
    })
    if report.batch is not None:
        model.metadata[KEY_BATCH] = json.dumps(report.batch, sort_keys=True)
    kept = {v.name for v in model.graph.inputs + model.graph.outputs}
    renamed = {k: v for k, v in job.source_names.items() if k in kept and k != v}
    if renamed:
        model.metadata[KEY_SOURCE_NAMES] = json.dumps(renamed, sort_keys=True)
    if job.options.outputs:
        # A cut (or any chosen outputs): say where each output comes from and its layout.
        model.metadata[KEY_REQUESTED_OUTPUTS] = json.dumps([
            {"name": v.name, "source_name": job.source_names.get(v.name, v.name),
             "permutation": model.io_permutations.get(v.name)} for v in model.graph.outputs
        ], sort_keys=True)


def write(job: _Conversion) -> None:
    from ..serialize import save

    job.stage("write")
    began = time.perf_counter()
    save(job.model, job.output, domain=job.options.domain,
         weights_as_constants=job.options.weights_as_constants,
         follow_symlinks=job.follow_symlinks)
    job.report.timings["write"] = time.perf_counter() - began
    _log().info("write %s: %.3f s", job.output, job.report.timings["write"])


def checked_options(options: ConvertOptions | None) -> ConvertOptions:
    if options is None:
        return ConvertOptions()
    if not isinstance(options, ConvertOptions):
        raise TypeError(f"options: expected a ConvertOptions, got {type(options).__name__}")
    return options


def source_files(source: str | os.PathLike, options: ConvertOptions) -> list[Path]:
    """The files (or SavedModel folder) a conversion reads: never a place to write."""
    weights = options.weights
    return [Path(source)] + ([Path(weights)] if weights not in (None, "random") else [])


def check_options_apply(fw: frameworks.Framework, source: Path, options: ConvertOptions
                        ) -> None:
    """A UsageError for an option the source would not read (--weights of an ONNX model,
    --signature of a .pb): silently ignoring it would hide the user's mistake."""
    unread = frameworks.unread_options(fw, source, weights=options.weights is not None,
                                       signature=options.signature != DEFAULT_SIGNATURE)
    if unread:
        raise UsageError(f"{source}: " + "; ".join(unread))


def is_dialect_file(path: str | os.PathLike) -> bool:
    """True when an .onnx file is one of ours (dialect domain or our converter metadata)."""
    from ..files.onnx_wire import read_structure

    proto = read_structure(path)
    if proto is None:
        return False
    if any(p.key == KEY_CONVERTER and p.value == CONVERTER for p in proto.metadata_props):
        return True
    return any(n.domain == "nhwc" for n in proto.graph.node)


def _about_the_batch(exc: UnsupportedOpError) -> bool:
    """A refusal for mixing a symbolic batch with other axes: its remedy is --batch N, not a
    cut of the graph."""
    return bool(exc.problems) and all(p.rule == "batch" for p in exc.problems)


def _attach_exact_cut(exc: UnsupportedOpError, src: Path, options: ConvertOptions) -> None:
    """Compute the checked exact cut of a refused conversion; end the message with it."""
    from .cut import ExactCut, suggest

    def try_convert(cut_options: ConvertOptions) -> None:
        # without --rename: an output it names may not be one of the cut's (names change no
        # number, so the cut converts or not the same)
        convert(src, options=cut_options.replace(exact_cut=False, rename={}))

    try:
        assert options.framework is not None  # explain_refusal passes the one detected
        cut = suggest(str(src), options.framework, options, exc, try_convert)
    except Exception as failure:  # noqa: BLE001 - the refusal stays the error, whatever happens
        cut = ExactCut([], 0, 0, [p.node for p in exc.problems],
                       f"computing it failed ({type(failure).__name__}: {failure})")
    exc.exact_cut = cut
    split_line = _split_estimate(exc, src, options)
    exc.args = ("\n".join([str(exc), *([split_line] if split_line else []), cut.line()]),)


def _split_estimate(exc: UnsupportedOpError, src: Path, options: ConvertOptions) -> str:
    """How ``--split`` would cut a refused source, in one line ('' when the source cannot be
    read for it, or the frontend itself refuses nodes: no split then)."""
    from ..pipeline import through_core
    from ..pipeline.partition import estimate

    try:
        if options.framework == "onnx":
            return estimate(str(src), options, exc)
        return through_core.estimate(src, frameworks.get(str(options.framework)), options, exc)
    except Exception:  # noqa: BLE001 - the refusal stays the error, whatever happens here
        return ""


class VerifyBeforeWrite:
    """A ``before_write`` for convert(): the finished model is verified against ``source`` on
    ``feeds`` (as ``verify`` takes them) and inputs seeded by ``options.seed`` (its verdict
    stays in ``.report``); a mismatch is not written. ``started()`` is called as verification
    starts (a progress line)."""

    def __init__(self, source, options: ConvertOptions, *, atol: float, rtol: float,
                 bisect: bool = False, layers: bool = False, samples: int = 1,
                 feeds: Mapping[str, Any] | None = None,
                 started: Callable[[], None] | None = None):
        self.source, self.options, self.started = source, options, started
        self.settings: dict[str, Any] = {
            "atol": atol, "rtol": rtol, "bisect": bisect, "layers": layers,
            "samples": samples, "feeds": feeds}
        self.report: Any = None  # the VerificationReport, once verified

    def __call__(self, model: Model, report: ConversionReport) -> bool:
        from .. import verification

        if self.started is not None:
            self.started()
        self.report = verification.verify(
            self.source, model, self.options.replace(framework=report.framework),
            **self.settings)
        return self.report.ok
