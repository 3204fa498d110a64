"""Execute dialect models: lower to standard ONNX, then run with onnxruntime."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import MissingDependencyError, UsageError
from ..ir import Model
from .lower import LOWERED_IR_VERSION, LOWERED_OPSET, lower_model


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
    problems = feed_problems(model, feeds)
    if problems:  # said in the model's terms, before onnxruntime would say it in its own
        raise UsageError("; ".join(problems), param_hint="feeds")
    ort = _onnxruntime()
    proto = lower_model(model, extra_outputs)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    # Keep float arithmetic as written: graph rewrites could change rounding.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [o.name for o in session.get_outputs()]
    # A float64 array for a float32 input is the usual slip; cast to what the graph declares.
    declared = {v.name: v.dtype for v in model.graph.inputs}
    arrays = {k: np.asarray(v, dtype=declared.get(k)) for k, v in feeds.items()}
    results = session.run(names, arrays)
    return dict(zip(names, results))


def shape_fits(declared: Sequence | None, shape: Sequence[int]) -> bool:
    """Whether an array of ``shape`` can feed an input declared ``declared`` (None: any
    shape; a None dimension: any size)."""
    if declared is None:
        return True
    return len(declared) == len(shape) and all(
        d is None or d == n for d, n in zip(declared, shape))


def feed_problems(model: Model, feeds: Mapping[str, np.ndarray]) -> list[str]:
    """What keeps ``feeds`` from running ``model`` (empty: nothing)."""
    inputs = {v.name: v for v in model.graph.inputs}
    problems = [f"no array for input {name!r}" for name in inputs if name not in feeds]
    problems += [f"{name!r} is not an input of the model (inputs: {', '.join(inputs)})"
                 for name in feeds if name not in inputs]
    problems += [f"input {name!r} needs shape {tuple(inputs[name].shape)}, the array has "
                 f"{tuple(np.shape(array))}" for name, array in feeds.items()
                 if name in inputs and not shape_fits(inputs[name].shape, np.shape(array))]
    return problems


__all__ = ["LOWERED_IR_VERSION", "LOWERED_OPSET", "feed_problems", "lower_model", "run",
           "shape_fits"]
