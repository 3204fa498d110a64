"""``convert``, ``verify`` and ``info``: the commands that read source models.

Registered on the main group by ``cli.py``. Like the rest of the CLI they only parse options,
call ``nhwc_onnx.api`` and print; errors become exit codes in ``cli._Group``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from .errors import EXIT_OK, EXIT_VERIFY_FAILED, UnsupportedOpError


def _parse_shapes(values: tuple[str, ...]) -> dict[str, list[int]]:
    shapes = {}
    for item in values:
        name, sep, dims = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            raise click.BadParameter(f"'{item}': expected NAME=D1,D2,... (e.g. input=1,224,224,3)",
                                     param_hint="--input-shape") from None
        if any(d <= 0 for d in shapes[name]):
            raise click.BadParameter(f"'{item}': every dimension must be positive",
                                     param_hint="--input-shape")
    return shapes


def _split_names(value: str | None) -> list[str] | None:
    return [n.strip() for n in value.split(",") if n.strip()] if value else None


def source_options(f):
    """Options shared by every command that reads a source model."""
    opts = [
        click.option("--framework", type=click.Choice(["tf", "caffe", "onnx"]),
                     help="Source framework (default: from the file extension)."),
        click.option("--weights", help="Caffe: the .caffemodel, or 'random' for seeded random "
                                       "weights (to check convertibility without weights)."),
        click.option("--seed", type=int, default=0, show_default=True,
                     help="Seed for --weights random and for random verification inputs."),
        click.option("--inputs", "input_names", help="Graph input tensor names, comma separated."),
        click.option("--outputs", "output_names", help="Graph output tensor names, comma separated."),
        click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=D1,D2,...",
                     help="Override an input's shape, in the source layout (repeatable)."),
        click.option("--batch", type=click.IntRange(min=1),
                     help="Batch size for inputs with an unknown batch."),
        click.option("--signature", default="serving_default", show_default=True,
                     help="TensorFlow SavedModel signature."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _frontend_options(framework, weights, seed, input_names, output_names, input_shapes, batch,
                      signature):
    from .frontends.base import FrontendOptions

    return FrontendOptions(inputs=_split_names(input_names), outputs=_split_names(output_names),
                           input_shapes=_parse_shapes(input_shapes), batch=batch,
                           weights=weights, seed=seed, signature=signature)


def _progress(settings, message: str) -> None:
    """Progress lines only for a person watching a terminal."""
    if settings.verbosity >= 0 and sys.stderr.isatty():
        click.echo(message, err=True)


def register(cli: click.Group) -> None:
    cli.add_command(convert)
    cli.add_command(verify)
    cli.add_command(info)


@click.command()
@click.argument("sources", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Output .onnx file (one source).")
@click.option("--output-dir", type=click.Path(file_okay=False),
              help="Output folder (several sources: <dir>/<source name>.onnx).")
@source_options
@click.option("--domain", type=click.Choice(["nhwc", "default"]), default="nhwc",
              show_default=True, help="Operator-set domain of dialect ops ('default' = '').")
@click.option("--weights-as-constants", is_flag=True, help="Weights as Constant nodes.")
@click.option("--allow-transpose", is_flag=True,
              help="Insert a layout Transpose where NCHW semantics need one (warns per node).")
@click.option("--approximate-padding", is_flag=True,
              help="Kept for old command lines: no rewrite needs it now (see --strict).")
@click.option("--strict", is_flag=True,
              help="Refuse rounding-level rewrites too (x/c as x*(1/c), ...): bit-exact only.")
@click.option("--keep-layout", "keep_layout", multiple=True, metavar="NAME[,NAME]",
              help="Keep these graph inputs/outputs in the source's axis order (not NHWC).")
@click.option("--report", "report_path", type=click.Path(),
              help="Write the conversion report as JSON (several sources: a folder that gets "
                   "one <output name>.report.json per model).")
@click.option("--verify", "do_verify", is_flag=True,
              help="Run source and result on the same inputs and compare.")
@click.option("--bisect", is_flag=True, help="With --verify: name the first diverging node.")
@click.option("--atol", type=float, default=1e-4, show_default=True)
@click.option("--rtol", type=float, default=1e-4, show_default=True)
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes for several sources; capped at the number of sources "
                   "and of usable CPUs.")
@click.pass_obj
def convert(settings, sources, output, output_dir, framework, weights, seed, input_names,
            output_names, input_shapes, batch, signature, domain, weights_as_constants,
            allow_transpose, approximate_padding, strict, keep_layout, report_path, do_verify,
            bisect, atol, rtol, jobs):
    """Convert TensorFlow, Caffe or ONNX models to the NHWC dialect.

    Nothing is written when a model cannot be converted exactly. Exit codes: 0 ok,
    1 unsupported/invalid, 2 unreadable input, 3 verification failed.
    """
    options = _frontend_options(framework, weights, seed, input_names, output_names,
                                input_shapes, batch, signature)
    flags = {"domain": "" if domain == "default" else "nhwc",
             "weights_as_constants": weights_as_constants, "allow_transpose": allow_transpose,
             "approximate_padding": approximate_padding, "strict": strict,
             "keep_layout": tuple(n for item in keep_layout for n in item.split(",") if n)}
    if len(sources) > 1 or output_dir:
        if output:
            raise click.UsageError("use --output-dir (not -o) with several sources")
        if not output_dir:
            raise click.UsageError("several sources need --output-dir")
        from .batch import convert_many

        report_dir = None
        if report_path:
            report_dir = Path(report_path)
            if report_dir.suffix.lower() == ".json" or (report_dir.exists()
                                                        and not report_dir.is_dir()):
                raise click.UsageError(
                    f"with several sources --report takes a folder (one <output name>"
                    f".report.json per model), not the file '{report_path}'")
        code = convert_many(sources, Path(output_dir), framework, options, flags, jobs,
                            do_verify, atol, rtol, quiet=settings.verbosity < 0,
                            report_dir=report_dir)
        raise SystemExit(code)
    if not output:
        raise click.UsageError("missing -o/--output")
    from .api import convert as api_convert
    from .api import source_files
    from .outputs import plan_targets
    from .progress import StageReporter, wanted

    source = sources[0]
    targets = [("output", Path(output))] + ([("report", Path(report_path))] if report_path else [])
    plan_targets(targets, source_files(source, options))  # before the (long) conversion
    stages = StageReporter(source, wanted(settings.verbosity < 0))
    try:
        result = api_convert(source, output, framework=framework, options=options,
                             progress=stages, **flags)
    except UnsupportedOpError as exc:
        if report_path:  # the refusal and the exact cut, for machines
            _write_json(Path(report_path), refusal_report(source, exc))
        raise
    report = result.report
    for w in report.warnings:
        click.echo(f"Warning: {w}", err=True)
    code = EXIT_OK
    verification = None
    if do_verify:
        from .api import verify as api_verify

        stages("verify")
        verification = api_verify(source, result.model, framework=report.framework,
                                  options=options, seed=seed, atol=atol, rtol=rtol, bisect=bisect)
        if not verification.ok:
            code = EXIT_VERIFY_FAILED
    if report_path:
        from .api import write_report

        write_report(Path(report_path), report, verification)
    if settings.verbosity >= 0:
        click.echo(format_report(report))
        if verification is not None:
            click.echo(format_verification(verification))
    raise SystemExit(code)


@click.command()
@click.argument("source", type=click.Path())
@click.argument("converted", type=click.Path(dir_okay=False))
@source_options
@click.option("--input", "input_files", multiple=True, metavar="NAME=FILE.npy",
              help="Input value in the source layout (default: seeded random).")
@click.option("--atol", type=float, default=1e-4, show_default=True)
@click.option("--rtol", type=float, default=1e-4, show_default=True)
@click.option("--bisect", "--per-node", "bisect", is_flag=True,
              help="When outputs differ, name the first node whose output diverges.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_obj
def verify(settings, source, converted, framework, weights, seed, input_names, output_names,
           input_shapes, batch, signature, input_files, atol, rtol, bisect, fmt):
    """Compare a converted model with its source on the same inputs (exit 3 if they differ)."""
    from .api import verify as api_verify
    from .npy import load_npy

    options = _frontend_options(framework, weights, seed, input_names, output_names,
                                input_shapes, batch, signature)
    feeds = None
    if input_files:
        feeds = {}
        for item in input_files:
            name, sep, file = item.partition("=")
            if not sep:
                raise click.BadParameter(f"'{item}': expected NAME=FILE.npy", param_hint="--input")
            feeds[name] = load_npy(file)
    _progress(settings, "running both models ...")
    report = api_verify(source, converted, framework=framework, options=options, feeds=feeds,
                        seed=seed, atol=atol, rtol=rtol, bisect=bisect)
    if fmt == "json":
        import json

        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        click.echo(format_verification(report))
    raise SystemExit(EXIT_OK if report.ok else EXIT_VERIFY_FAILED)


@click.command()
@click.argument("file", type=click.Path())
@click.option("--framework", type=click.Choice(["tf", "caffe", "onnx", "dialect"]))
@click.option("--weights", help="Caffe: the .caffemodel (or 'random').")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def info(file, framework, weights, fmt):
    """Inputs, outputs, op histogram, parameter count and size of any supported file."""
    from .api import info as api_info
    from .frontends.base import FrontendOptions

    data = api_info(file, framework, FrontendOptions(weights=weights or "random"))
    if fmt == "json":
        import json

        click.echo(json.dumps(data, indent=2))
        return
    click.echo(f"{data['file']}: {data['format']}, {data['bytes']:,} bytes, "
               f"{data['nodes']} nodes, {data['parameters']:,} parameters")
    for kind in ("inputs", "outputs"):
        for v in data[kind]:
            shape = "x".join("?" if d is None else str(d) for d in v["shape"] or []) or "?"
            click.echo(f"  {kind[:-1]:6} {v['name']}: {v['dtype']} {shape}")
    click.echo("  ops: " + ", ".join(f"{op} x{n}" for op, n in data["ops"].items()))


def _write_json(path: Path, data: dict) -> None:
    """Write atomically (see outputs.write_json): a reader never sees half a report."""
    from .outputs import write_json

    write_json(path, data, role="report")


def refusal_report(source: str, exc: UnsupportedOpError) -> dict:
    cut = getattr(exc, "exact_cut", None)
    return {"source": str(source), "status": "refused", "framework": exc.framework,
            "refused": [{"node": p.node, "op": p.op, "reason": p.reason} for p in exc.problems],
            "exact_cut": cut.to_dict() if cut is not None else None}


def format_report(report) -> str:
    lines = [(f"{report.source} -> {report.output} ({report.framework}, "
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
    for name, perm in sorted(report.io_permutations.items()):
        lines.append(f"  layout: '{name}' permuted {perm} (feed/read it as NHWC)")
    return "\n".join(lines)


def format_verification(report) -> str:
    status = "MATCH" if report.ok else "MISMATCH"
    lines = [(f"verification: {status} (atol {report.atol:g}, rtol {report.rtol:g}, "
              f"seed {report.seed})")]
    for c in report.outputs:
        mark = "ok " if c.within else "BAD"
        lines.append(f"  {mark} {c.name}: shape {tuple(c.source_shape)}  max abs "
                     f"{c.max_abs_error:.3g}  max rel {c.max_rel_error:.3g}  cos {c.cosine:.6f}")
    if report.first_divergence:
        d = report.first_divergence
        if d.get("node"):
            lines.append(f"  first divergence: node '{d['node']}' ({d.get('op')}, source op "
                         f"{d.get('source_op') or '?'}), tensor '{d.get('tensor')}', max abs "
                         f"{d.get('max_abs_error', 0):.3g}")
        else:
            lines.append(f"  bisect: {d.get('reason')}")
    return "\n".join(lines)
