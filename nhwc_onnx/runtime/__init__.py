"""Execute dialect models: lower to standard ONNX, then run with onnxruntime."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..errors import MissingDependencyError, UsageError
from ..ir import Model
from .standard_onnx import LOWERED_IR_VERSION, LOWERED_OPSET, FileReferences, lower_model


def _onnxruntime():
    try:
        import onnxruntime
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError("onnxruntime", "verify", "running a dialect model") from exc
    return onnxruntime


def run(
    model: Model, feeds: Mapping[str, np.ndarray], extra_outputs: Sequence[str] = ()
) -> dict[str, np.ndarray]:
    """Run a dialect model on ``feeds`` (graph input name -> array); outputs by name."""
    if not isinstance(model, Model):  # a path: nhwc_onnx.run reads and checks the file
        raise TypeError(f"model: expected a Model (nhwc_onnx.run takes a path), got "
                        f"{type(model).__name__} {model!r:.60}")
    if not isinstance(feeds, Mapping):
        raise TypeError(f"feeds: expected a mapping input name -> array, got "
                        f"{type(feeds).__name__}")
    listed = not isinstance(extra_outputs, str) and isinstance(extra_outputs, Iterable)
    names = tuple(extra_outputs) if listed else ()
    if not listed or not all(isinstance(t, str) for t in names):
        raise TypeError(f"extra_outputs: expected a sequence of tensor names, got "
                        f"{extra_outputs!r:.60}")
    extra_outputs = names
    problems = feed_problems(model, feeds)
    if problems:  # said in the model's terms, before onnxruntime would say it in its own
        raise UsageError("; ".join(problems), param_hint="feeds")
    ort = _onnxruntime()
    references = FileReferences(model)
    proto = lower_model(model, extra_outputs, weights=references)
    options = ort.SessionOptions()
    # fatal only: onnxruntime's own log lines (colours, raw node names) never reach the
    # terminal; its error comes back as an exception, said in our words
    options.log_severity_level = 4
    # Keep float arithmetic as written: graph rewrites could change rounding.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if references:  # weights read from the model's files, mapped: no copy of them anywhere
        options.add_session_config_entry(
            "session.model_external_initializers_file_folder_path", references.folder)
        # Pre-packing would copy each Conv/Gemm weight into a packed buffer of its size.
        options.add_session_config_entry("session.disable_prepacking", "1")
    session = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    fetched = [o.name for o in session.get_outputs()]
    # A float64 array for a float32 input is the usual slip; cast to what the graph declares.
    declared = {v.name: v.dtype for v in model.graph.inputs}
    arrays = {k: np.asarray(v, dtype=declared.get(k)) for k, v in feeds.items()}
    quiet = ort.RunOptions()
    quiet.log_severity_level = 4
    results = session.run(fetched, arrays, quiet)
    return dict(zip(fetched, results))


# A graph input of more elements than this is an absurd shape (the frontends refuse such
# inputs too: 8 GiB of float32); a random feed for it is refused before anything is allocated.
MAX_RANDOM_FEED_ELEMENTS = 1 << 31


def random_feed(value, rng: np.random.Generator, param_hint: str = "--random",
                batch: int = 1) -> np.ndarray:
    """A standard-normal array from ``rng`` for graph input ``value`` (``run --random``), in
    the input's element type; a symbolic batch (a named axis 0) is ``batch``. UsageError
    (exit 2) before allocating when the shape is not static or absurd, and when memory runs
    out while allocating."""
    shape = at_batch(value.shape, batch)
    if shape is None or any(not isinstance(d, int) or d < 0 for d in shape):
        raise UsageError(f"input {value.name!r} has an unknown dimension {shape}; --random "
                         "needs a static shape, pass --input NAME=FILE.npy",
                         param_hint=param_hint)
    count = math.prod(shape)
    if count > MAX_RANDOM_FEED_ELEMENTS:
        raise UsageError(f"input {value.name!r} has shape {tuple(shape)}: {count:,} elements, "
                         f"more than the {MAX_RANDOM_FEED_ELEMENTS:,} a random feed may have; "
                         "refused before allocating", param_hint=param_hint)
    try:
        return rng.standard_normal(shape).astype(value.dtype or "float32")
    except MemoryError:
        raise UsageError(f"not enough memory for a random input {value.name!r} of shape "
                         f"{tuple(shape)} ({count:,} elements)", param_hint=param_hint) from None


def at_batch(shape: Sequence | None, batch: int) -> tuple | None:
    """``shape`` with a symbolic batch (a named axis 0) set to ``batch``."""
    if shape is None:
        return None
    return tuple(batch if i == 0 and isinstance(d, str) else d for i, d in enumerate(shape))


def shape_fits(declared: Sequence | None, shape: Sequence[int]) -> bool:
    """Whether an array of ``shape`` can feed an input declared ``declared`` (None: any
    shape; a None or named dimension: any size)."""
    if declared is None:
        return True
    return len(declared) == len(shape) and all(
        d is None or isinstance(d, str) or d == n for d, n in zip(declared, shape))


def feed_mismatch(dtype: str | None, shape: Sequence | None, array: np.ndarray
                  ) -> tuple[str, str] | None:
    """Why ``array`` cannot feed an input of ``dtype`` and ``shape`` as it is (nothing is
    cast: a silent float64 -> float32 cast changes the numbers, and a big-endian, text or
    record array is not a tensor at all): (what the input needs, what the array is), or None.
    """
    if dtype is not None and str(array.dtype) != dtype:
        return dtype, str(array.dtype)
    if shape is not None and not shape_fits(shape, array.shape):
        return f"shape {tuple(shape)}", f"shape {tuple(array.shape)}"
    return None


def feed_problems(model: Model, feeds: Mapping[str, np.ndarray]) -> list[str]:
    """What keeps ``feeds`` from running ``model`` (empty: nothing)."""
    inputs = {v.name: v for v in model.graph.inputs}
    problems = [f"no array for input {name!r}" for name in inputs if name not in feeds]
    problems += [f"{name!r} is not an input of the model (inputs: {', '.join(inputs)})"
                 for name in feeds if name not in inputs]
    problems += [f"input {name!r} needs shape {inputs[name].shape}, the array has "
                 f"{tuple(np.shape(array))}" for name, array in feeds.items()
                 if name in inputs and not shape_fits(inputs[name].shape, np.shape(array))]
    # a symbolic batch is one size in every input that names it
    batches: dict[str, dict[str, int]] = {}
    for name, array in feeds.items():
        shape = inputs[name].shape if name in inputs else None
        if shape and isinstance(shape[0], str) and np.ndim(array):
            batches.setdefault(shape[0], {})[name] = np.shape(array)[0]
    for symbol, sizes in batches.items():
        if len(set(sizes.values())) > 1:
            shown = ", ".join(f"{n!r} {b}" for n, b in sizes.items())
            problems.append(f"the batch {symbol!r} must be one size in every input, the "
                            f"arrays have {shown}")
    return problems


__all__ = ["LOWERED_IR_VERSION", "LOWERED_OPSET", "MAX_RANDOM_FEED_ELEMENTS", "at_batch",
           "feed_mismatch", "feed_problems", "lower_model", "random_feed", "run", "shape_fits"]
