"""Acceptance run of the Caffe frontend over a corpus of deploy prototxts, with OpenCV as oracle.

    python benchmarks/caffe_corpus.py /path/to/corpus/caffe [--pipeline] [--only NAME ...]

For every *.prototxt (in each model folder): convert with seeded random weights (or with the
folder's .caffemodel when one sits next to it), write those weights to a temporary
.caffemodel, run OpenCV's Caffe importer on the same files, and compare every net output.
By default the converted core model runs in the numpy reference executor; ``--pipeline`` also
takes it through the dialect passes and runs it with onnxruntime (inputs permuted to NHWC).
Prints a Markdown table: model, result, max error (relative to the output magnitude), ops.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nhwc_onnx.errors import NhwcOnnxError, UnsupportedOpError
from nhwc_onnx.frontends.caffe import load, random_weights
from nhwc_onnx.frontends.caffe.prototxt import inference_layers, read_prototxt
from nhwc_onnx.frontends.caffe.writer import write_caffemodel
from nhwc_onnx.options import ConvertOptions

# Prototxts whose declared input is a placeholder (resized at run time by their apps).
INPUT_OVERRIDES = {
    "openpose_coco/pose_deploy_linevec.prototxt": {"image": [1, 3, 184, 200]},
    "openpose_face/pose_deploy.prototxt": {"image": [1, 3, 184, 200]},
    "openpose_hand/pose_deploy.prototxt": {"image": [1, 3, 184, 200]},
    "openpose_mpi/pose_deploy_linevec.prototxt": {"image": [1, 3, 184, 200]},
    "openpose_mpi/pose_deploy_linevec_faster_4_stages.prototxt": {"image": [1, 3, 184, 200]},
    "opencv_extra_layer__reshape_and_slice_routines/reshape_and_slice_routines.prototxt":
        {"input": [1, 3, 4, 5]},
}
TOLERANCE = 1e-4


def _opencv_outputs(proto: Path, weights: Path, feeds: dict, pins: list[tuple[str, int]]):
    """OpenCV's value of each (layer, top index)."""
    import cv2

    net = cv2.dnn.readNetFromCaffe(str(proto), str(weights))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    for name, array in feeds.items():
        net.setInput(array, name)
    names = list(dict.fromkeys(name for name, _ in pins))
    try:
        outs = dict(zip(names, net.forwardAndRetrieve(names)))
    except cv2.error:
        if len(pins) != 1:
            raise
        return [np.asarray(net.forward())]  # OpenCV could not look the layer up by name
    return [np.asarray(outs[name][index]) for name, index in pins]


def _oracle_prototxt(proto: Path, tmp: Path) -> Path:
    """OpenCV's Axpy scales its third bottom (a*bottom2 + bottom1), where SENet's layer
    computes a*bottom1 + bottom2: hand OpenCV the bottoms swapped so both mean a*x + y."""
    from google.protobuf import text_format

    net = read_prototxt(proto)
    axpy = [layer for layer in net.layer if layer.type == "Axpy"]
    if not axpy:
        return proto
    for layer in axpy:
        layer.bottom[1], layer.bottom[2] = layer.bottom[2], layer.bottom[1]
    out = tmp / f"{proto.stem}.opencv.prototxt"
    out.write_text(text_format.MessageToString(net))
    return out


def _logit_layers(model) -> list[str]:
    """Layers feeding a Softmax output: compared too, since random-weight softmaxes saturate."""
    extra = []
    for v in model.graph.outputs:
        node = v.producer()
        if node is not None and node.op == "Softmax" and node.inputs[0].producer() is not None:
            src = node.inputs[0]
            if "source_layer" in src.meta:
                extra.append(src)
    return extra


def _run_ours(model, feeds: dict, pipeline: bool, keep_layout=()) -> tuple[dict, str]:
    """Outputs (and softmax logits) keyed by the source layer name, and the ops used."""
    if not pipeline:
        from tests.core_reference import run_core

        values = list(model.graph.outputs) + _logit_layers(model)
        results = run_core(model, feeds, extra_outputs=[v.name for v in _logit_layers(model)])
        return {_pin(v): results[v.name] for v in values}, _ops(model)
    from nhwc_onnx.passes.base import PassContext
    from nhwc_onnx.passes.pipeline import to_dialect
    from nhwc_onnx.runtime import run

    layers = [_pin(v) for v in model.graph.outputs]
    in_names = [v.name for v in model.graph.inputs]
    to_dialect(model, PassContext(options=ConvertOptions(keep_layout=keep_layout)))
    nhwc_feeds = {}
    for name in in_names:
        perm = model.io_permutations.get(name)
        x = feeds[name]
        nhwc_feeds[name] = np.ascontiguousarray(x.transpose(perm) if perm else x)
    results = run(model, nhwc_feeds)
    out = {}
    for layer, v in zip(layers, model.graph.outputs):
        y = results[v.name]
        perm = model.io_permutations.get(v.name)
        out[layer] = y.transpose(np.argsort(perm)) if perm else y
    return out, _ops(model)


def _pin(value) -> tuple[str, int]:
    return value.meta["source_layer"], value.meta["source_top"]


def _ops(model) -> str:
    return " ".join(f"{op}x{n}" for op, n in model.graph.op_counts().items())


def check_one(proto: Path, rel: str, pipeline: bool, tmp: Path) -> dict:
    row = {"model": rel, "result": "", "error": "", "ops": "", "seconds": 0.0}
    start = time.time()
    shapes = INPUT_OVERRIDES.get(rel, {})
    real = sorted(proto.parent.glob("*.caffemodel"))
    real = [w for w in real if w.stem == proto.stem] or (real if len(real) == 1 else [])
    try:
        if real:
            weights = real[0]
            row["weights"] = "real"
        else:
            _, blobs = random_weights(proto, ConvertOptions(seed=0, input_shapes=shapes))
            layers = inference_layers(read_prototxt(proto))
            weights = tmp / (proto.stem + ".caffemodel")
            # Like a Caffe snapshot: every layer, with blobs where it has some.
            write_caffemodel(weights, [(layer.name, layer.type, blobs.get(layer.name, []))
                                       for layer in layers])
            row["weights"] = "random"
        model = load(proto, ConvertOptions(weights=str(weights), input_shapes=shapes))
    except UnsupportedOpError as e:
        ops = sorted({p.op for p in e.problems})
        row["result"] = f"refused: unsupported {', '.join(ops)}"
        row["seconds"] = time.time() - start
        return row
    except NhwcOnnxError as e:
        row["result"] = f"refused: {str(e).splitlines()[0]}"
        row["seconds"] = time.time() - start
        return row
    rng = np.random.default_rng(1)
    feeds = {v.name: rng.standard_normal(v.shape).astype(np.float32) for v in model.graph.inputs}
    layers = [_pin(v) for v in model.graph.outputs]
    if not pipeline:
        layers += [_pin(v) for v in _logit_layers(model)]
    try:
        theirs = _opencv_outputs(_oracle_prototxt(proto, tmp), weights, feeds, layers)
    except Exception as e:  # noqa: BLE001 - OpenCV cannot run it: nothing to compare against
        row["result"] = f"converted; OpenCV failed: {str(e).splitlines()[0][:120]}"
        row["ops"] = _ops(model)
        row["seconds"] = time.time() - start
        return row
    try:
        try:
            ours, row["ops"] = _run_ours(model, feeds, pipeline)
        except UnsupportedOpError as e:
            keep = getattr(e, "keep_layout_suggestion", None)
            if not keep:
                raise
            # The layout contract names inputs used in NCHW order: retry as the message says.
            model = load(proto, ConvertOptions(weights=str(weights), input_shapes=shapes))
            ours, row["ops"] = _run_ours(model, feeds, pipeline, keep)
            row["keep_layout"] = keep
    except UnsupportedOpError as e:  # the dialect pipeline has no exact form for some ops
        ops = sorted({p.op for p in e.problems})
        row["result"] = f"refused by the dialect passes: {', '.join(ops)}"
        row["seconds"] = time.time() - start
        return row
    except Exception as e:  # noqa: BLE001 - a crash becomes a FAILED row, not the end
        row["result"] = f"FAILED to run: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
        traceback.print_exc()
        row["seconds"] = time.time() - start
        return row
    worst = 0.0
    for layer, ref in zip(layers, theirs):
        got = ours[layer]
        if got.shape != ref.shape:
            row["result"] = f"MISMATCH: {layer} shape {got.shape} vs OpenCV {ref.shape}"
            row["seconds"] = time.time() - start
            return row
        scale = max(1.0, float(np.max(np.abs(ref))))
        worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - ref))) / scale)
    row["error"] = f"{worst:.2e}"
    row["result"] = "matches" if worst <= TOLERANCE else "MISMATCH"
    if row.get("keep_layout"):
        row["result"] += f" (--keep-layout {','.join(row['keep_layout'])})"
    row["seconds"] = time.time() - start
    return row


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--pipeline", action="store_true",
                        help="also run the dialect pipeline + onnxruntime")
    parser.add_argument("--only", nargs="*", default=None, help="substrings of model paths")
    args = parser.parse_args(argv)
    protos = sorted(args.corpus.glob("*/*.prototxt"))
    if args.only:
        protos = [p for p in protos if any(s in str(p) for s in args.only)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for proto in protos:
            rel = proto.relative_to(args.corpus).as_posix()
            row = check_one(proto, rel, args.pipeline, Path(tmp))
            print(f"{rel}: {row['result']} {row['error']} ({row['seconds']:.1f}s)",
                  file=sys.stderr, flush=True)
            rows.append(row)
    print("| model | weights | result | max error | seconds | ops emitted |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r.get('weights', '-')} | {r['result']} | {r['error'] or '-'} "
              f"| {r['seconds']:.1f} | {r['ops'] or '-'} |")
    bad = [r for r in rows if r["result"].startswith(("MISMATCH", "FAILED"))]
    matched = sum(r["result"].startswith("matches") for r in rows)
    print(f"\n{len(rows)} prototxts: {matched} match OpenCV, "
          f"{sum(r['result'].startswith('refused') for r in rows)} refused, {len(bad)} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
