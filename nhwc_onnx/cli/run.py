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


# Elements summarised at a time: the float64 copy of one chunk is 8 MiB, whatever the output.
SUMMARY_CHUNK = 1 << 20


def summary_line(name: str, array) -> str:
    import numpy as np

    a = np.asarray(array)
    shape = "x".join(str(d) for d in a.shape) or "scalar"
    if a.size == 0:
        return f"{name}: {a.dtype} {shape} (empty)"
    low, high, mean, std = summary(a)
    return (f"{name}: {a.dtype} {shape}  min {low:.6g}  max {high:.6g}  "
            f"mean {mean:.6g}  std {std:.6g}")


def summary(a) -> tuple[float, float, float, float]:
    """min, max, mean and standard deviation of a non-empty array, computed in float64 one
    chunk at a time (two passes: the mean, then the squared deviations from it), so the
    memory they take does not grow with the array (a NaN anywhere makes each NaN)."""
    import numpy as np

    flat = a.reshape(-1)  # a view of a contiguous array (runtime outputs are)

    def chunks():
        for i in range(0, flat.size, SUMMARY_CHUNK):
            yield flat[i:i + SUMMARY_CHUNK].astype(np.float64)

    low, high, total = np.inf, -np.inf, 0.0
    for chunk in chunks():
        low, high = np.minimum(low, chunk.min()), np.maximum(high, chunk.max())
        total += chunk.sum()
    mean = total / flat.size
    squares = 0.0
    for chunk in chunks():  # in place: one chunk's copy at a time
        chunk -= mean
        squares += float(np.square(chunk, out=chunk).sum())
    return float(low), float(high), float(mean), float(np.sqrt(squares / flat.size))
