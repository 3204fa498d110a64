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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import SchemaValidationError, UsageError
from ..ir import Model
from ..options import path_argument


def load_valid(model: str | os.PathLike | Model) -> Model:
    """A dialect model (a file is read) that breaks no dialect rule; SchemaValidationError
    lists every problem otherwise."""
    from ..schemas import validate

    if not isinstance(model, Model):
        from ..serialize import load

        path, model = model, load(model)
    else:
        path = ""
    issues = validate(model)
    if issues:
        raise SchemaValidationError(issues, context=os.fspath(path))
    return model


@dataclass
class RunResult:
    """The arrays a run was fed (graph input name -> array, random ones included), what it
    computed (output or intermediate tensor name -> array) and, when ``run`` saved them, the
    .npy file of each (name -> path)."""

    feeds: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    paths: dict[str, Path] = field(default_factory=dict)
    read: tuple[Path, ...] = ()  # the files the run read: never overwritten by ``save``

    def save(self, folder: str | os.PathLike) -> dict[str, Path]:
        """Each output as <folder>/<name>.npy (see ``save_arrays``); name -> path."""
        self.paths = save_arrays(self.outputs, folder, inputs=self.read)
        return self.paths


def run(model: str | os.PathLike | Model,
        feeds: Mapping[str, np.ndarray | str | os.PathLike] | None = None, *,
        random_inputs: bool = False, seed: int = 0, batch: int | None = None,
        intermediate: Sequence[str] = (),
        output_dir: str | os.PathLike | None = None) -> RunResult:
    """Run a dialect model (a file or a ``Model``) with onnxruntime.

    ``feeds``: graph input name -> array, or the path of a .npy file holding it; each must have
    the input's element type (never cast) and shape. With ``random_inputs`` every input not
    fed gets seeded standard-normal values (``seed``); a symbolic batch is then ``batch``
    (default: the batch of the arrays given, else 1). ``intermediate`` names internal
    tensors to return as well. With ``output_dir`` every returned tensor is saved there
    (``save_arrays``); its paths are checked before the model runs.
    """
    from .. import runtime

    _check_model(model)
    if feeds is not None and not isinstance(feeds, Mapping):
        raise TypeError(f"feeds: expected a mapping input name -> array or .npy path, got "
                        f"{type(feeds).__name__}")
    if not isinstance(random_inputs, bool):
        raise TypeError(f"random_inputs: expected True or False, got {random_inputs!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed: expected an int, got {type(seed).__name__} {seed!r}")
    intermediate = [intermediate] if isinstance(intermediate, str) else list(intermediate)
    read: tuple[Path, ...] = () if isinstance(model, Model) else (Path(model),)
    model = load_valid(model)
    given = build_feeds(model, feeds or {}, random_inputs=random_inputs, seed=seed,
                        batch=batch)
    read += tuple(Path(f) for f in (feeds or {}).values() if isinstance(f, (str, os.PathLike)))
    known = {v.name for v in model.graph.values()}
    missing = [t for t in intermediate if t not in known]
    if missing:
        raise UsageError(f"no tensor named {', '.join(map(repr, missing))} in the model",
                         param_hint="intermediate")
    paths = {}
    if output_dir is not None:  # checked before running, as convert checks before converting
        names = [v.name for v in model.graph.outputs] + intermediate
        paths = plan_arrays(names, output_dir, inputs=read)
    result = RunResult(given, runtime.run(model, given, extra_outputs=tuple(intermediate)),
                       read=read)
    if output_dir is not None:
        result.paths = write_arrays(result.outputs, paths)
    return result


def _check_model(model) -> None:
    if not isinstance(model, Model):
        path_argument(model, "model", "the path of a dialect model or a Model")


def build_feeds(model: Model, feeds: Mapping[str, np.ndarray | str | os.PathLike], *,
                random_inputs: bool = False, seed: int = 0,
                batch: int | None = None) -> dict[str, np.ndarray]:
    """Graph input name -> array, in the model's input order: the given arrays (or .npy
    files), and, with ``random_inputs``, seeded standard-normal values for the others (a
    symbolic batch: ``batch``, else the given arrays', else 1)."""
    from ..files.npy import load_npy

    declared = {v.name: v for v in model.graph.inputs}
    symbolic = [v for v in model.graph.inputs if v.shape and isinstance(v.shape[0], str)]
    if batch is not None:
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise UsageError(f"{batch!r} is not a batch size (an int >= 1)", param_hint="batch")
        if not symbolic:
            raise UsageError(f"the model's batch is fixed (its inputs: "
                             f"{', '.join(_shape_text(v) for v in model.graph.inputs)}); "
                             "--batch sets a symbolic batch only", param_hint="batch")
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
    from ..runtime import random_feed

    if batch is None:  # the batch of the arrays given, if any
        batch = next((int(np.shape(arrays[v.name])[0]) for v in symbolic
                      if v.name in arrays and np.ndim(arrays[v.name])), 1)
    elif any(v.name in arrays and np.ndim(arrays[v.name]) and np.shape(arrays[v.name])[0] !=
             batch for v in symbolic):
        raise UsageError(f"--batch {batch} differs from the batch of the arrays given",
                         param_hint="batch")
    rng = np.random.default_rng(seed)
    for v in missing:  # bounded: an absurd shape is refused before allocating
        arrays[v.name] = random_feed(v, rng, param_hint="random_inputs", batch=batch)
    return {v.name: arrays[v.name] for v in model.graph.inputs}


def _shape_text(value) -> str:
    return f"{value.name} " + ("x".join(str(d) for d in value.shape or ()) or "?")


def _check_feed(value, array: np.ndarray, source: str) -> None:
    from ..runtime import feed_mismatch

    mismatch = feed_mismatch(value.dtype, value.shape, array)
    if mismatch is not None:
        needs, holds = mismatch
        has = "the file holds" if source != "the array" else (
            "the array has" if needs.startswith("shape") else "the array is")
        raise UsageError(f"{source}: input {value.name!r} needs {needs}, {has} "
                         f"{holds.removeprefix('shape ')}", param_hint="feeds")


def save_arrays(arrays: Mapping[str, np.ndarray], folder: str | os.PathLike, *,
                inputs: Sequence[str | os.PathLike] = ()) -> dict[str, Path]:
    """Save each array as <folder>/<tensor name with unsafe characters replaced>.npy (made
    unique); the folder is created. Returns name -> path.

    The same rules as convert's outputs (``nhwc_onnx.files.writes``), all checked before the first
    write: each path must be absent or a regular file and none of ``inputs`` (the model, its
    .npy feeds); a symlink there is replaced, never written through (the names are derived);
    each file is written to a temp file and renamed (OutputPathError on a full disk or a
    folder we may not write in, and no temp file left)."""
    return write_arrays(arrays, plan_arrays(list(arrays), folder, inputs=inputs))


def plan_arrays(names: Sequence[str], folder: str | os.PathLike, *,
                inputs: Sequence[str | os.PathLike] = ()) -> dict[str, Path]:
    """Tensor name -> <folder>/<safe name>.npy, every path checked (see ``save_arrays``)."""
    from ..files.writes import fitted, plan_targets

    folder = Path(folder)
    paths: dict[str, Path] = {}
    used: set[str] = set()
    for name in names:
        # a long tensor name is cut short with a hash of it: a file name has 255 bytes at most
        stem = fitted(re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip(".") or "output", ".npy",
                      reserve=8)[:-len(".npy")]
        candidate, i = stem, 1
        while candidate in used:
            candidate, i = f"{stem}_{i}", i + 1
        used.add(candidate)
        paths[name] = folder / f"{candidate}.npy"
    plan_targets([("output", p) for p in paths.values()], [Path(p) for p in inputs],
                 follow_symlinks=False)
    return paths


def write_arrays(arrays: Mapping[str, np.ndarray], paths: Mapping[str, Path]
                 ) -> dict[str, Path]:
    """Write each array to its planned path (``plan_arrays``), atomically: all of them, or
    none when one cannot be written."""
    from ..files.writes import all_or_nothing, atomic_write

    with all_or_nothing():
        for name, array in arrays.items():
            def write(handle, array=array) -> None:
                np.save(handle, np.asarray(array), allow_pickle=False)

            atomic_write(paths[name], write, "output", follow_symlinks=False)
    return {name: paths[name] for name in arrays}


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
    from ..files.writes import plan_targets
    from ..runtime.standard_onnx import save_lowered

    _check_model(model)
    out = Path(path_argument(output, "output", "the path of the .onnx file to write"))
    sources = [] if isinstance(model, Model) else [Path(model)]
    plan_targets([("output", out)], sources)  # same checks as convert's -o, before any work
    label = "the model" if isinstance(model, Model) else os.fspath(model)
    model = load_valid(model)
    proto = save_lowered(model, out, label=label)  # checked, weights streamed, atomic
    return LowerResult(out, proto.opset_import[0].version, len(proto.graph.node),
                       dict(model.io_permutations))
