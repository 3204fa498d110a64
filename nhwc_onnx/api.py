"""The Python API: ``convert``, ``check``, ``verify`` and ``info`` (``run`` and ``lower``:
``nhwc_onnx.dialect.run_lower``). The command line is a thin shell over these."""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import __version__, frameworks
from .errors import InvalidModelError, UnsupportedOpError, UsageError, ValidationIssue
from .ir import Model
from .ir.io_names import name_graph_io
from .options import ConvertOptions, path_argument
from .files.writes import plan_targets
from .conversion.source_info import describe_source
from .conversion.source_info import describe_value as _describe_value
from .conversion.source_info import source_op_counts as _source_op_counts

DEFAULT_SIGNATURE = ConvertOptions().signature


@dataclass
class ConversionReport:
    """What a conversion did. ``to_dict`` follows docs/report-schema.json."""

    source: str
    framework: str
    output: str | None = None
    converter_version: str = __version__
    options: dict[str, Any] = field(default_factory=dict)
    source_ops: dict[str, int] = field(default_factory=dict)
    target_ops: dict[str, int] = field(default_factory=dict)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    io_permutations: dict[str, list[int]] = field(default_factory=dict)
    # A symbolic batch: {"dim_param", "inputs", "outputs"} (the names that carry it); None
    # when every batch is fixed.
    batch: dict[str, Any] | None = None
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    passes: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def count(self, kind: str) -> int:
        return sum(1 for d in self.decisions if d.get("kind") == kind)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, default=_json_default)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


@dataclass
class ConversionResult:
    model: Model
    report: ConversionReport
    output: str | None = None


def source_files(source: str | os.PathLike, options: ConvertOptions) -> list[Path]:
    """The files (or SavedModel folder) a conversion reads: never a place to write."""
    weights = options.weights
    return [Path(source)] + ([Path(weights)] if weights not in (None, "random") else [])


def convert(
    source: str | os.PathLike,
    output: str | os.PathLike | None = None,
    options: ConvertOptions | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    before_write: Callable[[Model, ConversionReport], bool] | None = None,
    follow_symlinks: bool = True,
) -> ConversionResult:
    """Convert ``source`` to the dialect with ``options``; write ``output`` (atomically) when
    given.

    Raises a subclass of NhwcOnnxError when the model cannot be converted exactly; nothing is
    written in that case. With ``options.exact_cut`` a refusal (UnsupportedOpError) carries the
    checked exact cut in ``.exact_cut`` (see ``nhwc_onnx.conversion.cut``) and its message ends with it.
    ``progress(stage)`` is called as each stage starts: load, passes, cut, write, done.
    ``before_write(model, report)`` is asked once the model is complete; when it returns False
    nothing is written and ``.output`` is None (``--verify``: a model that does not compute the
    source's numbers is not written). A symlink at ``output`` is written through to its target;
    with ``follow_symlinks=False`` (an output name derived by a batch) the link is replaced.
    """
    stage = progress or (lambda _name: None)
    import logging  # here, not at the top: ``check`` imports this module and logs nothing

    log = logging.getLogger("nhwc_onnx.convert")
    from .conversion import symbolic_batch
    from .passes import PassContext
    from .passes.pipeline import to_dialect

    options = _checked(options)
    src = Path(path_argument(source, "source", "the path of a source model"))
    if output is not None:
        output = path_argument(output, "output", "the path of the .onnx file to write")
    fw = frameworks.get(options.framework) if options.framework else frameworks.detect(src)
    check_options_apply(fw, src, options)
    if output is not None:
        plan_targets([("output", Path(output))], source_files(src, options),
                     follow_symlinks=follow_symlinks)
    report = ConversionReport(source=str(src), framework=fw.name,
                              output=str(output) if output else None)
    report.options = options.to_report()
    t0 = time.perf_counter()
    symbols: dict[str, str] = {}
    try:
        stage("load")
        # The frontend keeps going past refused nodes so the passes judge the rest: one
        # error then lists the refusals of every stage. An open batch takes the probe size.
        model = frameworks.load_source(
            src, fw, symbolic_batch.probing(options.replace(keep_going=True)))
        name_graph_io(model, options.rename)
        t1 = time.perf_counter()
        report.timings["load"] = t1 - t0
        log.info("load %s (%s): %.3f s", src, fw.name, t1 - t0)
        report.source_ops = _source_op_counts(model)
        log.debug("loaded %d core nodes from %d source nodes", len(model.graph),
                  sum(report.source_ops.values()))
        source_names = {v.name: v.meta.get("source_name", v.name)
                        for v in model.graph.inputs + model.graph.outputs}
        symbols = symbolic_batch.probed_inputs(model)
        stage("passes")
        try:
            # A symbolic batch's warnings are logged once it is named (symbolic_batch.finish)
            manager, ctx = to_dialect(model, PassContext(options=options,
                                                         log_warnings=not symbols))
        except (InvalidModelError, UnsupportedOpError) as exc:
            if not symbols:
                raise
            raise symbolic_batch.explain_failure(exc, symbols, src, fw, options,
                                                 try_fixed=options.exact_cut) from None
        if symbols:  # a symbolic batch: the second probe conversion, then one model
            t_probe = time.perf_counter()
            report.batch = symbolic_batch.finish(model, ctx, src, fw, options, symbols)
            report.timings["symbolic_batch"] = time.perf_counter() - t_probe
    except UnsupportedOpError as exc:
        if is_dialect_file(src):  # checked only here: free when it converts
            raise InvalidModelError(
                f"{src}: already an nhwc dialect model (written by nhwc-onnx), so there is "
                "nothing to convert; check, info and run read it as it is, and lower writes "
                "it as standard ONNX") from None
        if options.exact_cut and not _about_the_batch(exc):
            stage("cut")
            _attach_exact_cut(exc, src, options.replace(framework=fw.name))
        raise
    t2 = time.perf_counter()
    report.timings["passes"] = t2 - t1
    log.info("passes and validation: %.3f s, %d dialect nodes", t2 - t1, len(model.graph))
    report.target_ops = model.graph.op_counts()
    report.decisions = [d.to_dict() for d in ctx.decisions]
    report.warnings = list(ctx.warnings)
    report.io_permutations = dict(model.io_permutations)
    report.passes = [asdict(s) for s in manager.stats]
    report.inputs = [_describe_value(v) for v in model.graph.inputs]
    report.outputs = [_describe_value(v) for v in model.graph.outputs]
    model.metadata.update({
        "converter": "nhwc-onnx",
        "converter_version": __version__,
        "source_framework": fw.name,
        "source_file": src.name,
        "options": json.dumps(report.options, sort_keys=True),
    })
    if report.batch is not None:
        model.metadata["batch"] = json.dumps(report.batch, sort_keys=True)
    kept = {v.name for v in model.graph.inputs + model.graph.outputs}
    renamed = {k: v for k, v in source_names.items() if k in kept and k != v}
    if renamed:
        model.metadata["source_names"] = json.dumps(renamed, sort_keys=True)
    if options.outputs:
        # A cut (or any chosen outputs): say where each output comes from and its layout.
        model.metadata["requested_outputs"] = json.dumps([
            {"name": v.name, "source_name": source_names.get(v.name, v.name),
             "permutation": model.io_permutations.get(v.name)} for v in model.graph.outputs
        ], sort_keys=True)
    write = output is not None and (before_write is None or before_write(model, report))
    if write:
        from .serialize import save

        stage("write")
        save(model, output, domain=options.domain,
             weights_as_constants=options.weights_as_constants, follow_symlinks=follow_symlinks)
        report.timings["write"] = time.perf_counter() - t2
        log.info("write %s: %.3f s", output, report.timings["write"])
    else:
        report.output = None
    report.timings["total"] = time.perf_counter() - t0
    log.info("done: %.3f s in all", report.timings["total"])
    stage("done")
    return ConversionResult(model, report, str(output) if write else None)


def check_options_apply(fw: frameworks.Framework, source: Path, options: ConvertOptions
                        ) -> None:
    """A UsageError for an option the source would not read (--weights of an ONNX model,
    --signature of a .pb): silently ignoring it would hide the user's mistake."""
    unread = frameworks.unread_options(fw, source, weights=options.weights is not None,
                                       signature=options.signature != DEFAULT_SIGNATURE)
    if unread:
        raise UsageError(f"{source}: " + "; ".join(unread))


def _about_the_batch(exc: UnsupportedOpError) -> bool:
    """A refusal for mixing a symbolic batch with other axes: its remedy is --batch N, not a
    cut of the graph."""
    return bool(exc.problems) and all(p.rule == "batch" for p in exc.problems)


def _checked(options: ConvertOptions | None) -> ConvertOptions:
    if options is None:
        return ConvertOptions()
    if not isinstance(options, ConvertOptions):
        raise TypeError(f"options: expected a ConvertOptions, got {type(options).__name__}")
    return options


def _attach_exact_cut(exc: UnsupportedOpError, src: Path, options: ConvertOptions) -> None:
    """Compute the checked exact cut of a refused conversion; end the message with it."""
    from .conversion.cut import ExactCut, suggest

    def try_convert(cut_options: ConvertOptions) -> None:
        # without --rename: an output it names may not be one of the cut's (names change no
        # number, so the cut converts or not the same)
        convert(src, options=cut_options.replace(exact_cut=False, rename={}))

    try:
        assert options.framework is not None  # convert passes the framework it detected
        cut = suggest(str(src), options.framework, options, exc, try_convert)
    except Exception as failure:  # noqa: BLE001 - the refusal stays the error, whatever happens
        cut = ExactCut([], 0, 0, [p.node for p in exc.problems],
                       f"computing it failed ({type(failure).__name__}: {failure})")
    exc.exact_cut = cut
    exc.args = (f"{exc}\n{cut.line()}",)


def write_report(path: str | os.PathLike, report: ConversionReport, verification=None, *,
                 follow_symlinks: bool = True) -> None:
    """The conversion report (and the verification, if any) as JSON, written atomically."""
    from .files.writes import write_json

    data = report.to_dict()
    if verification is not None:
        data["verification"] = verification.to_dict()
    write_json(path, data, role="report", follow_symlinks=follow_symlinks)


def refusal_report(source: str | os.PathLike, exc: UnsupportedOpError) -> dict[str, Any]:
    """The report of a refused conversion: every refused node and the exact cut (if any)."""
    cut = getattr(exc, "exact_cut", None)
    return {"source": os.fspath(source), "status": "refused", "framework": exc.framework,
            "refused": [{"node": p.node, "op": p.op, "reason": p.reason} for p in exc.problems],
            "exact_cut": cut.to_dict() if cut is not None else None}


def write_refusal_report(path: str | os.PathLike, source: str | os.PathLike,
                         exc: UnsupportedOpError, *, follow_symlinks: bool = True) -> None:
    """``refusal_report`` as JSON, written atomically (single conversions and batches)."""
    from .files.writes import write_json

    write_json(path, refusal_report(source, exc), role="report", follow_symlinks=follow_symlinks)


def check(paths: str | os.PathLike | Sequence[str | os.PathLike]
          ) -> dict[str, list[ValidationIssue]]:
    """Validate dialect model files (one path or several): path -> issues (empty: valid).

    Like ``nhwc-onnx check``, a folder means every ``*.onnx`` below it and a quoted glob
    (``'models/**/*.onnx'``) what it matches (``dialect.check.expand_model_paths``); each file
    is checked once. Unreadable files, and a folder or glob that holds no model, raise
    ModelLoadError.
    """
    from .dialect.check import expand_model_paths
    from .errors import ModelLoadError
    from .schemas import validate
    from .serialize import load

    if isinstance(paths, (str, os.PathLike)):  # one path, not a sequence of its characters
        paths = [paths]
    elif isinstance(paths, bytes) or not isinstance(paths, Iterable):
        raise TypeError(f"paths: expected a path or a list of paths, got "
                        f"{type(paths).__name__}")
    names = [path_argument(p, "paths", "model paths") for p in paths]
    files, unmatched = expand_model_paths(names)
    if unmatched:
        raise ModelLoadError(f"{', '.join(unmatched)}: no .onnx model there")
    return {f: validate(load(f)) for f in files}


def verify(source: str | os.PathLike, converted: str | os.PathLike | Model,
           options: ConvertOptions | None = None, *, feeds=None, seed: int | None = None,
           atol: float = 1e-4, rtol: float = 1e-4, bisect: bool = False, layers: bool = False,
           samples: int = 1, raise_on_failure: bool = False):
    """Run source and converted model side by side on the same inputs (``samples`` of them,
    random ones seeded by ``seed``, default ``options.seed``); ``layers`` compares every tensor
    both compute; a VerificationReport (see nhwc_onnx.verification)."""
    from .verification import verify as _verify

    source = path_argument(source, "source", "the path of the source model")
    if not isinstance(converted, Model):
        converted = path_argument(converted, "converted", "a dialect model's path or a Model")
    if feeds is not None and not isinstance(feeds, Mapping):
        raise TypeError(f"feeds: expected a mapping input name -> array, got "
                        f"{type(feeds).__name__}")
    options = _checked(options)
    fw = frameworks.get(options.framework) if options.framework else frameworks.detect(source)
    check_options_apply(fw, Path(source), options)
    return _verify(source, converted, options, feeds=feeds, seed=seed, atol=atol,
                   rtol=rtol, bisect=bisect, layers=layers, samples=samples,
                   raise_on_failure=raise_on_failure)


class VerifyBeforeWrite:
    """A ``before_write`` for convert(): the finished model is verified against ``source`` on
    inputs seeded by ``options.seed`` (its verdict stays in ``.report``); a mismatch is not
    written. ``started()`` is called as verification starts (a progress line)."""

    def __init__(self, source, options: ConvertOptions, *, atol: float, rtol: float,
                 bisect: bool = False, layers: bool = False, samples: int = 1,
                 started: Callable[[], None] | None = None):
        self.source, self.options, self.started = source, options, started
        self.settings: dict[str, Any] = {
            "atol": atol, "rtol": rtol, "bisect": bisect, "layers": layers,
            "samples": samples}
        self.report: Any = None  # the VerificationReport, once verified

    def __call__(self, model: Model, report: ConversionReport) -> bool:
        if self.started is not None:
            self.started()
        self.report = verify(self.source, model, self.options.replace(framework=report.framework),
                             **self.settings)
        return self.report.ok


def is_dialect_file(path: str | os.PathLike) -> bool:
    """True when an .onnx file is one of ours (dialect domain or our converter metadata)."""
    from .files.onnx_wire import read_structure

    proto = read_structure(path)
    if proto is None:
        return False
    if any(p.key == "converter" and p.value == "nhwc-onnx" for p in proto.metadata_props):
        return True
    return any(n.domain == "nhwc" for n in proto.graph.node)


def info(path: str | os.PathLike, options: ConvertOptions | None = None, *,
         dialect: bool | None = None) -> dict[str, Any]:
    """Inputs, outputs, op histogram, parameter count and size of any supported file.

    ``dialect``: True reads ``path`` as a dialect model, False as a source (of
    ``options.framework``, or the one its name says); None: a dialect model when it is an
    .onnx file written by nhwc-onnx, else a source. A source is also taken through the
    conversion (nothing written) and ``conversion`` says how that ends: ``status`` "converts",
    "refused" (``refused``: every node, op and reason) or "fails" (``reason``); a source that
    its frontend refuses is still described (``parameters`` None then).
    """
    options = _checked(options)
    p = Path(path_argument(path, "path", "the path of a model"))
    if dialect is None:
        dialect = options.framework is None and p.suffix.lower() == ".onnx" \
            and is_dialect_file(p)
    if not dialect:
        fw = frameworks.get(options.framework) if options.framework else frameworks.detect(p)
        described = describe_source(p, fw, options)  # the file is read (checked) first
        return {"file": str(p), "format": fw.name, "bytes": _size(p, options), **described}
    from .serialize import load

    model = load(p)
    consts = model.graph.constants()
    return {
        "file": str(p),
        "format": "nhwc dialect",
        "bytes": _size(p, options),
        "inputs": [_describe_value(v) for v in model.graph.inputs],
        "outputs": [_describe_value(v) for v in model.graph.outputs],
        "nodes": len(model.graph),
        "ops": model.graph.op_counts(),
        "parameters": int(sum(int(v.const.size) for v in consts
                                if v.const is not None and v.const.dtype.kind == "f")),
        "metadata": dict(sorted(model.metadata.items())),
    }


def _size(path: Path, options: ConvertOptions) -> int:
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else (
        path.stat().st_size)
    if options.weights not in (None, "random"):
        size += Path(options.weights).stat().st_size
    return size
