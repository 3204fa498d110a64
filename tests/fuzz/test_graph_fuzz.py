"""The fuzzer's fixed-seed slice: random graphs of every frontend convert exactly or are refused
as the ``ops`` table says (tests/fuzz/claims.py). ``make fuzz`` runs the same checks for longer
(tests/fuzz/run.py)."""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings

from nhwc_onnx.passes.to_dialect.op_table import WHEN
from tests.fuzz import claims
from tests.fuzz.onnx_check import check_onnx_graph
from tests.fuzz.onnx_graphs import onnx_graphs

SLICE = settings(derandomize=True, deadline=None, database=None, print_blob=True,
                 suppress_health_check=list(HealthCheck))


def run_slice(strategy, check, examples: int) -> Counter:
    tally: Counter = Counter()

    @settings(SLICE, max_examples=examples)
    @given(strategy)
    def one(graph):
        verdict = check(graph)
        tally["converted" if verdict.converted else "refused"] += 1
        assert not verdict.failures, "\n".join(verdict.failures)

    one()
    return tally


def test_generated_onnx_graphs_convert_exactly_or_refuse_as_the_table_says(tmp_path):
    tally = run_slice(onnx_graphs(), lambda g: check_onnx_graph(g, tmp_path), 150)
    # measured: 125 of 150 convert, 25 are refused (each refused node explained by the table)
    assert tally["converted"] >= 110 and tally["refused"] >= 15, tally


def test_condition_predicates_pin_the_table_text():
    """A predicate decides the condition it was written for: a changed condition in the table
    fails here until its predicate is re-read."""
    stale = {}
    for (framework, op), (text, _) in claims.CONDITIONS.items():
        claim = claims.claim_of(framework, op)
        if claim.converts != WHEN or claim.condition != text:
            stale[f"{framework} {op}"] = (claim.converts, claim.condition)
    assert stale == {}


@pytest.mark.parametrize("kind", ["mode-nearest", "align-corners"])
def test_nearest_cell_rule_matches_onnxruntime(kind):
    """The Resize predicate's cell rule, held to onnxruntime (it decides which refusals are
    explained)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    from tests.fuzz.onnx_check import ort_runner

    coord, nearest = (("asymmetric", "round_prefer_floor") if kind == "mode-nearest"
                      else ("align_corners", "floor"))
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest",
                            coordinate_transformation_mode=coord, nearest_mode=nearest)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 1, 1, 5])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], [onnx.numpy_helper.from_array(
                np.array([1, 1, 1, 3], np.float32), "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    got = ort_runner(model)({"x": np.arange(5, dtype=np.float32).reshape(1, 1, 1, 5)})["y"]
    want = claims.nearest_source_cells(np.arange(15), 3.0, 5, coord, nearest)
    assert got.reshape(-1).astype(int).tolist() == want.tolist()
