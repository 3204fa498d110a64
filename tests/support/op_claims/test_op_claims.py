"""Every source op of every frontend, held to its claim through the whole pipeline.

The ops are enumerated from the frontends' registries: an op without a case fails here. An op
that claims ``always`` or ``when`` converts a model (satisfying the condition) whose result
computes the source runtime's numbers; a ``never`` op is refused on run-time data; a ``when``
op outside its condition is refused where a case shows it.
"""
from __future__ import annotations

import importlib

import pytest

from nhwc_onnx.passes.to_dialect.op_table import NEVER
from nhwc_onnx.support.claims import frontend_registry
from tests.support.op_claims.harness import Case, check_converts, check_refused, claim

FRAMEWORKS = {"onnx": "onnx_cases", "tf": "tf_cases", "caffe": "caffe_cases"}
HEAVY = {"tf"}  # TensorFlow builds and runs each case: marked slow


def _cases(framework: str) -> dict[str, Case]:
    return importlib.import_module(f"tests.support.op_claims.{FRAMEWORKS[framework]}").CASES


def _params():
    for framework in FRAMEWORKS:
        marks = [pytest.mark.slow, pytest.mark.tf] if framework in HEAVY else []
        for op in frontend_registry(framework).names():
            yield pytest.param(framework, op, id=f"{framework}-{op}", marks=marks)


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_every_source_op_has_a_case_matching_its_claim(framework):
    cases = _cases(framework)
    names = frontend_registry(framework).names()
    assert sorted(cases) == names, (
        f"ops without a case: {sorted(set(names) - set(cases))}; "
        f"cases of no registered op: {sorted(set(cases) - set(names))}")
    converting = [op for op in names if claim(framework, op).converts != NEVER]
    assert [op for op in converting if cases[op].converts is None] == []
    refusing = [op for op in names if claim(framework, op).converts == NEVER]
    assert [op for op in refusing if cases[op].converts is not None
            or cases[op].refused is None] == []


@pytest.mark.parametrize(("framework", "op"), list(_params()))
def test_source_op_keeps_its_claim(tmp_path, framework, op):
    case = _cases(framework)[op]
    if claim(framework, op).converts != NEVER:
        (tmp_path / "converts").mkdir()
        check_converts(framework, op, case.converts(tmp_path / "converts"))
    if case.refused is not None:
        (tmp_path / "refused").mkdir()
        check_refused(framework, op, case.refused(tmp_path / "refused"))
