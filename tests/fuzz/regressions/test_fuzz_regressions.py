"""Each failure the fuzzer found, as a named graph: converts exactly, or is refused only as
the ``ops`` table says. A class another change is fixing is a strict xfail while its
generator switch is off (tests/fuzz/onnx_graphs.py ENABLED): it fails loudly once fixed."""
from __future__ import annotations

import pytest

from tests.fuzz.onnx_check import check_onnx_graph
from tests.fuzz.onnx_graphs import ENABLED
from tests.fuzz.regressions import onnx_cases


def _pending(cases, name: str, enabled) -> list:
    switch = cases.PENDING.get(name)
    if switch and switch not in enabled:
        return [pytest.mark.xfail(strict=True, reason=f"pending fix: '{switch}'")]
    return []


def _params():
    for name in onnx_cases.CASES:
        yield pytest.param(name, marks=_pending(onnx_cases, name, ENABLED), id=name)


def _tf_params():
    from tests.fuzz import tf_graphs
    from tests.fuzz.regressions import tf_cases

    for name in tf_cases.CASES:
        marks = [pytest.mark.tf, *_pending(tf_cases, name, tf_graphs.ENABLED)]
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_params()))
def test_fuzz_regression_converts_exactly_or_is_refused_as_claimed(tmp_path, name):
    verdict = check_onnx_graph(onnx_cases.CASES[name](), tmp_path)
    assert not verdict.failures, "\n".join(verdict.failures)


@pytest.mark.parametrize("name", ["batchnorm_of_channel_reduced_map",
                                  "ceil_pool_whose_last_window_starts_past_the_input"])
def test_fuzz_regression_now_converts(tmp_path, name):
    verdict = check_onnx_graph(onnx_cases.CASES[name](), tmp_path)
    assert verdict.converted and not verdict.failures, verdict


@pytest.mark.parametrize("name", ["nonzero_pad_under_symbolic_batch",
                                  "full_map_constant_divisor_under_symbolic_batch",
                                  "average_pool_divisor_fix_under_symbolic_batch"])
def test_symbolic_batch_refusal_is_the_tables_note_and_batch_converts(tmp_path, name):
    from tests.fuzz.oracle import SYMBOLIC_BATCH_NOTE

    verdict = check_onnx_graph(onnx_cases.CASES[name](), tmp_path)
    assert not verdict.converted and not verdict.failures, verdict
    assert verdict.explained and all(w.startswith(SYMBOLIC_BATCH_NOTE)
                                     for w in verdict.explained)


@pytest.mark.parametrize("name", list(_tf_params()))
def test_tf_fuzz_regression_converts_exactly_or_is_refused_as_claimed(tmp_path, name):
    from tests.fuzz.regressions import tf_cases
    from tests.fuzz.tf_graphs import check_tf_graph

    verdict = check_tf_graph(tf_cases.CASES[name](), tmp_path)
    assert not verdict.failures, "\n".join(verdict.failures)
