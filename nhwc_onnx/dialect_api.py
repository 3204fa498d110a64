"""The Python API for a finished dialect model: ``run`` it with onnxruntime and ``lower`` it to
standard ONNX (``check`` is in ``nhwc_onnx.api``). The command line's ``run`` and ``lower``
only parse their options, call these and print.

Errors name the parameter at fault (``UsageError.param_hint``: ``feeds``, ``random_inputs``,
``intermediate``), which the command line shows as its own option; like the rest of the
library, a message says the remedy in the command line's words (``--input``, ``--random``).
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import SchemaValidationError, UsageError
from .ir import Model


def load_valid(model: str | os.PathLike | Model) -> Model:
    """A dialect model (a file is read) that breaks no dialect rule; SchemaValidationError
    lists every problem otherwise."""
    from .schemas import validate

    if not isinstance(model, Model):
        from .serialize import load

        path, model = model, load(model)
    else:
        path = ""
    issues = validate(model)
    if issues:
        raise SchemaValidationError(issues, context=os.fspath(path))
    return model


@dataclass
class RunResult:
    """The arrays a run was fed (graph input name -> array, random ones included) and what it
    computed (output or intermediate tensor name -> array)."""

    feeds: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]

    def save(self, folder: str | os.PathLike) -> dict[str, Path]:
        """Each output as <folder>/<name>.npy (see ``save_arrays``); name -> path."""
        return save_arrays(self.outputs, folder)


def run(model: str | os.PathLike | Model,
        feeds: Mapping[str, np.ndarray | str | os.PathLike] | None = None, *,
        random_inputs: bool = False, seed: int = 0,
        intermediate: Sequence[str] = ()) -> RunResult:
    """Run a dialect model (a file or a ``Model``) with onnxruntime.

    ``feeds``: graph input name -> array, or the path of a .npy file holding it; each must have
    the input's element type (never cast) and shape. With ``random_inputs`` every input not
    fed gets seeded standard-normal values (``seed``). ``intermediate`` names internal tensors
    to return as well.
    """
    from . import runtime

    model = load_valid(model)
    given = build_feeds(model, feeds or {}, random_inputs=random_inputs, seed=seed)
    known = {v.name for v in model.graph.values()}
    missing = [t for t in intermediate if t not in known]
    if missing:
        raise UsageError(f"no tensor named {', '.join(map(repr, missing))} in the model",
                         param_hint="intermediate")
    return RunResult(given, runtime.run(model, given, extra_outputs=tuple(intermediate)))


def build_feeds(model: Model, feeds: Mapping[str, np.ndarray | str | os.PathLike], *,
                random_inputs: bool = False, seed: int = 0) -> dict[str, np.ndarray]:
    """Graph input name -> array, in the model's input order: the given arrays (or .npy
    files), and, with ``random_inputs``, seeded standard-normal values for the others."""
    from .npy import load_npy

    declared = {v.name: v for v in model.graph.inputs}
    arrays: dict[str, np.ndarray] = {}
    for name, given in feeds.items():
        if name not in declared:
            raise UsageError(f"the model has no input {name!r} (inputs: {', '.join(declared)})",
                             param_hint="feeds")
        if isinstance(given, (str, os.PathLike)):
            source, array = os.fspath(given), load_npy(given)
        else:
            source, array = "the array", np.asarray(given)
        _check_feed(declared[name], array, source)
        arrays[name] = array
    missing = [v for v in model.graph.inputs if v.name not in arrays]
    if missing and not random_inputs:
        raise UsageError(f"no data for input(s) {', '.join(v.name for v in missing)}; pass "
                         "--input NAME=FILE.npy or --random", param_hint="feeds")
    from .runtime import random_feed

    rng = np.random.default_rng(seed)
    for v in missing:  # bounded: an absurd shape is refused before allocating
        arrays[v.name] = random_feed(v, rng, param_hint="random_inputs")
    return {v.name: arrays[v.name] for v in model.graph.inputs}


def _check_feed(value, array: np.ndarray, source: str) -> None:
    # Refuse rather than cast: a silent float64 -> float32 cast changes the numbers.
    if value.dtype is not None and str(array.dtype) != value.dtype:
        holds = "the file holds" if source != "the array" else "the array is"
        raise UsageError(f"{source}: input {value.name!r} needs {value.dtype}, {holds} "
                         f"{array.dtype}", param_hint="feeds")
    from .runtime import shape_fits

    if not shape_fits(value.shape, array.shape):
        raise UsageError(
            f"{source}: input {value.name!r} needs shape {tuple(value.shape)}, "
            f"{'the file holds' if source != 'the array' else 'the array has'} "
            f"{tuple(array.shape)}", param_hint="feeds")


def save_arrays(arrays: Mapping[str, np.ndarray], folder: str | os.PathLike) -> dict[str, Path]:
    """Save each array as <folder>/<tensor name with unsafe characters replaced>.npy (made
    unique); the folder is created. Returns name -> path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    used: set[str] = set()
    for name, array in arrays.items():
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip(".") or "output"
        candidate, i = stem, 1
        while candidate in used:
            candidate, i = f"{stem}_{i}", i + 1
        used.add(candidate)
        path = folder / f"{candidate}.npy"
        np.save(path, array)
        paths[name] = path
    return paths


@dataclass
class LowerResult:
    """What ``lower`` wrote: the file, its opset and node count, and the layout permutations
    of the graph inputs/outputs (kept from the dialect model)."""

    output: Path
    opset: int
    nodes: int
    io_permutations: dict[str, list[int]]


def lower(model: str | os.PathLike | Model, output: str | os.PathLike) -> LowerResult:
    """Write a dialect model as standard ONNX (opset 17) for any ONNX runtime or viewer.

    Graph inputs and outputs keep their names and NHWC layout; the metadata keeps
    io_permutations and source_names. The output path is checked before any work, as
    convert's is, and written atomically.
    """
    from .outputs import plan_targets
    from .runtime.lower import save_lowered

    out = Path(output)
    sources = [] if isinstance(model, Model) else [Path(model)]
    plan_targets([("output", out)], sources)  # same checks as convert's -o, before any work
    label = "the model" if isinstance(model, Model) else os.fspath(model)
    model = load_valid(model)
    proto = save_lowered(model, out, label=label)  # checked, weights streamed, atomic
    return LowerResult(out, proto.opset_import[0].version, len(proto.graph.node),
                       dict(model.io_permutations))
