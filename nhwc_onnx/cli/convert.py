"""``convert``, ``verify`` and ``info``: the commands that read source models.

Like the rest of the command line they only parse options, call the library and print;
errors become exit codes in the group (``nhwc_onnx.cli``).
"""
from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import EXIT_OK, EXIT_VERIFY_FAILED, UnsupportedOpError, UsageError
from .common import (
    AT_LEAST_ONE,
    OUTPUT,
    PathType,
    Settings,
    echo,
    framework_option,
    parse_input_files,
    progress,
    tolerance_options,
    verification_options,
)
from .conversion_options import options_from, output_options, source_options


@click.command()
@click.argument("sources", nargs=-1, required=True,
          help="Source models: .pb, .pbtxt, .keras, .h5, a SavedModel folder, .prototxt or "
               ".onnx.")
@click.option("-o", "--output", type=OUTPUT, metavar="FILE",
              help="Output .onnx file (one source; with --split the pipeline's folder).")
@click.option("--output-dir", type=OUTPUT, metavar="DIR",
              help="Output folder (several sources: <dir>/<source name>.onnx).")
@source_options
@output_options
@click.option("--report", "report_path", metavar="PATH",
              help="Write the conversion report as JSON (several sources: a folder that gets "
                   "one <output name>.report.json per model).")
@click.option("--split", is_flag=True,
              help="A refused model becomes a pipeline folder (-o): dialect segments and "
                   "standard ONNX segments for the refused nodes.")
@click.option("--verify", "do_verify", is_flag=True,
              help="Run source and result on the same inputs and compare.")
@click.option("--bisect", is_flag=True, help="With --verify: name the first diverging node.")
@tolerance_options
@verification_options
@click.option("--jobs", type=AT_LEAST_ONE, default=1, show_default=True, metavar="N",
              help="Worker processes for several sources; capped at the number of sources and "
                   "of usable CPUs.")
@click.pass_obj
def convert(settings: Settings, sources: tuple[str, ...], output: str | None,
            output_dir: str | None, report_path: str | None, split: bool,
            do_verify: bool, bisect: bool, atol: float, rtol: float,
            feeds: tuple[str, ...], layers: bool, samples: int, html_path: str | None,
            jobs: int, **params) -> None:
    """Convert TensorFlow, Caffe or ONNX models to the NHWC dialect.

    Nothing is written when a model cannot be converted exactly. Exit codes: 0 ok,
    1 unsupported/invalid, 2 unreadable input, 3 verification failed.
    """
    options = options_from(params)
    inputs = parse_input_files(feeds)
    _check_usage(sources, output, output_dir, split, bisect, html_path, inputs, do_verify,
                 layers, samples)
    if len(sources) > 1 or output_dir:
        assert output_dir is not None  # _check_usage: several sources need --output-dir
        raise SystemExit(_convert_many(settings, sources, Path(output_dir), options, jobs,
                                       do_verify, atol, rtol, report_path, layers, samples))
    assert output is not None  # _check_usage: one source needs -o
    if split:
        from .pipeline import convert_split

        raise SystemExit(convert_split(settings, sources[0], output, options, do_verify=do_verify,
                                       atol=atol, rtol=rtol, layers=layers, samples=samples,
                                       report_path=report_path,
                                       format_verification=format_verification))
    raise SystemExit(_convert_one(settings, sources[0], output, options, inputs, report_path,
                                  html_path, do_verify, atol, rtol, bisect, layers, samples))


def _check_usage(sources, output, output_dir, split: bool, bisect: bool, html_path, inputs,
                 do_verify: bool, layers: bool, samples: int) -> None:
    """The combinations of options that mean nothing together: usage errors (exit 2)."""
    if output and output_dir:
        raise UsageError("-o names the output file of one source, --output-dir the folder of a "
                         "batch: give one of them")
    if not do_verify and (layers or samples != 1 or html_path or inputs):
        given = [o for o, on in (("--input", inputs), ("--layers", layers),
                                 ("--samples", samples != 1), ("--html", html_path)) if on]
        raise UsageError(f"{', '.join(given)} describe(s) the verification: add --verify")
    if split and (len(sources) > 1 or output_dir or bisect or html_path):
        raise UsageError("--split converts one source to the folder -o names (no --output-dir, "
                         "--bisect or --html)")
    if len(sources) > 1 or output_dir:
        if output:
            raise UsageError("use --output-dir (not -o) with several sources")
        if not output_dir:
            raise UsageError("several sources need --output-dir")
        if html_path:
            raise UsageError("--html writes the page of one conversion; with several sources "
                             "use --report (its verification holds the same data)")
        if inputs:
            raise UsageError("--input feeds the verification of one model; several sources "
                             "are verified on seeded random inputs")
    elif not output:
        raise UsageError("missing -o/--output")


def _convert_one(settings: Settings, source: str, output: str, options, inputs, report_path,
                 html_path, do_verify: bool, atol: float, rtol: float, bisect: bool,
                 layers: bool, samples: int) -> int:
    """One source to ``output`` (with its report and page): all written, or none."""
    from ..api import VerifyBeforeWrite, source_files, write_report
    from ..api import convert as api_convert
    from ..files.writes import all_or_nothing, plan_targets
    from .common import wanted
    from .progress import StageReporter

    targets = [("output", Path(output))] + ([("report", Path(report_path))] if report_path else [])
    if html_path:
        targets.append(("HTML page", Path(html_path)))
    # before the (long) conversion; no output may replace a source or an --input file
    plan_targets(targets, source_files(source, options) + [Path(f) for _, f in inputs])
    arrays = None
    if inputs:
        from ..files.npy import load_npy

        arrays = {name: load_npy(file) for name, file in inputs}
    stages = StageReporter(source, wanted(settings.verbosity < 0))
    check = VerifyBeforeWrite(source, options, atol=atol, rtol=rtol, bisect=bisect,
                              layers=layers or bool(html_path), samples=samples, feeds=arrays,
                              started=lambda: stages("verify")) if do_verify else None
    refusal = None
    with all_or_nothing():  # the model, its report and its page: all written, or none
        try:
            result = api_convert(source, output, options, progress=stages, before_write=check)
        except UnsupportedOpError as exc:
            if not report_path:
                raise
            from ..api import write_refusal_report

            write_refusal_report(Path(report_path), source, exc)  # the refusal and exact cut
            refusal = exc
        else:
            verification = check.report if check is not None else None
            if report_path:
                write_report(Path(report_path), result.report, verification)
            if html_path and verification is not None:  # a failed verification's page too
                from ..verification.html import write_html

                write_html(Path(html_path), verification, result.report)
    if refusal is not None:
        raise refusal
    report = result.report
    for w in report.warnings:
        echo(f"Warning: {w}", err=True)
    code = EXIT_VERIFY_FAILED if verification is not None and not verification.ok else EXIT_OK
    if settings.verbosity >= 0:
        echo(format_report(report))
        if verification is not None:
            echo(format_verification(verification))
    if verification is not None:
        for warning in verification.warnings:
            echo(f"Warning: {warning}", err=True)
    if code == EXIT_VERIFY_FAILED:
        echo(f"Error: verification failed, so {output} was not written", err=True)
    return code


def _convert_many(settings: Settings, sources, out_dir: Path, options, jobs: int,
                  do_verify: bool, atol: float, rtol: float, report_path: str | None,
                  layers: bool, samples: int) -> int:
    from ..conversion.several import Verification, convert_many, exit_code, format_table
    from .common import wanted
    from .progress import BatchBar

    report_dir = None
    if report_path:
        report_dir = Path(report_path)
        if report_dir.suffix.lower() == ".json" or (report_dir.exists()
                                                    and not report_dir.is_dir()):
            raise UsageError(
                f"with several sources --report takes a folder (one <output name>"
                f".report.json per model), not the file '{report_path}'")
    quiet = settings.verbosity < 0
    bar = BatchBar(len(sources), wanted(quiet))
    try:
        outcomes = convert_many(
            sources, out_dir, options, jobs=jobs, report_dir=report_dir,
            verification=Verification(atol, rtol, layers, samples) if do_verify else None,
            finished=lambda o: bar.finished(o.source, o.status, o.seconds,
                                            o.message.split("\n", 1)[0]
                                            if o.status != "ok" else ""))
    finally:
        bar.close()
    for o in outcomes:
        for w in o.warnings:
            echo(f"Warning: {o.source}: {w}", err=True)
    if not quiet or any(o.status != "ok" for o in outcomes):
        echo(format_table(outcomes))
    return exit_code(outcomes)


@click.command()
@click.argument("source", help="The source model, as given to convert.")
@click.argument("converted", type=PathType(),
                help="The dialect model converted from SOURCE, or a pipeline (its folder).")
@source_options
@tolerance_options
@click.option("--bisect", "--per-node", "bisect", is_flag=True,
              help="When outputs differ, name the first node whose output diverges.")
@verification_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Human-readable report or JSON.")
@click.pass_obj
def verify(settings: Settings, source: str, converted: str, feeds: tuple[str, ...],
           atol: float, rtol: float, bisect: bool, layers: bool, samples: int,
           html_path: str | None, fmt: str, **params) -> None:
    """Compare a converted model with its source on the same inputs (exit 3 if they differ)."""
    from ..api import source_files
    from ..api import verify as api_verify
    from ..files.npy import load_npy

    options = options_from(params)
    inputs = parse_input_files(feeds)
    if html_path:  # checked before anything is read or run
        from ..files.writes import plan_targets

        plan_targets([("HTML page", Path(html_path))], source_files(source, options)
                     + [Path(converted)] + [Path(file) for _, file in inputs])
    arrays = {name: load_npy(file) for name, file in inputs} if inputs else None
    progress(settings, "running both models ...")
    from ..pipeline import is_pipeline

    if is_pipeline(converted):
        from .pipeline import verify_pipeline

        raise SystemExit(verify_pipeline(source, converted, options, arrays, atol, rtol,
                                         layers or bool(html_path), samples, fmt,
                                         format_verification, html_path))
    report = api_verify(source, converted, options, feeds=arrays, atol=atol, rtol=rtol,
                        bisect=bisect, layers=layers or bool(html_path), samples=samples)
    if html_path:
        from ..verification.html import write_html

        write_html(Path(html_path), report)
    if fmt == "json":
        echo(json.dumps(report.to_dict(), indent=2))
    else:
        echo(format_verification(report))
        for warning in report.warnings:
            echo(f"Warning: {warning}", err=True)
    raise SystemExit(EXIT_OK if report.ok else EXIT_VERIFY_FAILED)


@click.command()
@click.argument("file", help="A source model or a dialect model.")
@framework_option(extra=("dialect",),
                  help="What FILE is (default: from its extension and content).")
@click.option("--weights", metavar="FILE", help="Caffe: the .caffemodel (or 'random').")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Human-readable summary or JSON.")
def info(file: str, framework: str | None, weights: str | None, fmt: str) -> None:
    """Inputs, outputs, op histogram, parameter count and size of any supported file."""
    from ..api import info as api_info
    from ..options import ConvertOptions
    from ..pipeline import is_pipeline

    if is_pipeline(file):
        from .pipeline import info_pipeline

        return info_pipeline(file, fmt)

    dialect = True if framework == "dialect" else None if framework is None else False
    options = ConvertOptions(framework=None if dialect else framework,
                             weights=weights or "random")
    data = api_info(file, options, dialect=dialect)
    if fmt == "json":
        echo(json.dumps(data, indent=2))
        return
    echo(format_info(data))


def format_info(data: dict) -> str:
    """``info``'s text: the summary line, inputs and outputs (an unknown dim is ``?``, a
    symbolic one its name), ops, embedded preprocessing and how a conversion would end."""
    from ..ir.metadata import KEY_PREPROCESSING, read_preprocessing

    parameters = data["parameters"]
    nodes = "?" if data["nodes"] is None else data["nodes"]
    lines = [f"{data['file']}: {data['format']}, {data['bytes']:,} bytes, {nodes} nodes, "
             + (f"{parameters:,} parameters" if parameters is not None else "weights not read")]
    for kind in ("inputs", "outputs"):
        for v in data[kind]:
            shape = " x ".join("?" if d is None else str(d) for d in v["shape"] or []) or "?"
            lines.append(f"  {kind[:-1]:6} {v['name']}: {v['dtype'] or '?'} {shape}")
    if data["nodes"] is not None:
        lines.append("  ops: " + ", ".join(f"{op} x{n}" for op, n in data["ops"].items()))
    if data.get("macs") is not None:
        lines.append(f"  cost: {data['macs']:,} MACs per sample, {data['parameter_bytes']:,} "
                     "parameter bytes")
    embedded = (read_preprocessing(data["metadata"].get(KEY_PREPROCESSING))
                if data["format"] == "nhwc dialect" else {})  # a source's key is not ours
    for name, step in sorted(embedded.items()):
        reverse = "channels reversed, " if step.get("reverse_channels") else ""
        lines.append(f"  preprocessing: '{name}' takes raw pixels ({reverse}mean "
                     f"{step.get('mean')}, std {step.get('std')})")
    conversion = data.get("conversion")
    if conversion is not None:
        if conversion["status"] == "converts":
            lines.append("  conversion: converts")
        elif conversion["status"] == "refused":
            lines.append(f"  conversion: refused, {len(conversion['refused'])} node(s):")
            lines += [f"    '{r['node']}' ({r['op']}): {r['reason']}"
                      for r in conversion["refused"]]
        else:
            first, *rest = conversion["reason"].splitlines() or [""]
            lines.append(f"  conversion: fails: {first}")
            lines += [f"    {line.strip()}" for line in rest]
    return "\n".join(lines)


def format_report(report) -> str:
    written = report.output or "nothing written"  # a verification failed
    lines = [(f"{report.source} -> {written} ({report.framework}, "
              f"{report.timings.get('total', 0.0):.2f} s)")]
    lines.append("  source ops: " + ", ".join(f"{k} x{v}" for k, v in report.source_ops.items()))
    lines.append("  dialect ops: " + ", ".join(f"{k} x{v}" for k, v in report.target_ops.items()))
    kinds: dict[str, int] = {}
    for d in report.decisions:
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
    if kinds:
        lines.append("  decisions: " + ", ".join(f"{k} x{v}" for k, v in sorted(kinds.items())))
    for d in report.decisions:  # rounding-level rewrites are named one by one (--strict)
        if d["kind"] == "rounding":
            lines.append(f"  rounding: '{d['node']}' {d['detail']}")
        elif d["kind"] == "preprocessing":
            lines.append(f"  preprocessing: '{d['node']}' {d['detail']}")
    for name, perm in sorted(report.io_permutations.items()):
        lines.append(f"  layout: '{name}' permuted {perm} (feed/read it as NHWC)")
    return "\n".join(lines)


def format_verification(report) -> str:
    status = "MATCH" if report.ok else "MISMATCH"
    batches = getattr(report, "batches", None)
    at = (f"; the symbolic batch at {', '.join(map(str, batches[:-1]))} and {batches[-1]}"
          if batches else "")
    samples = f", {report.samples} samples" if report.samples > 1 else ""
    lines = [(f"verification: {status} (atol {report.atol:g}, rtol {report.rtol:g}, "
              f"seed {report.seed}{samples}{at})")]
    for c in report.outputs:
        mark = "ok " if c.within else "BAD"
        where = [f"batch {c.batch}"] if getattr(c, "batch", None) is not None else []
        where += [f"sample {c.sample}"] if report.samples > 1 else []
        lines.append(f"  {mark} {c.name}: shape {tuple(c.source_shape)}  max abs "
                     f"{c.max_abs_error:.3g}  max rel {c.max_rel_error:.3g}  cos {c.cosine:.6f}"
                     + (f"  ({', '.join(where)})" if where else ""))
    if report.layers is not None:
        lines += format_layers(report)
    if report.first_divergence:
        d = report.first_divergence
        if d.get("node"):
            lines.append(f"  first divergence: node '{d['node']}' ({d.get('op')}, source op "
                         f"{d.get('source_op') or '?'}), tensor '{d.get('tensor')}', max abs "
                         f"{d.get('max_abs_error', 0):.3g}")
        else:
            lines.append(f"  bisect: {d.get('reason')}")
    return "\n".join(lines)


def format_layers(report) -> list[str]:
    """The --layers table: one row per tensor both models compute, in graph order."""
    layers = report.layers
    first = report.first_failing_layer
    bad = sum(1 for layer in layers if not layer.ok)
    verdict = (f"{bad} out of tolerance, the first '{first.tensor.source}'" if first
               else "all within tolerance")
    lines = [f"layers: {len(layers)} tensors both models compute, {verdict}"]
    if not layers:
        return lines
    rows = [("", "#", "tensor", "node (op)", "shape", "max abs", "max rel", "cosine")]
    for i, layer in enumerate(layers, 1):
        c, t = layer.comparison, layer.tensor
        rows.append(("ok" if layer.ok else "BAD", str(i), t.source, f"{t.node} ({t.op})",
                     "x".join(str(d) for d in c.source_shape) or "scalar",
                     f"{c.max_abs_error:.3g}", f"{c.max_rel_error:.3g}", f"{c.cosine:.6f}"))
    widths = [min(max(len(r[k]) for r in rows), 48) for k in range(len(rows[0]))]
    for i, row in enumerate(rows):
        text = "  ".join(cell.rjust(w) if k in (1, 5, 6, 7) else cell.ljust(w)
                         for k, (cell, w) in enumerate(zip(row, widths)))
        if first is not None and i > 0 and layers[i - 1] is first:
            text += "  <- first out of tolerance"
        lines.append(f"  {text.rstrip()}")
    if report.skipped_layers:
        lines.append(f"  not compared ({len(report.skipped_layers)}: same name, another "
                     "shape): " + ", ".join(sorted(report.skipped_layers)))
    return lines
