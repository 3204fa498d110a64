"""Run a pipeline: each segment in order on the tensors the earlier ones made (dialect
segments as ``run`` runs a dialect model, standard ones in onnxruntime)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import UsageError
from ..runtime import shape_fits
from .manifest import DIALECT


def run_pipeline(pipeline, feeds: Mapping[str, np.ndarray], extra_outputs: Sequence[str] = ()
                 ) -> dict[str, np.ndarray]:
    """The pipeline's outputs (and ``extra_outputs``: tensors passed between segments) for
    ``feeds``: pipeline input name -> array in the pipeline's layout."""
    from ..runtime import run as run_dialect

    manifest = pipeline.manifest
    inputs = {e.name: e for e in manifest.inputs}
    problems = [f"no array for input {n!r}" for n in inputs if n not in feeds]
    problems += [f"{n!r} is not an input of the pipeline (inputs: {', '.join(inputs)})"
                 for n in feeds if n not in inputs]
    problems += [f"input {n!r} needs shape {tuple(inputs[n].shape)}, the array has "
                 f"{tuple(np.shape(a))}" for n, a in feeds.items()
                 if n in inputs and not shape_fits(inputs[n].shape, np.shape(a))]
    if problems:
        raise UsageError("; ".join(problems), param_hint="feeds")
    produced = {e.name for s in manifest.segments for e in s.outputs}
    unknown = [t for t in extra_outputs if t not in produced]
    if unknown:
        raise UsageError(f"{', '.join(map(repr, unknown))}: not a tensor passed between "
                         "segments", param_hint="extra_outputs")
    env = {n: np.asarray(a, dtype=inputs[n].dtype) for n, a in feeds.items()}
    for seg in manifest.segments:
        model = pipeline.models[seg.file]
        seg_feeds = {e.name: env[e.name] for e in seg.inputs}
        if seg.kind == DIALECT:
            env.update(run_dialect(model, seg_feeds))
        else:
            env.update(_session(pipeline, seg.file, model).run_named(seg_feeds))
    wanted = [e.name for e in manifest.outputs] + [t for t in extra_outputs]
    return {t: env[t] for t in dict.fromkeys(wanted)}


class _Standard:
    def __init__(self, proto):
        try:
            import onnxruntime as ort
        except ImportError as exc:  # pragma: no cover - depends on the environment
            from ..errors import MissingDependencyError

            raise MissingDependencyError("onnxruntime", "verify",
                                         "running a pipeline's standard segment") from exc
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        self.session = ort.InferenceSession(proto.SerializeToString(), options,
                                            providers=["CPUExecutionProvider"])
        self.names = [o.name for o in self.session.get_outputs()]

    def run_named(self, feeds) -> dict:
        return dict(zip(self.names, self.session.run(self.names, dict(feeds))))


def _session(pipeline, file: str, proto) -> _Standard:
    sessions = pipeline.sessions
    if file not in sessions:
        sessions[file] = _Standard(proto)
    return sessions[file]
