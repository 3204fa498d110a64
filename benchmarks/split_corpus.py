"""--split over the refused models of a corpus (ONNX, TensorFlow and Caffe).

    python benchmarks/split_corpus.py CORPUS [--framework onnx tf caffe] [--only SUBSTRING ...]

For every model whose plain conversion is refused: the split (segments by kind, share of MACs in
dialect segments, bytes passed between segments per sample), the end-to-end verification against
the source's runtime (onnxruntime, TensorFlow, OpenCV; 1e-4; a backend test's stored inputs when
it has them), and the time of ``--split`` against the refused plain conversion. ONNX models are
``onnx/*/*.onnx``; TF graphs ``tf/*/*.pb`` with the input shapes ``tf_corpus.py`` feeds; Caffe
nets ``caffe/*/*.prototxt`` with their caffemodel, or seeded random weights as
``caffe_corpus.py`` writes them. Prints a Markdown table and a summary per framework.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nhwc_onnx.api import convert
from nhwc_onnx.errors import NhwcOnnxError, UnsupportedOpError
from nhwc_onnx.options import ConvertOptions


def stored_inputs(path: Path):
    """The backend test's own inputs (``test_data_set_0/input_<i>.pb``, in graph input order)
    when it has them: random values do not fit shape, index and axis inputs."""
    import onnx
    from onnx import numpy_helper

    folder = path.parent / "test_data_set_0"
    if not folder.is_dir():
        return None
    model = onnx.load(str(path), load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    feeds = {}
    for k, name in enumerate(names):
        tensor = onnx.TensorProto()
        tensor.ParseFromString((folder / f"input_{k}.pb").read_bytes())
        feeds[name] = numpy_helper.to_array(tensor)
    return feeds


def onnx_models(corpus: Path, tmp: Path):
    for path in sorted((corpus / "onnx").glob("*/*.onnx")):
        name = path.parent.name if path.name == "model.onnx" else f"{path.parent.name}/{path.name}"
        yield name, path, ConvertOptions(), stored_inputs(path)


def tf_models(corpus: Path, tmp: Path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    from tf_corpus import SHAPES, SHAPES_BY_GRAPH

    from nhwc_onnx.frontends.tensorflow import load

    for path in sorted(p for p in (corpus / "tf").glob("*/*") if p.suffix in (".pb", ".pbtxt")):
        shapes = {**SHAPES, **SHAPES_BY_GRAPH.get(path.parent.name, {})}
        try:
            model = load(path, ConvertOptions(input_shapes=shapes).running(batch_probe=1))
        except NhwcOnnxError:
            names = set()
        else:
            names = {v.meta["source_name"].split(":")[0] for v in model.graph.inputs}
        yield path.parent.name, path, ConvertOptions(
            input_shapes={k: v for k, v in shapes.items() if k in names}), None


def caffe_models(corpus: Path, tmp: Path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    from caffe_corpus import INPUT_OVERRIDES

    from nhwc_onnx.frontends.caffe import random_weights
    from nhwc_onnx.frontends.caffe.prototxt import inference_layers, read_prototxt
    from nhwc_onnx.frontends.caffe.writer import write_caffemodel

    for proto in sorted((corpus / "caffe").glob("*/*.prototxt")):
        rel = f"{proto.parent.name}/{proto.name}"
        shapes = INPUT_OVERRIDES.get(rel, {})
        real = sorted(proto.parent.glob("*.caffemodel"))
        real = [w for w in real if w.stem == proto.stem] or (real if len(real) == 1 else [])
        if real:
            weights = real[0]
        else:
            try:
                _, blobs = random_weights(proto, ConvertOptions(seed=0, input_shapes=shapes))
            except NhwcOnnxError:
                weights = proto  # refused without weights too: the row says so
            else:
                weights = tmp / f"{proto.parent.name}_{proto.stem}.caffemodel"
                write_caffemodel(weights, [(layer.name, layer.type, blobs.get(layer.name, []))
                                           for layer in inference_layers(read_prototxt(proto))])
        yield rel, proto, ConvertOptions(weights=str(weights), input_shapes=shapes), None


FRAMEWORKS = {"onnx": onnx_models, "tf": tf_models, "caffe": caffe_models}


def split_row(name: str, path: Path, options: ConvertOptions, feeds, counts: dict
              ) -> str | None:
    """The table row of a refused model (None when it converts or fails otherwise)."""
    t0 = time.perf_counter()
    try:
        convert(path, options=options.replace(exact_cut=False))
        counts["converts"] += 1
        return None
    except UnsupportedOpError:
        plain = time.perf_counter() - t0
        counts["refused"] += 1
    except NhwcOnnxError as exc:
        counts["error"] += 1
        return f"| {name} | fails: {str(exc).splitlines()[0][:90]} | | | | |"
    t1 = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            pipeline = convert(path, Path(tmp) / "out", options=options, split=True)
        seconds = time.perf_counter() - t1
    except Exception as exc:  # noqa: BLE001 - a row says what happened
        counts["not split"] += 1
        lines = str(exc).splitlines()
        detail = " ".join(line.strip() for line in lines[:2])
        return f"| {name} | not split: {detail[:160]} | | | | |"
    counts["split"] += 1
    c = pipeline.costs()
    kinds = c["segments_by_kind"]
    share = "-" if c["dialect_mac_share"] is None else f"{100 * c['dialect_mac_share']:.1f}%"
    try:
        report = pipeline.verify(path, options, feeds=feeds)
        worst = max((x.max_abs_error for x in report.outputs), default=0.0)
        verdict = f"{'MATCH' if report.ok else 'MISMATCH'} ({worst:.1e})"
        counts["match"] += report.ok
    except Exception as exc:  # noqa: BLE001
        verdict = f"cannot verify: {str(exc).splitlines()[0][:70]}"
    return (f"| {name} | {kinds['dialect']} / {kinds['onnx']} | {share} | "
            f"{c['bytes_between_segments_per_sample']:,} | {verdict} | "
            f"{seconds:.2f} s vs {plain:.2f} s |")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--framework", nargs="*", default=list(FRAMEWORKS))
    parser.add_argument("--only", nargs="*", default=[])
    args = parser.parse_args()
    for framework in args.framework:
        counts = dict.fromkeys(("models", "converts", "refused", "error", "split", "not split",
                                "match"), 0)
        print(f"\n## {framework}\n")
        print("| model | segments dialect / standard | MACs in dialect | bytes passed per "
              "sample | verify | --split vs plain (refused) |")
        print("|---|---|---|---|---|---|", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            for name, path, options, feeds in FRAMEWORKS[framework](args.corpus, Path(tmp)):
                if args.only and not any(s in str(path) for s in args.only):
                    continue
                counts["models"] += 1
                row = split_row(name, path, options.replace(framework=framework), feeds,
                                counts)
                if row:
                    print(row, flush=True)
        print(f"\n{framework}: {counts['models']} models: {counts['converts']} convert, "
              f"{counts['refused']} refused ({counts['split']} split, {counts['match']} of them "
              f"match, {counts['not split']} not split), {counts['error']} other errors",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
