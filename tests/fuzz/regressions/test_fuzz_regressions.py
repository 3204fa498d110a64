"""Each failure the fuzzer found, as a named graph: converts exactly, or is refused only as
the ``ops`` table says. A class another change is fixing is a strict xfail while its
generator switch is off (tests/fuzz/onnx_graphs.py ENABLED): it fails loudly once fixed."""
from __future__ import annotations

import pytest

from tests.fuzz.onnx_check import check_onnx_graph
from tests.fuzz.onnx_graphs import ENABLED
from tests.fuzz.regressions import onnx_cases


def _params():
    for name in onnx_cases.CASES:
        switch = onnx_cases.PENDING.get(name)
        marks = []
        if switch and switch not in ENABLED:
            marks = [pytest.mark.xfail(strict=True, reason=f"pending fix: '{switch}'")]
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
