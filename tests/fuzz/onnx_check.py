"""Run a generated ONNX graph through onnxruntime (the source oracle) and the oracle's judge."""
from __future__ import annotations

import tempfile
from pathlib import Path

import onnx

from tests.fuzz.onnx_graphs import OnnxGraph
from tests.fuzz.oracle import SYMBOLIC_BATCHES, Verdict, judge


def ort_runner(model: onnx.ModelProto):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    inputs = {i.name for i in session.get_inputs()}
    names = [o.name for o in session.get_outputs()]

    def source_run(feeds: dict) -> dict:
        return dict(zip(names, session.run(names, {k: v for k, v in feeds.items()
                                                   if k in inputs})))

    return source_run


def check_onnx_graph(g: OnnxGraph, workdir: Path | None = None) -> Verdict:
    """Convert and judge; an invalid generated graph (onnxruntime refuses it) is a generator
    bug and raises."""
    source_run = ort_runner(g.model)
    batches = SYMBOLIC_BATCHES if g.batch is None else (g.batch,)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = Path(tmp) / "fuzz.onnx"
        path.write_bytes(g.model.SerializeToString())
        return judge("onnx", path, g.nodes, batches, source_run, g.input_dims)
