"""``convert``, ``verify`` and ``info``: the commands that read source models.

Listed in ``cli.COMMANDS``. Like the rest of the CLI they only parse options, call
``nhwc_onnx.api`` and print; errors become exit codes in ``cli.run_command``.
"""
from __future__ import annotations

import sys
from pathlib import Path

from .cli_args import add_flag, echo, int_at_least, non_negative_float, path_arg, repeated
from .errors import EXIT_OK, EXIT_VERIFY_FAILED, UnsupportedOpError, UsageError


def _parse_shapes(values: tuple[str, ...]) -> dict[str, list[int]]:
    shapes = {}
    for item in values:
        name, sep, dims = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            raise UsageError(f"'{item}': expected NAME=D1,D2,... (e.g. input=1,224,224,3)",
                             param_hint="--input-shape") from None
        if any(d <= 0 for d in shapes[name]):
            raise UsageError(f"'{item}': every dimension must be positive",
                             param_hint="--input-shape")
    return shapes


def _split_names(value: str | None) -> list[str] | None:
    return [n.strip() for n in value.split(",") if n.strip()] if value else None


def source_arguments(parser) -> None:
    """Options shared by every command that reads a source model."""
    parser.add_argument("--framework", choices=["tf", "caffe", "onnx"],
                        help="Source framework (default: from the file extension).")
    parser.add_argument("--weights", metavar="FILE",
                        help="Caffe: the .caffemodel, or 'random' for seeded "
                                          "random weights (to check convertibility without "
                                          "weights).")
    parser.add_argument("--seed", type=int, default=0, metavar="N",
                        help="Seed for --weights random and for random verification inputs.")
    parser.add_argument("--inputs", dest="input_names", metavar="NAMES",
                        help="Graph input tensor names, comma separated.")
    parser.add_argument("--outputs", dest="output_names", metavar="NAMES",
                        help="Graph output tensor names, comma separated.")
    repeated(parser, "--input-shape", dest="input_shapes", metavar="NAME=D1,D2,...",
             help="Override an input's shape, in the source layout (repeatable).")
    parser.add_argument("--batch", type=int_at_least(1), metavar="N",
                        help="Batch size for inputs with an unknown batch.")
    parser.add_argument("--signature", default="serving_default", metavar="NAME",
                        help="TensorFlow SavedModel signature.")


def _frontend_options(args):
    from .frontends.base import FrontendOptions

    return FrontendOptions(inputs=_split_names(args.input_names),
                           outputs=_split_names(args.output_names),
                           input_shapes=_parse_shapes(args.input_shapes), batch=args.batch,
                           weights=args.weights, seed=args.seed, signature=args.signature)


def _progress(settings, message: str) -> None:
    """Progress lines only for a person watching a terminal."""
    if settings.verbosity >= 0 and sys.stderr.isatty():
        echo(message, err=True)


def tolerance_arguments(parser) -> None:
    """--atol and --rtol, the same for convert --verify and verify."""
    parser.add_argument("--atol", type=non_negative_float, default=1e-4, metavar="X",
                        help="Absolute tolerance of the comparison.")
    parser.add_argument("--rtol", type=non_negative_float, default=1e-4, metavar="X",
                        help="Relative tolerance of the comparison.")


def convert_arguments(parser) -> None:
    parser.add_argument("sources", nargs="+", metavar="SOURCES",
                        help="Source models: .pb, .pbtxt, .keras, .h5, a SavedModel folder, "
                             ".prototxt or .onnx.")
    parser.add_argument("-o", "--output", type=path_arg(dir_okay=False), metavar="FILE",
                        help="Output .onnx file (one source).")
    parser.add_argument("--output-dir", type=path_arg(file_okay=False), metavar="DIR",
                        help="Output folder (several sources: <dir>/<source name>.onnx).")
    source_arguments(parser)
    parser.add_argument("--domain", choices=["nhwc", "default"], default="nhwc",
                        help="Operator-set domain of dialect ops ('default' = '').")
    add_flag(parser, "--weights-as-constants", help="Weights as Constant nodes.")
    add_flag(parser, "--allow-transpose",
             help="Insert a layout Transpose where NCHW semantics need one (warns per node).")
    add_flag(parser, "--approximate-padding",
             help="Kept for old command lines: no rewrite needs it now (see --strict).")
    add_flag(parser, "--strict",
             help="Refuse rounding-level rewrites too (x/c as x*(1/c), ...): bit-exact only.")
    repeated(parser, "--keep-layout", dest="keep_layout", metavar="NAME[,NAME]",
             help="Keep these graph inputs/outputs in the source's axis order (not NHWC).")
    parser.add_argument("--report", dest="report_path", metavar="PATH",
                        help="Write the conversion report as JSON (several sources: a folder "
                             "that gets one <output name>.report.json per model).")
    add_flag(parser, "--verify", dest="do_verify",
             help="Run source and result on the same inputs and compare.")
    add_flag(parser, "--bisect", help="With --verify: name the first diverging node.")
    tolerance_arguments(parser)
    parser.add_argument("--jobs", type=int_at_least(1), default=1, metavar="N",
                        help="Worker processes for several sources; capped at the number of "
                             "sources and of usable CPUs.")


def convert(settings, args) -> None:
    """Convert TensorFlow, Caffe or ONNX models to the NHWC dialect.

    Nothing is written when a model cannot be converted exactly. Exit codes: 0 ok,
    1 unsupported/invalid, 2 unreadable input, 3 verification failed.
    """
    sources, output, output_dir, framework = args.sources, args.output, args.output_dir, \
        args.framework
    report_path, do_verify, bisect, jobs = args.report_path, args.do_verify, args.bisect, \
        args.jobs
    atol, rtol, keep_layout = args.atol, args.rtol, args.keep_layout
    options = _frontend_options(args)
    flags = {"domain": "" if args.domain == "default" else "nhwc",
             "weights_as_constants": args.weights_as_constants,
             "allow_transpose": args.allow_transpose,
             "approximate_padding": args.approximate_padding, "strict": args.strict,
             "keep_layout": tuple(n for item in keep_layout for n in item.split(",") if n)}
    if len(sources) > 1 or output_dir:
        if output:
            raise UsageError("use --output-dir (not -o) with several sources")
        if not output_dir:
            raise UsageError("several sources need --output-dir")
        from .batch import convert_many

        report_dir = None
        if report_path:
            report_dir = Path(report_path)
            if report_dir.suffix.lower() == ".json" or (report_dir.exists()
                                                        and not report_dir.is_dir()):
                raise UsageError(
                    f"with several sources --report takes a folder (one <output name>"
                    f".report.json per model), not the file '{report_path}'")
        code = convert_many(sources, Path(output_dir), framework, options, flags, jobs,
                            do_verify, atol, rtol, quiet=settings.verbosity < 0,
                            report_dir=report_dir)
        raise SystemExit(code)
    if not output:
        raise UsageError("missing -o/--output")
    from .api import VerifyBeforeWrite, source_files
    from .api import convert as api_convert
    from .outputs import plan_targets
    from .progress import StageReporter, wanted

    source = sources[0]
    targets = [("output", Path(output))] + ([("report", Path(report_path))] if report_path else [])
    plan_targets(targets, source_files(source, options))  # before the (long) conversion
    stages = StageReporter(source, wanted(settings.verbosity < 0))
    check = VerifyBeforeWrite(source, options, atol=atol, rtol=rtol, bisect=bisect,
                              started=lambda: stages("verify")) if do_verify else None
    try:
        result = api_convert(source, output, framework=framework, options=options,
                             progress=stages, before_write=check, **flags)
    except UnsupportedOpError as exc:
        if report_path:  # the refusal and the exact cut, for machines
            _write_json(Path(report_path), refusal_report(source, exc))
        raise
    report = result.report
    for w in report.warnings:
        echo(f"Warning: {w}", err=True)
    verification = check.report if check is not None else None
    code = EXIT_VERIFY_FAILED if verification is not None and not verification.ok else EXIT_OK
    if report_path:
        from .api import write_report

        write_report(Path(report_path), report, verification)
    if settings.verbosity >= 0:
        echo(format_report(report))
        if verification is not None:
            echo(format_verification(verification))
    if code == EXIT_VERIFY_FAILED:
        echo(f"Error: verification failed, so {output} was not written", err=True)
    raise SystemExit(code)


def verify_arguments(parser) -> None:
    parser.add_argument("source", metavar="SOURCE", help="The source model, as given to convert.")
    parser.add_argument("converted", metavar="CONVERTED", type=path_arg(dir_okay=False),
                        help="The dialect model converted from SOURCE.")
    source_arguments(parser)
    repeated(parser, "--input", dest="input_files", metavar="NAME=FILE.npy",
             help="Input value in the source layout (default: seeded random).")
    tolerance_arguments(parser)
    add_flag(parser, "--bisect", "--per-node", dest="bisect",
             help="When outputs differ, name the first node whose output diverges.")
    parser.add_argument("--format", dest="fmt", choices=["text", "json"], default="text",
                        help="Human-readable report or JSON.")


def verify(settings, args) -> None:
    """Compare a converted model with its source on the same inputs (exit 3 if they differ)."""
    from .api import verify as api_verify
    from .npy import load_npy

    source, converted, framework, seed = args.source, args.converted, args.framework, args.seed
    input_files, atol, rtol, bisect, fmt = args.input_files, args.atol, args.rtol, args.bisect, \
        args.fmt
    options = _frontend_options(args)
    feeds = None
    if input_files:
        feeds = {}
        for item in input_files:
            name, sep, file = item.partition("=")
            if not sep:
                raise UsageError(f"'{item}': expected NAME=FILE.npy", param_hint="--input")
            feeds[name] = load_npy(file)
    _progress(settings, "running both models ...")
    report = api_verify(source, converted, framework=framework, options=options, feeds=feeds,
                        seed=seed, atol=atol, rtol=rtol, bisect=bisect)
    if fmt == "json":
        import json

        echo(json.dumps(report.to_dict(), indent=2))
    else:
        echo(format_verification(report))
    raise SystemExit(EXIT_OK if report.ok else EXIT_VERIFY_FAILED)


def info_arguments(parser) -> None:
    parser.add_argument("file", metavar="FILE", help="A source model or a dialect model.")
    parser.add_argument("--framework", choices=["tf", "caffe", "onnx", "dialect"],
                        help="What FILE is (default: from its extension and content).")
    parser.add_argument("--weights", metavar="FILE", help="Caffe: the .caffemodel (or 'random').")
    parser.add_argument("--format", dest="fmt", choices=["text", "json"], default="text",
                        help="Human-readable summary or JSON.")


def info(settings, args) -> None:
    """Inputs, outputs, op histogram, parameter count and size of any supported file."""
    file, framework, weights, fmt = args.file, args.framework, args.weights, args.fmt
    from .api import info as api_info
    from .frontends.base import FrontendOptions

    data = api_info(file, framework, FrontendOptions(weights=weights or "random"))
    if fmt == "json":
        import json

        echo(json.dumps(data, indent=2))
        return
    echo(f"{data['file']}: {data['format']}, {data['bytes']:,} bytes, "
               f"{data['nodes']} nodes, {data['parameters']:,} parameters")
    for kind in ("inputs", "outputs"):
        for v in data[kind]:
            shape = "x".join("?" if d is None else str(d) for d in v["shape"] or []) or "?"
            echo(f"  {kind[:-1]:6} {v['name']}: {v['dtype']} {shape}")
    echo("  ops: " + ", ".join(f"{op} x{n}" for op, n in data["ops"].items()))


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
