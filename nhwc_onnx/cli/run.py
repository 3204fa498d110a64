"""``run``: run a dialect model with onnxruntime (``nhwc_onnx.run``) and save its outputs."""
from __future__ import annotations

from pathlib import Path

import click

from ..errors import UsageError
from .common import OUTPUT, PathType, Settings, echo, names_option


@click.command()
@click.argument("model_path", metavar="MODEL", type=PathType(),
                help="A dialect model (.onnx), or a pipeline (its folder).")
@names_option("--input", "-i", "feeds", metavar="NAME=FILE.npy",
              help="Feed a graph input from a .npy file (repeatable).")
@click.option("--random", "random_inputs", is_flag=True,
              help="Feed every input not given with --input from a seeded standard normal.")
@click.option("--seed", type=int, default=0, show_default=True, metavar="N",
              help="Seed for --random.")
@click.option("--batch", type=click.IntRange(min=1), metavar="N",
              help="Batch size of --random inputs for a model with a symbolic batch "
                   "[default: 1, or the batch of the --input arrays].")
@click.option("--output-dir", "-o", type=OUTPUT, metavar="DIR",
              help="Where to save outputs as .npy [default: ./<model name>_outputs].")
@names_option("--intermediate", metavar="TENSOR",
              help="Also save this internal tensor (repeatable).")
@click.pass_obj
def run(settings: Settings, model_path: str, feeds: tuple[str, ...], random_inputs: bool,
        seed: int, batch: int | None, output_dir: str | None,
        intermediate: tuple[str, ...]) -> None:
    """Run a dialect model with onnxruntime and save its outputs as .npy files."""
    from ..dialect.run_lower import run as run_model

    files = {}
    for item in feeds:
        name, sep, file = item.partition("=")
        if not sep or not name or not file:
            raise UsageError(f"expected NAME=FILE.npy, got {item!r}", param_hint="--input")
        files[name] = file
    from ..pipeline import is_pipeline

    if is_pipeline(model_path):
        from .pipeline import run_pipeline

        return run_pipeline(settings, model_path, files, random_inputs, seed, batch, output_dir,
                            intermediate, summary_line)
    out_dir = Path(output_dir) if output_dir else Path(f"{Path(model_path).stem}_outputs")
    result = run_model(model_path, files, random_inputs=random_inputs, seed=seed,
                       batch=batch, intermediate=intermediate, output_dir=out_dir)
    paths = result.paths
    if settings.verbosity >= 0:
        for name, array in result.feeds.items():
            echo(f"input  {summary_line(name, array)}")
        for name, array in result.outputs.items():
            echo(f"output {summary_line(name, array)} -> {paths[name]}")


def summary_line(name: str, array) -> str:
    import numpy as np

    a = np.asarray(array)
    shape = "x".join(str(d) for d in a.shape) or "scalar"
    if a.size == 0:
        return f"{name}: {a.dtype} {shape} (empty)"
    f = a.astype(np.float64)
    return (f"{name}: {a.dtype} {shape}  min {f.min():.6g}  max {f.max():.6g}  "
            f"mean {f.mean():.6g}  std {f.std():.6g}")
