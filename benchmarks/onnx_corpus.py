"""Acceptance run of the ONNX frontend over a corpus folder (default /work/shared/corpus/onnx).

Each model ends as *matches* (its stored reference outputs, or onnxruntime's on the source model
where none are stored, within 1e-4), *refused* (with the reason), or *mismatch* (a bug).

    python benchmarks/onnx_corpus.py [CORPUS_DIR] [--core] [--only SUBSTRING] [--json OUT]

``--core`` runs the converted core graph with the numpy reference instead of the full pipeline
(passes -> dialect -> runtime). Inputs follow the corpus notes: backend cases use their stored
``test_data_set_0``; ``light__*`` models get ``np.arange(n).reshape(shape) / n`` (unknown dims 1);
``ultraface__*`` get seeded random input and onnxruntime as the oracle.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
import warnings

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "frontends", "onnx"))

from onnx_backend_cases import execute_core, execute_pipeline, graph_input_names, run_case


def _tensors(folder: str, prefix: str) -> list[np.ndarray]:
    files = sorted(glob.glob(os.path.join(folder, f"{prefix}_*.pb")),
                   key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    out = []
    for path in files:
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        out.append(numpy_helper.to_array(t))
    return out


def _input_shape(model: onnx.ModelProto, name: str) -> list[int]:
    for inp in model.graph.input:
        if inp.name == name:
            return [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1
                    for d in inp.type.tensor_type.shape.dim]
    raise KeyError(name)


def _ort_outputs(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    import onnxruntime as ort

    proto = onnx.ModelProto()
    proto.CopyFrom(model)
    proto.ir_version = min(proto.ir_version, 10)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(proto.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in proto.graph.output]
    return session.run(names, feeds)


def load_entry(folder: str):
    """(model, inputs, expected outputs, where the reference comes from)."""
    name = os.path.basename(folder)
    onnx_files = sorted(glob.glob(os.path.join(folder, "*.onnx")))
    model = onnx.load(onnx_files[0])
    if os.path.isdir(os.path.join(folder, "test_data_set_0")):
        data = os.path.join(folder, "test_data_set_0")
        return model, _tensors(data, "input"), _tensors(data, "output"), "stored"
    inputs = []
    for inp in graph_input_names(model):
        shape = _input_shape(model, inp)
        n = int(np.prod(shape))
        if name.startswith("light__"):
            inputs.append((np.arange(n, dtype=np.float32).reshape(shape) / n).astype(np.float32))
        else:
            inputs.append(np.random.default_rng(0).random(shape, dtype=np.float32))
    stored = sorted(glob.glob(os.path.join(folder, "*_output_*.pb")))
    if stored:
        return model, inputs, [_tensors(folder, stored[0].rsplit("_", 1)[0].rsplit(os.sep, 1)[1]
                                        )[0]], "stored"
    feeds = dict(zip(graph_input_names(model), inputs))
    return model, inputs, _ort_outputs(model, feeds), "onnxruntime"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", nargs="?", default="/work/shared/corpus/onnx")
    parser.add_argument("--core", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    executor = execute_core if args.core else execute_pipeline
    rows = []
    for folder in sorted(glob.glob(os.path.join(args.corpus, "*"))):
        if not os.path.isdir(folder) or args.only not in os.path.basename(folder):
            continue
        start = time.perf_counter()
        try:
            model, inputs, outputs, ref = load_entry(folder)
            ops = sorted({n.op_type for n in model.graph.node})
            outcome, detail = run_case(model, inputs, outputs, executor)
        except Exception as exc:  # noqa: BLE001 - a crash is a row to report, not a stop
            ops, ref, outcome, detail = [], "-", "crash", repr(exc)[:200]
        rows.append({"model": os.path.basename(folder), "outcome": outcome, "detail": detail,
                     "reference": ref, "ops": ops,
                     "seconds": round(time.perf_counter() - start, 2)})
        print(f"{outcome:9s} {os.path.basename(folder):60s} {detail[:110]}", flush=True)
    totals: dict[str, int] = {}
    per_op: dict[str, dict[str, int]] = {}
    for row in rows:
        totals[row["outcome"]] = totals.get(row["outcome"], 0) + 1
        for op in row["ops"]:
            slot = per_op.setdefault(op, {})
            slot[row["outcome"]] = slot.get(row["outcome"], 0) + 1
    print("TOTAL", json.dumps(totals))
    for op, counts in sorted(per_op.items()):
        print(f"  {op:24s} {json.dumps(counts)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"totals": totals, "per_op": per_op, "models": rows}, f, indent=1)
    return 1 if totals.get("mismatch") or totals.get("crash") else 0


if __name__ == "__main__":
    sys.exit(main())
