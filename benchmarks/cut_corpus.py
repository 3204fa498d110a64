"""Acceptance run of the exact cut over refused models of a corpus.

    python benchmarks/cut_corpus.py /path/to/corpus [--only SUBSTRING ...] [--convnext]

For every model (Caffe deploy prototxts with seeded random weights, TensorFlow .pb, ONNX
model.onnx) whose conversion is refused: the suggested ``--outputs``, the fraction of source
nodes the cut converts, and whether following it converts and matches the source runtime on
those outputs (OpenCV for Caffe, TensorFlow, onnxruntime; relative max error <= 1e-4).
``--convnext`` adds Keras ConvNeXtTiny (random weights, 32x32) frozen to a .pb.
Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

from nhwc_onnx.api import convert
from nhwc_onnx.errors import NhwcOnnxError, UnsupportedOpError
from nhwc_onnx.frameworks import load_source
from nhwc_onnx.options import ConvertOptions

TOLERANCE = 1e-4
TF_SHAPES = {"IteratorGetNext": [1, 17, 23, 1], "X": [1, 784], "keep_prob": []}


def discover(corpus: Path) -> list[tuple[Path, str]]:
    found = [(p, "caffe") for p in sorted((corpus / "caffe").glob("*/*.prototxt"))]
    found += [(p, "tf") for p in sorted((corpus / "tf").glob("*/*.pb"))]
    found += [(p, "onnx") for p in sorted((corpus / "onnx").glob("*/model.onnx"))]
    return found


def _options(path: Path, fw: str, tmp: Path) -> ConvertOptions:
    if fw == "caffe":
        from caffe_corpus import INPUT_OVERRIDES

        rel = f"{path.parent.name}/{path.name}"
        return ConvertOptions(weights="random", seed=0,
                               input_shapes=dict(INPUT_OVERRIDES.get(rel, {})))
    if fw == "tf":
        from tf_corpus import SHAPES, SHAPES_BY_GRAPH

        from nhwc_onnx.frontends.tensorflow.reader import read_graphdef

        graph_def, _ = read_graphdef(path)
        placeholders = {n.name for n in graph_def.node if n.op == "Placeholder"}
        shapes = {**SHAPES, **SHAPES_BY_GRAPH.get(path.parent.name, {})}
        # only the placeholders this graph has (an unknown name is refused)
        return ConvertOptions(input_shapes={k: v for k, v in shapes.items()
                                             if k in placeholders})
    return ConvertOptions()


def _random(shape, dtype, rng):
    dtype = np.dtype(dtype or "float32")
    if dtype.kind == "f":
        return rng.uniform(-1, 1, shape).astype(dtype)
    return rng.integers(0, 4, shape).astype(dtype)


def _ours(path: Path, fw: str, options: ConvertOptions, feeds: dict) -> dict:
    """Converted cut's outputs, in the source layout, keyed by source name."""
    import json

    from nhwc_onnx.runtime import run

    model = convert(path, options=options.replace(framework=fw, exact_cut=False)).model
    perms = model.io_permutations
    nhwc = {k: np.ascontiguousarray(v.transpose(perms[k]) if k in perms else v)
            for k, v in feeds.items()}
    outs = run(model, nhwc)
    result = {}
    for entry in json.loads(model.metadata["requested_outputs"]):
        y = outs[entry["name"]]
        if entry["permutation"]:
            y = y.transpose(np.argsort(entry["permutation"]))
        result[entry["source_name"]] = y
    return result


def _oracle_onnx(path: Path, names: list[str], feeds: dict) -> dict:
    import onnx
    import onnxruntime as ort

    proto = onnx.load(str(path))
    declared = {o.name for o in proto.graph.output}
    for name in names:
        if name not in declared:
            proto.graph.output.append(onnx.ValueInfoProto(name=name))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(proto.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return dict(zip(names, session.run(names, feeds)))


def _oracle_tf(path: Path, names: list[str], feeds: dict) -> dict:
    import tensorflow as tf

    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(path.read_bytes())
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")

    def tensor(n):
        return graph.get_tensor_by_name(n if ":" in n else n + ":0")

    with tf.compat.v1.Session(graph=graph) as sess:
        values = sess.run([tensor(n) for n in names], {tensor(k): v for k, v in feeds.items()})
    return dict(zip(names, values))


def _caffe_prepare(path: Path, options: ConvertOptions, tmp: Path):
    """Random weights for the cut's layers, a pruned prototxt OpenCV can run, the pins."""
    from google.protobuf import text_format

    from nhwc_onnx.frontends.caffe import random_weights
    from nhwc_onnx.frontends.caffe.loader import _layers_for
    from nhwc_onnx.frontends.caffe.prototxt import inference_layers, read_prototxt
    from nhwc_onnx.frontends.caffe.writer import write_caffemodel

    _, blobs = random_weights(path, replace(options, weights=None))
    net = read_prototxt(path)
    kept = _layers_for(inference_layers(net), options.outputs)
    weights = tmp / "cut.caffemodel"
    write_caffemodel(weights, [(ly.name, ly.type, blobs.get(ly.name, [])) for ly in kept])
    del net.layer[:]
    net.layer.extend(kept)
    # net-level inputs the cut does not read (e.g. Faster R-CNN's im_info) go too
    read = {b for layer in kept for b in layer.bottom}
    inputs = [(i, name) for i, name in enumerate(net.input) if name in read]
    shapes = [net.input_shape[min(i, len(net.input_shape) - 1)] for i, _ in inputs
              ] if len(net.input_shape) else []
    dims = [list(net.input_dim[4 * i:4 * i + 4]) for i, _ in inputs] if len(net.input_dim) else []
    del net.input[:]
    net.input.extend(name for _, name in inputs)
    shapes = [type(s)(dim=list(s.dim)) for s in shapes]
    del net.input_shape[:]
    net.input_shape.extend(shapes)
    del net.input_dim[:]
    net.input_dim.extend(d for four in dims for d in four)
    pruned = tmp / "cut.prototxt"
    pruned.write_text(text_format.MessageToString(net))
    pins = {}
    for layer in kept:
        for i, top in enumerate(layer.top):
            pins[top] = (layer.name, i)
    return weights, pruned, pins


def _oracle_caffe(pruned: Path, weights: Path, pins: dict, names: list[str], feeds: dict):
    import cv2

    from nhwc_onnx.frontends.caffe.prototxt import read_prototxt

    net = cv2.dnn.readNetFromCaffe(str(pruned), str(weights))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.enableFusion(False)  # a fused in-place layer could not be asked for by name
    declared = set(read_prototxt(pruned).input) | {
        t for layer in read_prototxt(pruned).layer if layer.type == "Input" for t in layer.top}
    for k, v in feeds.items():
        if k in declared:  # an input the cut does not read is not in the pruned net
            net.setInput(np.ascontiguousarray(v), k)
    layers = list(dict.fromkeys(pins[n][0] for n in names))
    outs = dict(zip(layers, net.forwardAndRetrieve(layers)))
    return {n: np.asarray(outs[pins[n][0]][pins[n][1]]) for n in names}


def check(path: Path, fw: str, tmp: Path) -> dict | None:
    """A table row for a refused model; None when it converts."""
    row = {"model": str(path), "refused": "", "cut": "", "fraction": "", "follow": ""}
    options = _options(path, fw, tmp)
    start = time.time()
    try:
        convert(path, options=options.replace(framework=fw))
        return None
    except UnsupportedOpError as exc:
        cut, problems = exc.exact_cut, exc.problems
    except NhwcOnnxError as exc:
        return {**row, "refused": "error: " + str(exc).splitlines()[0][:80], "follow": "-"}
    ops = sorted({p.op for p in problems})
    row["refused"] = f"{len(problems)} ({', '.join(ops)})"
    row["fraction"] = f"{cut.converted}/{cut.total} ({cut.fraction:.0%})"
    if not cut.outputs:
        row["cut"] = f"none: {cut.reason[:90]}"
        row["follow"] = "-"
        return row
    shown = cut.outputs if len(cut.outputs) <= 4 else cut.outputs[:3] + [
        f"... +{len(cut.outputs) - 3}"]
    row["cut"] = ",".join(shown)
    opts = replace(options, outputs=cut.outputs, input_shapes={
        k: v for k, v in options.input_shapes.items() if k not in cut.dropped_shapes})
    try:
        if fw == "caffe":
            weights, pruned, pins = _caffe_prepare(path, opts, tmp)
            opts = replace(opts, weights=str(weights))
        core = load_source(path, fw, opts)
        rng = np.random.default_rng(1)
        feeds = {v.name: _random(v.shape, v.dtype, rng) for v in core.graph.inputs}
        ours = _ours(path, fw, opts, feeds)
        names = list(ours)
        try:
            if fw == "caffe":
                theirs = _oracle_caffe(pruned, weights, pins, names, feeds)
            elif fw == "tf":
                theirs = _oracle_tf(path, names, feeds)
            else:
                theirs = _oracle_onnx(path, names, feeds)
        except Exception as exc:  # noqa: BLE001 - the source runtime cannot run the source
            row["follow"] = (f"converts; the source runtime cannot run the source: "
                             f"{str(exc).splitlines()[0][:80]}")
            return row
        worst = 0.0
        for name in names:
            a, b = np.asarray(ours[name], np.float64), np.asarray(theirs[name], np.float64)
            if a.shape != b.shape:
                raise AssertionError(f"{name}: shape {a.shape} vs {b.shape}")
            scale = max(1.0, float(np.abs(b).max()) if b.size else 1.0)
            worst = max(worst, float(np.abs(a - b).max()) / scale if b.size else 0.0)
        verdict = "converts, matches" if worst <= TOLERANCE else "converts, MISMATCH"
        row["follow"] = f"{verdict} ({worst:.1e}, {len(names)} outputs)"
    except Exception as exc:  # noqa: BLE001 - a row, not the end of the run
        row["follow"] = f"FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
    row["seconds"] = f"{time.time() - start:.1f}"
    return row


def convnext_pb(tmp: Path) -> Path:
    import keras
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    keras.utils.set_random_seed(1)
    model = keras.applications.ConvNeXtTiny(weights=None, input_shape=(32, 32, 3), classes=7,
                                             classifier_activation=None)
    spec = tf.TensorSpec((1, 32, 32, 3), tf.float32, name="x")
    concrete = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec)
    frozen = convert_variables_to_constants_v2(concrete)
    path = tmp / "keras_convnext_tiny.pb"
    path.write_bytes(frozen.graph.as_graph_def().SerializeToString())
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--convnext", action="store_true")
    args = parser.parse_args(argv)
    models = discover(args.corpus)
    if args.only:
        models = [(p, fw) for p, fw in models if any(s in str(p) for s in args.only)]
    print("| model | refused nodes | suggested --outputs | source nodes converted | following it |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if args.convnext:
            models.append((convnext_pb(tmp), "tf"))
        for path, fw in models:
            row = check(path, fw, tmp)
            if row is None:
                continue
            name = str(path.relative_to(args.corpus)) if args.corpus in path.parents else path.name
            print(f"| {name} | {row['refused']} | {row['cut']} | {row['fraction']} | "
                  f"{row['follow']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
