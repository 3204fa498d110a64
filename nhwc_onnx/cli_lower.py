"""``lower``: write a dialect model as standard ONNX (what ``nhwc_onnx.runtime`` executes)."""
from __future__ import annotations

from pathlib import Path

from .cli_args import echo, path_arg


def lower_arguments(parser) -> None:
    parser.add_argument("model_path", metavar="MODEL", type=path_arg(dir_okay=False),
                        help="A dialect model (.onnx).")
    parser.add_argument("-o", "--output", required=True, type=path_arg(dir_okay=False),
                        metavar="FILE",
                        help="The standard ONNX file to write.")


def lower(settings, args) -> None:
    """Write a dialect model as standard ONNX (opset 17) for any ONNX runtime or viewer.

    Graph inputs and outputs keep their names and NHWC layout; the metadata keeps
    io_permutations and source_names. Exit 0 ok, 1 invalid model, 2 unreadable input.
    """
    import onnx

    model_path, output = args.model_path, args.output

    from .errors import ConversionBugError, OutputPathError, SchemaValidationError
    from .outputs import plan_targets
    from .runtime.lower import lower_for_export
    from .schemas import validate
    from .serialize import load, save_bytes

    src, out = Path(model_path), Path(output)
    plan_targets([("output", out)], [src])  # same checks as convert's -o, before any work
    model = load(model_path)
    issues = validate(model)
    if issues:
        raise SchemaValidationError(issues, context=model_path)
    proto = lower_for_export(model)
    try:
        data = proto.SerializeToString(deterministic=True)
    except ValueError as exc:  # protobuf's 2 GiB limit
        raise OutputPathError(f"{out}: the lowered model is too large for one file ({exc})") from None
    try:
        onnx.checker.check_model(proto)
    except onnx.checker.ValidationError as exc:
        raise ConversionBugError(f"{model_path}: the lowering is not valid ONNX ({exc})") from None
    save_bytes(data, out)
    if settings.verbosity >= 0:
        echo(f"{model_path} -> {out}: standard ONNX opset {proto.opset_import[0].version}, "
                   f"{len(proto.graph.node)} nodes")
        for name, perm in sorted(model.io_permutations.items()):
            echo(f"  layout: '{name}' permuted {perm} (feed/read it as NHWC)")
