"""Execute dialect models: lower to standard ONNX, then run with onnxruntime."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import MissingDependencyError
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


__all__ = ["LOWERED_IR_VERSION", "LOWERED_OPSET", "lower_model", "run"]
