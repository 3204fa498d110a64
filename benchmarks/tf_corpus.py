"""Acceptance run over a folder of frozen TensorFlow graphs (default: ../shared/corpus/tf).

For every .pb/.pbtxt: convert with the TensorFlow frontend, run TensorFlow itself on random
inputs, and compare with (1) the core model run by the numpy reference (an open batch read
as 1) and (2) the NHWC dialect model that ``nhwc_onnx.convert`` writes, run through
onnxruntime - at batch 1 and at batch 3 when it keeps the source's open batch symbolic
("symbolic batch" in the table). Every file must either match or be refused with one clear
reason. Prints a Markdown table.

    python benchmarks/tf_corpus.py [CORPUS_DIR] [--dialect/--no-dialect]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: tests.core_reference

from nhwc_onnx.errors import NhwcOnnxError
from nhwc_onnx.frontends.tensorflow import load
from nhwc_onnx.options import ConvertOptions
from tests.core_reference import run_core

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "tf"
# Inputs of unknown size: the shapes this run feeds (odd sizes on purpose; tf2onnx's own tests
# feed X [1, 784] and a scalar keep_prob, regression's X is [1]). The batch is left open (-1:
# symbolic in the dialect model, 1 in the core model and TensorFlow's batch-1 run).
SHAPES = {"IteratorGetNext": [-1, 17, 23, 1], "X": [-1, 784], "keep_prob": []}
SHAPES_BY_GRAPH = {"tf2onnx__regression": {"X": [-1]}}
TOL = 1e-4
warnings.filterwarnings("ignore", category=RuntimeWarning)  # NaN from sqrt(<0) on random data


def _inputs_for(model, seed: int = 0, batch: int | None = None,
                batch_inputs=()) -> dict[str, np.ndarray]:
    """Random feeds for the core model's inputs; ``batch`` sets axis 0 of ``batch_inputs``."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for v in model.graph.inputs:
        dtype = np.dtype(v.dtype or "float32")
        shape = (batch, *v.shape[1:]) if batch is not None and v.name in batch_inputs \
            else v.shape
        if dtype.kind == "f":
            feeds[v.name] = rng.uniform(-1, 1, shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[v.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            feeds[v.name] = rng.integers(0, 4, shape).astype(dtype)
    return feeds


def run_tensorflow(path: Path, model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import tensorflow as tf

    graph_def = tf.compat.v1.GraphDef()
    data = path.read_bytes()
    if path.suffix == ".pbtxt":
        from google.protobuf import text_format

        text_format.Parse(data.decode(), graph_def)
    else:
        graph_def.ParseFromString(data)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    tf_feeds = {}
    for v in model.graph.inputs:
        tf_feeds[graph.get_tensor_by_name(_tensor(v.meta["source_name"]))] = feeds[v.name]
    fetches = [graph.get_tensor_by_name(_tensor(v.meta["source_name"]))
               for v in model.graph.outputs]
    with tf.compat.v1.Session(graph=graph) as sess:
        return sess.run(fetches, tf_feeds)


def _tensor(source: str) -> str:
    return source if ":" in source else source + ":0"


def compare(got: list, want: list) -> float:
    worst = 0.0
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            raise AssertionError(f"shape {g.shape} != TensorFlow's {w.shape}")
        if w.size == 0:
            continue
        if w.dtype.kind == "f":
            if not np.array_equal(np.isnan(g), np.isnan(w)):
                raise AssertionError("NaN at different positions than TensorFlow's")
            keep = ~np.isnan(w)
            g, w = g[keep], w[keep]
            if w.size == 0:
                continue
        scale = max(1.0, float(np.max(np.abs(w.astype(np.float64)))))
        worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w))) / scale)
    return worst


def _dialect(path: Path, shapes: dict):
    """The dialect model as ``nhwc_onnx.convert`` makes it (the command line's conversion) and
    the inputs that carry a symbolic batch (empty: every batch fixed)."""
    import nhwc_onnx

    result = nhwc_onnx.convert(path, options=ConvertOptions(input_shapes=shapes,
                                                            exact_cut=False))
    batch = result.report.batch
    return result.model, (batch["inputs"] if batch else [])


def run_dialect(model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Run a dialect model on source-layout feeds; outputs back in the source layout."""
    from nhwc_onnx.runtime import run

    perms = model.io_permutations
    ours = {k: v.transpose(perms[k]) if k in perms else v for k, v in feeds.items()}
    outs = run(model, ours)
    result = []
    for v in model.graph.outputs:
        arr = outs[v.name]
        if v.name in perms:
            arr = arr.transpose(np.argsort(perms[v.name]))
        result.append(arr)
    return result


def check(path: Path, use_dialect: bool) -> tuple[str, str]:
    label = path.parent.name
    shapes = {**SHAPES, **SHAPES_BY_GRAPH.get(label, {})}
    try:
        start = time.perf_counter()
        # The frontend alone: an open batch read as 1 (the probe the API varies)
        model = load(path, ConvertOptions(input_shapes=shapes).running(batch_probe=1))
        seconds = time.perf_counter() - start
    except NhwcOnnxError as exc:
        return label, f"refused: {str(exc).splitlines()[0]}"
    feeds = _inputs_for(model)
    try:
        want = run_tensorflow(path, model, feeds)
    except Exception as exc:  # noqa: BLE001 - the source graph itself cannot run
        return label, f"converted; TensorFlow cannot run it: {str(exc).splitlines()[0][:120]}"
    core = run_core(model, feeds)
    try:
        err_core = compare([core[v.name] for v in model.graph.outputs], want)
    except AssertionError as exc:
        return label, f"MISMATCH core: {exc}"
    result = f"core err {err_core:.1e}"
    if use_dialect:
        try:
            names = {v.meta["source_name"].split(":")[0] for v in model.graph.inputs}
            dialect, batch_inputs = _dialect(path, {k: v for k, v in shapes.items()
                                                    if k in names})
        except NhwcOnnxError as exc:
            lines = str(exc).splitlines()
            detail = lines[0] + (f" {lines[1].strip()}" if len(lines) > 1 else "")
            return label, f"{result}; dialect refused: {detail[:300]}"
        err = 0.0
        for batch in (1, 3) if batch_inputs else (None,):
            fed = feeds if batch is None else _inputs_for(model, 0, batch, batch_inputs)
            try:
                err = max(err, compare(run_dialect(dialect, fed),
                                       want if batch is None else run_tensorflow(path, model,
                                                                                 fed)))
            except AssertionError as exc:
                return label, f"MISMATCH dialect (batch {batch}): {exc}"
        result += f"; dialect err {err:.1e}"
        if batch_inputs:
            result += f"; symbolic batch ({', '.join(batch_inputs)}) at 1 and 3"
        if err > TOL:
            return label, "MISMATCH " + result
    if err_core > TOL:
        return label, "MISMATCH " + result
    return label, f"match ({result}; load {seconds * 1000:.0f} ms)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", default=str(DEFAULT_CORPUS))
    parser.add_argument("--no-dialect", action="store_true")
    args = parser.parse_args(argv)
    files = sorted(p for p in Path(args.corpus).glob("*/*") if p.suffix in (".pb", ".pbtxt"))
    bad = 0
    print("| graph | outcome |\n|---|---|")
    for path in files:
        label, outcome = check(path, not args.no_dialect)
        bad += outcome.startswith("MISMATCH")
        print(f"| {label} | {outcome} |", flush=True)
    print(f"\n{len(files)} graphs, {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
