"""Run one ONNX backend test case through the ONNX frontend and compare numbers.

Policy for graph inputs that the frontend needs as constants (ONNX test cases feed weights,
shapes, axes, scales ... as inputs): first try with only non-float inputs pinned as constants
(``ConvertOptions.constant_inputs``); if that is refused, pin every input but the first. The stored
input values are used either way, so the numbers compared are the test's own.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import numpy_helper

from nhwc_onnx.errors import ConversionBugError, NhwcOnnxError, UnsupportedOpError
from nhwc_onnx.frontends.onnx import load_proto
from nhwc_onnx.options import ConvertOptions

TOLERANCE = 1e-4


def graph_input_names(proto: onnx.ModelProto) -> list[str]:
    inits = {t.name for t in proto.graph.initializer}
    return [i.name for i in proto.graph.input if i.name not in inits]


def as_arrays(tensors: list) -> list:
    """Stored test tensors as numpy arrays (some cases store TensorProto objects)."""
    out = []
    for t in tensors:
        if isinstance(t, onnx.TensorProto):
            t = numpy_helper.to_array(t)
        elif isinstance(t, (np.ndarray, np.generic, int, float, bool)):
            t = np.asarray(t)
        out.append(t)
    return out


def _attempts(proto, inputs):
    names = graph_input_names(proto)
    arrays = dict(zip(names, inputs))
    non_float = {n: a for n, a in arrays.items()
                 if isinstance(a, np.ndarray) and a.dtype != np.float32}
    yield non_float
    if len(names) > 1:
        rest = {n: arrays[n] for n in names[1:] if isinstance(arrays[n], np.ndarray)}
        if set(rest) != set(non_float):
            yield rest


def _with_keep_layout(attempts):
    """Each attempt as (pinned, keep_layout=None); after a refusal that names inputs to keep in
    source order (the layout contract's --keep-layout hint), that attempt again with them kept,
    as a user following the message would."""
    for pinned in attempts:
        _with_keep_layout.retry = None
        yield pinned, None
        if _with_keep_layout.retry is not None:
            yield _with_keep_layout.retry
            _with_keep_layout.retry = None


def compare(expected: np.ndarray, got: np.ndarray) -> tuple[bool, float]:
    expected, got = np.asarray(expected), np.asarray(got)
    if expected.shape != got.shape:
        return False, float("inf")
    if expected.size == 0:
        return True, 0.0
    if expected.dtype.kind in "biu":
        return bool(np.array_equal(expected, got)), float(np.max(np.abs(
            expected.astype(np.float64) - got.astype(np.float64))))
    e, g = expected.astype(np.float64), got.astype(np.float64)
    same_nan = np.isnan(e) == np.isnan(g)
    finite = ~np.isnan(e)
    err = np.abs(e - g)
    err = np.where(np.isinf(e) & (e == g), 0.0, err)
    ok = same_nan.all() and bool(np.all(err[finite] <= TOLERANCE * (1 + np.abs(e[finite]))))
    return ok, float(np.max(err[finite])) if finite.any() else 0.0


def run_case(proto: onnx.ModelProto, inputs: list, outputs: list,
             execute: Callable, float32_only: bool = True) -> tuple[str, str]:
    """(outcome, detail): outcome is 'matches', 'refused', 'bug' or 'mismatch'.

    'bug' is a ConversionBugError (the pipeline produced an invalid model): not wrong numbers,
    but not a reasoned refusal either, so it is counted apart.

    ``execute(core_model, feeds) -> {output name: array}`` runs the converted model on the
    source-layout feeds (core reference, or pipeline + runtime with permutations applied).
    """
    last_refusal = ""
    bug = ""
    inputs, outputs = as_arrays(inputs), as_arrays(outputs)
    for pinned, keep in _with_keep_layout(_attempts(proto, inputs)):
        options = ConvertOptions().running(constant_inputs=pinned)
        try:
            model = load_proto(proto, options, float32_only=float32_only)
            names = [v.name for v in model.graph.inputs]
            arrays = dict(zip(graph_input_names(proto), inputs))
            feeds = {n: arrays[n] for n in names}
            results = execute(model, feeds, **({"keep_layout": keep} if keep else {}))
        except UnsupportedOpError as exc:
            last_refusal = f"{type(exc).__name__}: {str(exc).splitlines()[-1].strip()}"
            suggestion = getattr(exc, "keep_layout_suggestion", None)
            if suggestion and not keep:
                _with_keep_layout.retry = (pinned, suggestion)
            continue
        except ConversionBugError as exc:
            bug = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            continue
        except NhwcOnnxError as exc:
            last_refusal = f"{type(exc).__name__}: {str(exc).splitlines()[-1].strip()}"
            continue
        worst = 0.0
        for out_proto, expected in zip(proto.graph.output, outputs):
            got = results.get(out_proto.name)
            if got is None:
                return "mismatch", f"output '{out_proto.name}' missing"
            ok, err = compare(expected, got)
            if not ok:
                return "mismatch", f"output '{out_proto.name}' max error {err:.3g}"
            worst = max(worst, err)
        return "matches", f"max error {worst:.3g}"
    if bug:
        return "bug", bug
    return "refused", last_refusal


# -- the case collection ---------------------------------------------------------------------
DATA_SUITES = ("pytorch-converted", "pytorch-operator", "simple")


def _read_tensors(folder, prefix: str) -> list | None:
    import glob
    import os

    files = sorted(glob.glob(os.path.join(folder, f"{prefix}_*.pb")),
                   key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    out = []
    for path in files:
        tensor = onnx.TensorProto()
        with open(path, "rb") as f:
            tensor.ParseFromString(f.read())
        if not tensor.dims and not tensor.raw_data and tensor.data_type == 0:
            return None  # a sequence / optional value, not a tensor
        out.append(numpy_helper.to_array(tensor))
    return out


def iter_cases():
    """(suite/name, model, inputs, outputs) for ONNX node cases and the wheel's data suites."""
    import os
    import warnings

    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node_cases.collect_testcases()
    for case in cases:
        inputs, outputs = case.data_sets[0]
        yield f"node/{case.name}", case.model, list(inputs), list(outputs)
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    for suite in DATA_SUITES:
        for name in sorted(os.listdir(os.path.join(root, suite))):
            folder = os.path.join(root, suite, name)
            model = onnx.load(os.path.join(folder, "model.onnx"))
            data = os.path.join(folder, "test_data_set_0")
            inputs, outputs = _read_tensors(data, "input"), _read_tensors(data, "output")
            yield f"{suite}/{name}", model, inputs, outputs


def run_all(execute: Callable) -> dict[str, dict]:
    """Outcome per case: {"outcome", "detail", "ops"}. The core executor also takes non-float
    models (the frontend alone is under test there)."""
    float32_only = execute is not execute_core
    results = {}
    for name, model, inputs, outputs in iter_cases():
        ops = sorted({n.op_type for n in model.graph.node})
        if inputs is None or outputs is None:
            results[name] = {"outcome": "refused", "detail": "non-tensor test data", "ops": ops}
            continue
        outcome, detail = run_case(model, inputs, outputs, execute, float32_only)
        results[name] = {"outcome": outcome, "detail": detail, "ops": ops}
    return results


def per_op_counts(results: dict[str, dict]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for entry in results.values():
        for op in entry["ops"]:
            slot = counts.setdefault(op, {})
            slot[entry["outcome"]] = slot.get(entry["outcome"], 0) + 1
    return dict(sorted(counts.items()))


def execute_core(model, feeds):
    """Numpy reference executor of the core graph (no passes)."""
    from tests.core_reference import run_core

    return run_core(model, feeds)


def execute_pipeline(model, feeds, keep_layout=()):
    """Passes to the dialect, then the runtime; feeds/outputs permuted per io_permutations."""
    from nhwc_onnx.passes.base import PassContext
    from nhwc_onnx.passes.pipeline import to_dialect
    from nhwc_onnx.runtime import run

    to_dialect(model, PassContext(options=ConvertOptions(keep_layout=keep_layout)))
    perms = model.io_permutations
    ours = {n: np.transpose(a, perms[n]) if perms.get(n) else a for n, a in feeds.items()}
    results = run(model, ours)
    back = {}
    for name, array in results.items():
        perm = perms.get(name)
        back[name] = np.transpose(array, np.argsort(perm)) if perm else array
    return back


BASELINE_FILE = "backend_baseline.json"


def regressions(results: dict[str, dict], baseline: dict[str, str]) -> list[str]:
    """Cases the baseline records as matching that no longer match."""
    return [f"{name}: {results[name]['outcome']} ({results[name]['detail']})"
            for name, outcome in sorted(baseline.items())
            if outcome == "matches" and name in results
            and results[name]["outcome"] != "matches"]


if __name__ == "__main__":  # regenerate the baseline: python onnx_backend_cases.py
    import json
    from pathlib import Path

    path = Path(__file__).parent / BASELINE_FILE
    baseline: dict[str, object] = {"totals": {}}
    for label, executor in (("core", execute_core), ("pipeline", execute_pipeline)):
        results = run_all(executor)
        totals: dict[str, int] = {}
        for v in results.values():
            totals[v["outcome"]] = totals.get(v["outcome"], 0) + 1
        baseline["totals"][label] = totals
        baseline[f"{label}_matches"] = sorted(
            n for n, v in results.items() if v["outcome"] == "matches")
        print(label, json.dumps(totals))
        for name, v in results.items():
            if v["outcome"] in ("mismatch", "bug"):
                print(" ", v["outcome"].upper(), name, v["detail"][:160])
    path.write_text(json.dumps(baseline, indent=1) + "\n")
