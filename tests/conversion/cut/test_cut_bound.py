"""The exact-cut search costs at most one conversion more than the refusal.

Side branches refused at different stages (frontend, dialect passes, legalisation ...) made the
search convert once per stage (a 20,000-node graph: 11.8 s refused vs 2.5 s for its
convertible twin). The cut is now converted once at most (``cut.MAX_CHECKS``); a cut that this
check refuses is recomputed and suggested as unchecked, saying why. Counted in conversions, not
timed. ``--no-cut`` skips the search.
"""
from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto, helper

from nhwc_onnx import frameworks
from nhwc_onnx.conversion import cut as exact_cut
from nhwc_onnx.conversion.cut import SourceGraph, SourceNode
from nhwc_onnx.errors import NodeProblem, UnsupportedOpError
from nhwc_onnx.options import ConvertOptions
from tests.cli_runner import run_cli

STAGES = 5  # side branches, each refused by another stage of the pipeline


def _branched_graph() -> SourceGraph:
    """x -> trunk -> pool (an output); trunk -> side_k -> out_k for k = 1..STAGES."""
    nodes = [SourceNode("trunk", "Relu", ["x"], ["t"]), SourceNode("pool", "MaxPool", ["t"], ["p"])]
    nodes += [SourceNode(f"side_{k}", f"Op{k}", ["t"], [f"out_{k}"]) for k in range(1, STAGES + 1)]
    return SourceGraph(nodes=nodes, inputs=["x"],
                       outputs=["p"] + [f"out_{k}" for k in range(1, STAGES + 1)])


class StagedPipeline:
    """A stand-in for ``convert``: stage k refuses side_k; a pipeline that stops at its first
    stage with a refusal names that stage's nodes only (``collects_all`` names every stage's,
    as a pipeline that keeps going with stand-ins does). Counts its conversions."""

    def __init__(self, collects_all: bool = False):
        self.collects_all = collects_all
        self.conversions: list[tuple[str, ...] | None] = []

    def refusal(self, outputs) -> UnsupportedOpError | None:
        wanted = set(outputs) if outputs else {f"out_{k}" for k in range(1, STAGES + 1)}
        present = [k for k in range(1, STAGES + 1) if f"out_{k}" in wanted]
        if not present:
            return None
        stages = present if self.collects_all else present[:1]
        return UnsupportedOpError([NodeProblem(f"side_{k}", f"Op{k}", "no exact form")
                                   for k in stages])

    def __call__(self, options: ConvertOptions) -> None:
        self.conversions.append(options.outputs)
        error = self.refusal(options.outputs)
        if error is not None:
            raise error


def test_a_refusal_at_every_stage_costs_one_check_and_says_the_cut_is_unchecked():
    pipeline = StagedPipeline()
    first = pipeline.refusal(None)  # the refused conversion names side_1 only
    cut = exact_cut.search(_branched_graph(), ConvertOptions(), [p.node for p in first.problems],
                 pipeline)
    assert exact_cut.MAX_CHECKS == 1 and len(pipeline.conversions) == 1  # main: one per stage, 5
    assert pipeline.conversions == [("t", "p", "out_2", "out_3", "out_4", "out_5")]
    # the check refused side_2: the cut is recomputed without it, and not converted again
    assert cut.outputs == ["t", "p", "out_3", "out_4", "out_5"]
    assert cut.checked is False and cut.refused == ["side_1", "side_2"]
    assert cut.reason == ("unchecked: converting the first cut refused 'side_2' too; a cut is "
                          "converted once at most")
    assert cut.line().startswith("to try the part that may be exact (")
    assert cut.to_dict()["checked"] is False


def test_when_the_first_refusal_names_every_stage_the_one_check_confirms_the_cut():
    pipeline = StagedPipeline(collects_all=True)
    first = pipeline.refusal(None)
    cut = exact_cut.search(_branched_graph(), ConvertOptions(), [p.node for p in first.problems],
                 pipeline)
    assert pipeline.conversions == [("t", "p")]
    assert cut.checked is True and cut.outputs == ["t", "p"] and cut.reason == ""
    assert cut.line() == "to convert the part that is exact (2 of 7 source nodes): --outputs t,p"


def test_more_checks_when_asked_follow_the_stages_one_by_one():
    """The bound is the search's parameter: with enough checks it still finds the checked cut
    of a stage-by-stage pipeline (what it did before, at one conversion per stage)."""
    pipeline = StagedPipeline()
    first = pipeline.refusal(None)
    cut = exact_cut.search(_branched_graph(), ConvertOptions(), [p.node for p in first.problems],
                 pipeline, checks=STAGES)
    assert len(pipeline.conversions) == STAGES
    assert cut.checked is True and cut.outputs == ["t", "p"]


# -- a real model, refused by the frontend and by the dialect passes ---------------------------


def _staged_model(path) -> None:
    """Side branches of one trunk, each refused by another part of the converter: Sin by the
    ONNX frontend, Flatten of the NCHW trunk by the layout pass, Sqrt and Reciprocal by the
    dialect passes."""
    def value(name, shape=None):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    nodes = [helper.make_node("Relu", ["x"], ["r"], name="trunk"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Sin", ["r"], ["y1"], name="b_sin"),
             helper.make_node("Sqrt", ["r"], ["y2"], name="b_sqrt"),
             helper.make_node("Reciprocal", ["r"], ["y4"], name="b_recip"),
             helper.make_node("Flatten", ["r"], ["y5"], name="b_flat")]
    graph = helper.make_graph(nodes, "staged", [value("x", [1, 3, 6, 8])],
                              [value(n) for n in ("p", "y1", "y2", "y4", "y5")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))


@pytest.fixture
def conversions(monkeypatch):
    """The outputs option of every conversion (each one loads the source once)."""
    seen: list = []
    load = frameworks.load_source

    def counting(path, framework, options):
        seen.append(options.outputs)
        return load(path, framework, options)

    monkeypatch.setattr(frameworks, "load_source", counting)
    return seen


def test_a_real_refusal_costs_at_most_two_conversions(tmp_path, conversions):
    source = tmp_path / "staged.onnx"
    _staged_model(source)
    report = tmp_path / "report.json"
    result = run_cli("convert", source, "-o", tmp_path / "m.onnx", "--report", report)
    assert result.exit_code == 1
    assert len(conversions) <= 2, conversions  # main: 4 (one more per refusing stage)
    assert conversions[0] is None  # the refused conversion itself, then at most one check
    cut = json.loads(report.read_text())["exact_cut"]
    last = result.stderr.strip().splitlines()[-1]
    assert last.endswith(f"--outputs {','.join(cut['outputs'])}")
    assert "r" in cut["outputs"] and "p" in cut["outputs"]
    if cut["checked"]:
        assert last.startswith("to convert the part that is exact")
    else:
        assert last.startswith("to try the part that may be exact") and "unchecked" in last
    assert not (tmp_path / "m.onnx").exists()


def test_no_cut_converts_once_and_suggests_nothing(tmp_path, conversions):
    source = tmp_path / "staged.onnx"
    _staged_model(source)
    report = tmp_path / "report.json"
    result = run_cli("convert", source, "-o", tmp_path / "m.onnx", "--report", report,
                     "--no-cut")
    assert result.exit_code == 1
    assert conversions == [None]
    assert result.stderr.startswith("Error: cannot convert ")
    assert "--outputs" not in result.stderr and "exact cut" not in result.stderr
    data = json.loads(report.read_text())
    assert data["status"] == "refused" and data["exact_cut"] is None
    assert "b_sin" in [p["node"] for p in data["refused"]]
