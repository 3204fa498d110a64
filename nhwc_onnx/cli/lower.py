"""``lower``: write a dialect model as standard ONNX (``nhwc_onnx.lower``)."""
from __future__ import annotations

import click

from .common import OUTPUT, PathType, Settings, echo


@click.command()
@click.argument("model_path", metavar="MODEL", type=PathType(),
                help="A dialect model (.onnx), or a pipeline (its folder).")
@click.option("-o", "--output", required=True, type=OUTPUT, metavar="FILE",
              help="The standard ONNX file to write.")
@click.pass_obj
def lower(settings: Settings, model_path: str, output: str) -> None:
    """Write a dialect model as standard ONNX (opset 17) for any ONNX runtime or viewer.

    Graph inputs and outputs keep their names and NHWC layout; the metadata keeps
    io_permutations and source_names. Exit 0 ok, 1 invalid model, 2 unreadable input.
    """
    from ..dialect.run_lower import lower as lower_model
    from ..pipeline import is_pipeline

    if is_pipeline(model_path):
        from .pipeline import lower_pipeline

        return lower_pipeline(settings, model_path, output)

    result = lower_model(model_path, output)
    if settings.verbosity >= 0:
        echo(f"{model_path} -> {result.output}: standard ONNX opset {result.opset}, "
             f"{result.nodes} nodes")
        for name, perm in sorted(result.io_permutations.items()):
            echo(f"  layout: '{name}' permuted {perm} (feed/read it as NHWC)")
