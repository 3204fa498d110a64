"""Run a source in its own runtime and its converted file through ours, at several batch sizes
of one converted file: the numbers must agree within TOL at each."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

TOL = 1e-4
BATCHES = (1, 3)


def io_permutations(model) -> dict[str, list[int]]:
    raw = model.metadata.get("io_permutations")
    return dict(model.io_permutations) or (json.loads(raw) if raw else {})


def run_converted(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The dialect file run by nhwc_onnx.run on source-layout feeds; outputs in the source
    layout (the permutations the file records)."""
    import nhwc_onnx
    from nhwc_onnx.serialize import load

    model = load(path)
    perms = io_permutations(model)
    ours = {k: np.ascontiguousarray(v.transpose(perms[k])) if k in perms else v
            for k, v in feeds.items()}
    outs = nhwc_onnx.run(path, ours).outputs
    return {k: v.transpose(np.argsort(perms[k])) if k in perms else v for k, v in outs.items()}


def onnxruntime_outputs(source: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def feeds_at(shapes: dict[str, tuple], batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs with axis 0 set to ``batch`` (shapes in the source layout)."""
    rng = np.random.default_rng(seed + batch)
    return {name: rng.uniform(-1, 1, (batch, *shape[1:])).astype(np.float32)
            for name, shape in shapes.items()}


def assert_close(got: dict, want: dict, tol: float = TOL) -> None:
    assert set(want) <= set(got), (sorted(got), sorted(want))
    for name, expected in want.items():
        actual = got[name]
        assert actual.shape == expected.shape, (name, actual.shape, expected.shape)
        scale = max(1.0, float(np.abs(expected).max()))
        err = float(np.abs(actual.astype(np.float64) - expected).max()) / scale
        assert err <= tol, f"{name}: error {err} > {tol}"


def dims(value_info) -> list:
    """A ValueInfoProto's dims: ints, dim_param names, None."""
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in value_info.type.tensor_type.shape.dim]


def run_frozen_graph(data: bytes, x: np.ndarray) -> np.ndarray:
    """A frozen GraphDef (serialized) run by TensorFlow: its tensor y for x."""
    import tensorflow as tf

    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(data)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as session:
        return session.run("y:0", {"x:0": x})
