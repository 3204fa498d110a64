"""--split over the refused ONNX models of a corpus.

    python benchmarks/split_corpus.py /path/to/corpus [--only SUBSTRING ...]

For every ONNX model (``*/*.onnx``) whose plain conversion is refused: the split (segments by kind,
share of MACs in dialect segments, bytes passed between segments per sample), the end-to-end
verification against onnxruntime (1e-4; a backend test's stored inputs when it has them), and the
time of ``--split`` against the refused plain conversion. Prints a Markdown table and a summary.
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--only", nargs="*", default=[])
    args = parser.parse_args()
    models = sorted((args.corpus / "onnx").glob("*/*.onnx"))
    if args.only:
        models = [m for m in models if any(s in str(m) for s in args.only)]
    rows, counts = [], {"converts": 0, "refused": 0, "error": 0, "split": 0, "match": 0}
    for path in models:
        name = path.parent.name if path.name == "model.onnx" else f"{path.parent.name}/{path.name}"
        t0 = time.perf_counter()
        try:
            convert(path, options=ConvertOptions(exact_cut=False))
            counts["converts"] += 1
            continue
        except UnsupportedOpError:
            plain = time.perf_counter() - t0
            counts["refused"] += 1
        except NhwcOnnxError:
            counts["error"] += 1
            continue
        t1 = time.perf_counter()
        try:
            with tempfile.TemporaryDirectory() as tmp:
                pipeline = convert(path, Path(tmp) / "out", split=True)
            seconds = time.perf_counter() - t1
        except Exception as exc:  # noqa: BLE001 - a row says what happened
            rows.append(f"| {name} | split fails: {type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:90]} | | | | |")
            continue
        counts["split"] += 1
        c = pipeline.costs()
        kinds = c["segments_by_kind"]
        share = "-" if c["dialect_mac_share"] is None else f"{100 * c['dialect_mac_share']:.1f}%"
        try:
            report = pipeline.verify(path, feeds=stored_inputs(path))
            worst = max((x.max_abs_error for x in report.outputs), default=0.0)
            verdict = f"{'MATCH' if report.ok else 'MISMATCH'} ({worst:.1e})"
            counts["match"] += report.ok
        except Exception as exc:  # noqa: BLE001
            verdict = f"cannot verify: {str(exc).splitlines()[0][:70]}"
        rows.append(f"| {name} | {kinds['dialect']} / {kinds['onnx']} | {share} | "
                    f"{c['bytes_between_segments_per_sample']:,} | {verdict} | "
                    f"{seconds:.2f} s vs {plain:.2f} s |")
    print("| model | segments dialect / standard | MACs in dialect | bytes passed per sample "
          "| verify | --split vs plain (refused) |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\n{len(models)} models: {counts['converts']} convert, {counts['refused']} refused "
          f"({counts['split']} split, {counts['match']} of them match), {counts['error']} "
          "other errors")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
