"""Test helpers: write a prototxt + a caffemodel with seeded random weights (built with the
project's own caffe_pb2), and compare the converted model against OpenCV's Caffe runtime."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from nhwc_onnx.frontends.caffe import caffe_pb2 as pb
from nhwc_onnx.frontends.caffe import load, random_weights
from nhwc_onnx.ir import Model
from nhwc_onnx.options import ConvertOptions
from tests.core_reference import run_core


def write_caffemodel_pb(path: Path, blobs_by_layer: dict[str, list[np.ndarray]],
                        types: dict[str, str]) -> None:
    """A binary NetParameter written through caffe_pb2 (independent of the wire reader).

    Like Caffe's own snapshots it lists every layer, with blobs where the layer has some.
    """
    net = pb.NetParameter()
    for name in types:
        blobs = blobs_by_layer.get(name, [])
        layer = net.layer.add()
        layer.name = name
        layer.type = types.get(name, "")
        for array in blobs:
            blob = layer.blobs.add()
            blob.shape.dim.extend(int(d) for d in array.shape)
            blob.data.extend(np.asarray(array, np.float32).ravel().tolist())
    path.write_bytes(net.SerializeToString())


def layer_types(prototxt: str) -> dict[str, str]:
    from google.protobuf import text_format

    net = text_format.Parse(prototxt, pb.NetParameter())
    return {layer.name: layer.type for layer in net.layer}


def make_net(tmp_path: Path, prototxt: str, seed: int = 0, name: str = "net",
             input_shapes: dict | None = None) -> tuple[Path, Path, Model]:
    """Write ``name``.prototxt and a random-weight ``name``.caffemodel; return the model
    loaded back from those two files."""
    proto = tmp_path / f"{name}.prototxt"
    proto.write_text(prototxt)
    opts = ConvertOptions(seed=seed, input_shapes=dict(input_shapes or {}))
    _, blobs = random_weights(proto, opts)
    weights = tmp_path / f"{name}.caffemodel"
    write_caffemodel_pb(weights, blobs, layer_types(prototxt))
    model = load(proto, ConvertOptions(weights=str(weights),
                                        input_shapes=dict(input_shapes or {})))
    return proto, weights, model


def random_feeds(model: Model, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal(v.shape).astype(np.float32) for v in model.graph.inputs}


def opencv_forward(proto: Path, weights: Path, feeds: dict[str, np.ndarray],
                   layers: list) -> list[np.ndarray]:
    """OpenCV's outputs for each entry of ``layers``: a layer name (its first top) or a
    (layer name, top index) pair."""
    net = cv2.dnn.readNetFromCaffe(str(proto), str(weights))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    for name, array in feeds.items():
        net.setInput(np.ascontiguousarray(array), name)
    pins = [p if isinstance(p, tuple) else (p, 0) for p in layers]
    names = list(dict.fromkeys(name for name, _ in pins))
    outs = dict(zip(names, net.forwardAndRetrieve(names)))
    return [np.asarray(outs[name][index]) for name, index in pins]


def source_pins(values) -> list[tuple[str, int]]:
    """(Caffe layer, top index) that produced each value."""
    return [(v.meta["source_layer"], v.meta["source_top"]) for v in values]


def max_rel_error(ours: np.ndarray, theirs: np.ndarray) -> float:
    """Max abs difference relative to the reference's magnitude (at least 1)."""
    scale = max(1.0, float(np.max(np.abs(theirs))) if theirs.size else 1.0)
    return float(np.max(np.abs(ours.astype(np.float64) - theirs))) / scale if ours.size else 0.0


def compare_with_opencv(tmp_path: Path, prototxt: str, seed: int = 0, tol: float = 1e-4,
                        input_shapes: dict | None = None,
                        oracle_prototxt: str | None = None) -> tuple[Model, dict]:
    """Convert, run the core model in numpy and the Caffe net in OpenCV; assert they agree.

    ``oracle_prototxt`` (same layer names and weights) is what OpenCV runs when it spells a
    feature differently from Caffe. Returns the core model and {output: (ours, opencv)}.
    """
    proto, weights, model = make_net(tmp_path, prototxt, seed, input_shapes=input_shapes)
    if oracle_prototxt is not None:
        proto = tmp_path / "oracle.prototxt"
        proto.write_text(oracle_prototxt)
    feeds = random_feeds(model, seed + 1)
    ours = run_core(model, feeds)
    theirs = opencv_forward(proto, weights, feeds, source_pins(model.graph.outputs))
    results = {}
    for v, ref in zip(model.graph.outputs, theirs):
        got = ours[v.name]
        assert got.shape == tuple(ref.shape), (
            f"{v.name}: shape {got.shape} vs OpenCV {ref.shape}")
        got = got.reshape(ref.shape)
        err = max_rel_error(got, ref)
        assert err <= tol, f"{v.name}: max error {err:.3g} vs OpenCV (tolerance {tol})"
        results[v.name] = (got, ref)
    return model, results


def run_with_blobs(tmp_path: Path, prototxt: str, seed: int = 0
                   ) -> tuple[Model, dict[str, list[np.ndarray]], dict, dict[str, np.ndarray]]:
    """Convert through a written caffemodel; return (model, blobs by layer, feeds, outputs by
    producing layer name) for checks against numpy formulas."""
    proto = tmp_path / "net.prototxt"
    proto.write_text(prototxt)
    _, blobs = random_weights(proto, ConvertOptions(seed=seed))
    weights = tmp_path / "net.caffemodel"
    write_caffemodel_pb(weights, blobs, layer_types(prototxt))
    model = load(proto, ConvertOptions(weights=str(weights)))
    feeds = random_feeds(model, seed + 1)
    ours = run_core(model, feeds)
    by_layer = {v.meta["source_layer"]: ours[v.name] for v in model.graph.outputs}
    return model, blobs, feeds, by_layer
