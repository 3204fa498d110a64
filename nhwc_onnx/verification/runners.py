"""Run a source model in its own framework's runtime (imported lazily, each in its extra).

Each runner takes feeds and fetches by *source* tensor names and returns arrays by those names.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..errors import MissingDependencyError, ModelLoadError


def run_source(
    framework: str,
    path: str,
    feeds: Mapping[str, np.ndarray],
    fetches: Sequence[str],
    weights: str | None = None,
) -> dict[str, np.ndarray]:
    if framework == "onnx":
        return run_onnx(path, feeds, fetches)
    if framework == "tf":
        return run_tensorflow(path, feeds, fetches)
    if framework == "caffe":
        return run_caffe(path, weights, feeds, fetches)
    raise ModelLoadError(f"no source runtime for framework '{framework}'")


def run_onnx(path: str, feeds: Mapping[str, np.ndarray], fetches: Sequence[str]) -> dict:
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise MissingDependencyError("onnxruntime", "verify", "verifying an ONNX source") from exc
    import onnx

    model = onnx.load(path)
    model.ir_version = min(model.ir_version, 10)
    outputs = {o.name for o in model.graph.output}
    for name in fetches:
        if name not in outputs:
            model.graph.output.add().name = name  # expose an intermediate tensor
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    results = session.run(list(fetches), dict(feeds))
    return dict(zip(fetches, results))


def _tensor_name(name: str) -> str:
    return name if ":" in name else f"{name}:0"


def run_tensorflow(path: str, feeds: Mapping[str, np.ndarray], fetches: Sequence[str]) -> dict:
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # its kernels have wrong strided convs
        import tensorflow as tf
    except ImportError as exc:
        raise MissingDependencyError("tensorflow-cpu", "tf", "verifying a TensorFlow source") from exc
    graph_def = _frozen_graph_def(path)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as sess:
        feed = {_tensor_name(k): v for k, v in feeds.items()}
        results = sess.run([_tensor_name(f) for f in fetches], feed_dict=feed)
    return dict(zip(fetches, results))


def _frozen_graph_def(path: str):
    """The source as a frozen GraphDef (the TF frontend freezes SavedModel and Keras files)."""
    import tensorflow as tf

    p = Path(path)
    if p.suffix.lower() in (".pb", ".pbtxt") and p.is_file():
        graph_def = tf.compat.v1.GraphDef()
        data = p.read_bytes()
        if p.suffix.lower() == ".pbtxt":
            from google.protobuf import text_format

            text_format.Parse(data.decode("utf-8"), graph_def)
        else:
            graph_def.ParseFromString(data)
        return graph_def
    from ..frontends.base import FrontendOptions
    from ..frontends.tensorflow import savedmodel

    ours, _buffer, _label, _options = savedmodel.load_frozen(str(p), FrontendOptions())
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(ours.SerializeToString())
    return graph_def


def run_caffe(
    prototxt: str, caffemodel: str | None, feeds: Mapping[str, np.ndarray], fetches: Sequence[str]
) -> dict:
    try:
        import cv2
    except ImportError as exc:
        raise MissingDependencyError("opencv-python-headless<5", "verify",
                                     "verifying a Caffe source") from exc
    if caffemodel is None:
        raise ModelLoadError("running a Caffe model needs its .caffemodel (--weights)")
    net = cv2.dnn.readNetFromCaffe(prototxt, caffemodel)
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    for name, value in feeds.items():
        net.setInput(np.ascontiguousarray(value, dtype=np.float32), name)
    results = net.forward(list(fetches))
    return {name: np.asarray(r) for name, r in zip(fetches, results)}
