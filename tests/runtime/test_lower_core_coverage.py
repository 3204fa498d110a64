"""Every core op is written as standard ONNX and checked by numbers: a core op declared
without a lowering, or without a case comparing its lowering with its evaluator, fails here."""
from __future__ import annotations

from nhwc_onnx.schemas import CORE_OPS
from tests.runtime import (
    test_lower_core_elementwise,
    test_lower_core_spatial,
    test_lower_core_tensor,
)


def test_every_core_op_has_a_lowering():
    assert [s.name for s in CORE_OPS.all() if s.lower is None] == []


def test_every_core_op_lowering_is_compared_with_its_evaluator():
    cases = (test_lower_core_elementwise.CASES + test_lower_core_tensor.CASES
             + test_lower_core_spatial.CASES)
    checked = {case.op for case in cases}
    assert sorted(set(CORE_OPS.names()) - checked) == []
