"""A graph whose arithmetic mixes a symbolic batch with other axes is refused, naming the node
and suggesting --batch; with --batch 2 the same graph converts (where it has an exact form)
and matches onnxruntime. Near misses: a Reshape keeps its batch as 0 only when index 0 is the
batch itself."""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import helper

import nhwc_onnx
from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.serialize import load
from tests.conversion.symbolic_batch import exporters
from tests.conversion.symbolic_batch.exporters import ints
from tests.conversion.symbolic_batch.helpers import (
    assert_close,
    feeds_at,
    onnxruntime_outputs,
    run_converted,
)

INT_MAX = 2**63 - 1


def _shape_of_batch(prefix: str, data: str):
    """x.size(0) as TorchScript writes it: Shape -> Gather(0) -> Unsqueeze."""
    return [
        helper.make_node("Shape", [data], [f"{prefix}_shape"], name=f"{prefix}_Shape"),
        helper.make_node("Gather", [f"{prefix}_shape", "zero"], [f"{prefix}_n"],
                         name=f"{prefix}_Gather", axis=0),
        helper.make_node("Unsqueeze", [f"{prefix}_n", "axes0"], [f"{prefix}_n1"],
                         name=f"{prefix}_Unsqueeze"),
    ]


SCALARS = [onnx.numpy_helper.from_array(np.array(0, np.int64), "zero"), ints("axes0", [0])]

# name -> (nodes, input shape after the batch, initializers, the node the refusal names,
#          converts with --batch 2)
MIXING = {
    # x (N, 6, 4) -> (1, N*6, 4): the batch folded into the rows
    "reshape_folds_batch": (
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Reshape", ["r", "fold"], ["y"], name="fold_reshape")],
        (6, 4), [ints("fold", [1, -1, 4])], "fold_reshape", True),
    "concat_on_batch": (
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Concat", ["r", "x"], ["y"], name="batch_concat", axis=0)],
        (3, 5, 7), [], "batch_concat", True),
    "slice_of_batch": (
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Slice", ["r", "starts", "ends", "axes"], ["y"], name="batch_slice")],
        (3, 5, 7), [ints("starts", [1]), ints("ends", [INT_MAX]), ints("axes", [0])],
        "batch_slice", True),
    # x (N, 5, 4) -> (5, N, 4)
    "transpose_moves_batch": (
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Transpose", ["r"], ["y"], name="batch_transpose", perm=[1, 0, 2])],
        (5, 4), [], "batch_transpose", True),
    "reducemean_over_batch": (
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("ReduceMean", ["r"], ["y"], name="batch_mean", axes=[0],
                          keepdims=1)],
        (5, 4), [], "batch_mean", True),
    # x (N, 6): index 0 of the target is 2N, not the batch
    "reshape_index0_twice_the_batch": (
        [*_shape_of_batch("b", "x"),
         helper.make_node("Mul", ["b_n1", "two"], ["b_2n"], name="double"),
         helper.make_node("Concat", ["b_2n", "three"], ["target"], name="target_concat", axis=0),
         helper.make_node("Reshape", ["x", "target"], ["y"], name="twice_reshape")],
        (6,), [*SCALARS, ints("two", [2]), ints("three", [3])], "twice_reshape", True),
    # x (N, 6) -> (6, N) -> Reshape to (N, 6) by x.size(0): the Reshape's input has no batch
    # at axis 0, so its target's batch entry must not become 0
    "reshape_after_moving_the_batch": (
        [helper.make_node("Transpose", ["x"], ["t"], name="move", perm=[1, 0]),
         *_shape_of_batch("b", "x"),
         helper.make_node("Concat", ["b_n1", "six"], ["target"], name="target_concat", axis=0),
         helper.make_node("Reshape", ["t", "target"], ["y"], name="back_reshape")],
        (6,), [*SCALARS, ints("six", [6])], "back_reshape", True),
    # x (N, 3, 5, 7) * a (1, 1, 5, 7) mask: the dialect's Mul does not broadcast, so the mask
    # is written out per sample - a constant of the batch's size, which cannot be symbolic
    "mul_by_a_spatial_constant": (
        [helper.make_node("Mul", ["x", "mask"], ["y"], name="mask_mul")],
        (3, 5, 7), [onnx.numpy_helper.from_array(
            np.random.default_rng(1).standard_normal((1, 1, 5, 7)).astype(np.float32),
            "mask")], "mask_mul", True),
}


def _source(tmp_path, name: str):
    nodes, shape, inits, *_ = MIXING[name]
    path = tmp_path / f"{name}.onnx"
    onnx.save(exporters.single(nodes, shape, inits), path)
    return path, {"x": (1, *shape)}


@pytest.mark.parametrize("name", sorted(MIXING))
def test_a_node_mixing_the_batch_is_refused_by_name_with_the_remedy(tmp_path, name):
    source, _ = _source(tmp_path, name)
    out = tmp_path / "out.onnx"
    with pytest.raises(UnsupportedOpError) as info:
        nhwc_onnx.convert(source, out)
    named = {p.node for p in info.value.problems}
    assert MIXING[name][3] in named, str(info.value)
    assert "--batch N" in str(info.value)
    assert all(p.rule == "batch" for p in info.value.problems)
    assert not out.exists()


@pytest.mark.parametrize("name", sorted(MIXING))
def test_with_a_fixed_batch_the_same_graph_converts_and_matches(tmp_path, name):
    source, shapes = _source(tmp_path, name)
    out = tmp_path / "out.onnx"
    nhwc_onnx.convert(source, out, ConvertOptions(batch=2))
    feeds = feeds_at(shapes, 2)
    assert_close(run_converted(out, feeds), onnxruntime_outputs(source, feeds))


def test_every_case_is_refused_symbolic_and_converts_fixed(tmp_path):
    """The count: all eight refused with a symbolic batch, all eight convert at --batch 2."""
    refused = converted = 0
    for name in MIXING:
        source, _ = _source(tmp_path, name)
        try:
            nhwc_onnx.convert(source, options=ConvertOptions(exact_cut=False))
        except UnsupportedOpError:
            refused += 1
        nhwc_onnx.convert(source, options=ConvertOptions(batch=2, exact_cut=False))
        converted += 1
    assert (refused, converted) == (len(MIXING), len(MIXING)) == (8, 8)


def test_a_reshape_whose_index_0_is_the_batch_copies_it_with_0(tmp_path):
    """x (N, 6) -> Reshape(x, [x.size(0), 2, 3]) and a constant [-1, 3, 2]: both targets keep
    the batch as 0 (the near misses above must not)."""
    nodes = [*_shape_of_batch("b", "x"),
             helper.make_node("Concat", ["b_n1", "two_three"], ["target"], name="tc", axis=0),
             helper.make_node("Reshape", ["x", "target"], ["a"], name="by_size"),
             helper.make_node("Reshape", ["x", "minus_one"], ["b"], name="by_minus_one"),
             helper.make_node("Reshape", ["b", "back"], ["c"], name="back"),
             helper.make_node("Add", ["a", "c"], ["y"], name="add")]
    inits = [*SCALARS, ints("two_three", [2, 3]), ints("minus_one", [-1, 3, 2]),
             ints("back", [0, 2, 3])]
    source = tmp_path / "ok.onnx"
    onnx.save(exporters.single(nodes, (6,), inits), source)
    out = tmp_path / "ok.nhwc.onnx"
    nhwc_onnx.convert(source, out)
    model = load(out)
    targets = {n.name: [int(d) for d in n.inputs[1].const] for n in model.graph.nodes
               if n.op == "Reshape"}
    assert sorted(targets.values()) == [[0, 2, 3], [0, 2, 3], [0, 3, 2]]
    assert model.graph.outputs[0].shape == ("N", 2, 3)
    for batch in (1, 3):
        feeds = feeds_at({"x": (1, 6)}, batch)
        assert_close(run_converted(out, feeds), onnxruntime_outputs(source, feeds))


def test_a_softmax_over_the_batch_is_refused(tmp_path):
    """x (N, 5), opset-11 Softmax axis 0: one softmax over all samples' values together (the
    dialect's own Softmax over axis 0 keeps every shape:
    tests/conversion/symbolic_batch/test_batch_rules.py)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["y"], name="batch_softmax", axis=0)]
    source = tmp_path / "softmax.onnx"
    onnx.save(exporters.single(nodes, (5,), opset=11), source)
    with pytest.raises(UnsupportedOpError) as info:
        nhwc_onnx.convert(source, options=ConvertOptions(exact_cut=False))
    assert [p.node for p in info.value.problems] == ["batch_softmax"]
    assert "batch" in info.value.problems[0].reason and "--batch N" in str(info.value)


def test_a_batch_refusal_offers_no_exact_cut(tmp_path):
    source, _ = _source(tmp_path, "concat_on_batch")
    with pytest.raises(UnsupportedOpError) as info:
        nhwc_onnx.convert(source)
    assert getattr(info.value, "exact_cut", None) is None
    assert "to convert the part" not in str(info.value)


def test_one_number_added_to_every_sample_of_a_rank_1_batch_converts(tmp_path):
    """y = 0.75 x - 0.3 for x (N,) (tf2onnx's regression test graph): the legalised AddBias
    adds along the only axis, the batch, with a bias of the batch's size; written as a
    Reshape to (N, 1), AddBias of the one number, Reshape back, it needs no such constant.
    Near miss: x + range(N) does depend on the batch and stays refused."""
    nodes = [helper.make_node("Mul", ["x", "w"], ["m"], name="mul"),
             helper.make_node("Add", ["m", "b"], ["y"], name="add")]
    inits = [onnx.numpy_helper.from_array(np.array(0.75, np.float32), "w"),
             onnx.numpy_helper.from_array(np.array(-0.3, np.float32), "b")]
    source, out = tmp_path / "regression.onnx", tmp_path / "regression.nhwc.onnx"
    onnx.save(exporters.single(nodes, (), inits), source)
    result = nhwc_onnx.convert(source, out)
    assert result.report.batch == {"dim_param": "N", "inputs": ["x"], "outputs": ["y"]}
    model = load(out)
    assert all(v.const.shape != (11,) for v in model.graph.constants())
    for batch in (1, 3, 5):
        feeds = feeds_at({"x": (1,)}, batch)
        assert_close(run_converted(out, feeds), onnxruntime_outputs(source, feeds))

    ramp = [*_shape_of_batch("b", "x"),
            helper.make_node("Squeeze", ["b_n1", "axes0"], ["n"], name="squeeze"),
            helper.make_node("Range", ["start", "n", "step"], ["r"], name="range"),
            helper.make_node("Cast", ["r"], ["rf"], name="cast", to=onnx.TensorProto.FLOAT),
            helper.make_node("Add", ["x", "rf"], ["y"], name="add_ramp")]
    near = tmp_path / "ramp.onnx"
    onnx.save(exporters.single(ramp, (), [*SCALARS, ints("start", 0), ints("step", 1)]), near)
    with pytest.raises(UnsupportedOpError) as info:
        nhwc_onnx.convert(near, options=ConvertOptions(exact_cut=False))
    assert "add_ramp" in {p.node for p in info.value.problems}


def test_only_a_repeated_number_is_taken_as_a_bias_of_every_sample():
    """generalize() on two hand-made probe graphs: AddBias of x (P,) with a bias of P equal
    numbers becomes per sample; with a bias 0..P-1 (one number per sample) it is refused."""
    from nhwc_onnx.conversion.symbolic_batch_proof import generalize
    from nhwc_onnx.ir import DIALECT, Graph, Model, Value
    from nhwc_onnx.schemas.symbolic_batch import PROBES

    def probe(size: int, bias) -> Model:
        g = Graph("g")
        x = g.add_input(Value("x", "float32", (size,)))
        node = g.make_node("AddBias", [x, g.constant(bias(size).astype(np.float32), "b")],
                           name="bias", domain=DIALECT)
        node.outputs[0].shape, node.outputs[0].dtype = (size,), "float32"
        g.outputs.append(node.outputs[0])
        return Model(g)

    def repeated(size):
        return np.full(size, 0.5)

    same = generalize(*(probe(p, repeated) for p in PROBES), {"x": "N"})
    assert same.problems == [] and same.outputs == ["bias"]
    ramp = generalize(*(probe(p, np.arange) for p in PROBES), {"x": "N"})
    assert [p.node for p in ramp.problems] == ["bias"]


def test_a_failure_says_batch_1_only_when_a_fixed_batch_converts(tmp_path):
    """x.view(1, -1) written into a dynamic-batch export works at batch 1 only: the error,
    read at the probe size, says that --batch 1 converts. An op the dialect lacks is refused
    as it would be at any batch, without that remark."""
    from nhwc_onnx.errors import InvalidModelError

    rng = np.random.default_rng(2)
    hard = [helper.make_node("Reshape", ["x", "one_row"], ["f"], name="view"),
            helper.make_node("Gemm", ["f", "w"], ["y"], name="fc", transB=1)]
    inits = [ints("one_row", [1, -1]),
             onnx.numpy_helper.from_array(rng.standard_normal((4, 30)).astype(np.float32),
                                          "w")]
    source = tmp_path / "hard.onnx"
    onnx.save(exporters.single(hard, (5, 6), inits), source)
    with pytest.raises(InvalidModelError) as info:
        nhwc_onnx.convert(source)
    assert "with a fixed batch the model converts: --batch 1" in str(info.value)
    nhwc_onnx.convert(source, options=ConvertOptions(batch=1))

    other = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Erf", ["r"], ["y"], name="erf")]
    unrelated = tmp_path / "erf.onnx"
    onnx.save(exporters.single(other, (5, 6)), unrelated)
    with pytest.raises(UnsupportedOpError) as info:
        nhwc_onnx.convert(unrelated)
    assert "erf" in {p.node for p in info.value.problems}
    assert "--batch" not in str(info.value) and "symbolic" not in str(info.value)


def _probe_sizes_in(text: str) -> list[str]:
    """The sizes a symbolic batch is read at, or their multiples, as numbers in ``text``."""
    from nhwc_onnx.schemas.symbolic_batch import PROBES

    sizes = {str(k * p) for p in PROBES for k in (1, 2, 3, 4, 5, 6, 7)}
    return [n for n in re.findall(r"\d+", text) if n in sizes]


@pytest.mark.parametrize("name", sorted(MIXING))
def test_a_batch_refusal_speaks_of_the_batch_not_of_the_probe_sizes(tmp_path, name):
    source, _ = _source(tmp_path, name)
    with pytest.raises(UnsupportedOpError) as info:
        nhwc_onnx.convert(source, options=ConvertOptions(exact_cut=False))
    assert not _probe_sizes_in(str(info.value)), str(info.value)


def test_messages_about_a_symbolic_batch_input_name_the_batch(tmp_path):
    from tests.cli_runner import run_cli

    image = tmp_path / "image.onnx"  # x: (N, 3, 8, 6)
    onnx.save(exporters.single([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                               (3, 8, 6), []), image)
    result = run_cli("convert", image, "-o", tmp_path / "m.onnx", "--mean", "nope=1")
    assert result.exit_code == 2 and not _probe_sizes_in(result.stderr), result.stderr
    batch = "N"  # exporters.single's name for the batch
    assert f"they are: x ({batch} x 8 x 6 x 3)" in result.stderr, result.stderr
    # a converted file verified against a source of other dims: the source's dims, by name
    assert run_cli("convert", image, "-o", tmp_path / "m.onnx").exit_code == 0
    other = tmp_path / "other.onnx"
    onnx.save(exporters.single([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                               (3, 9, 6), []), other)
    result = run_cli("verify", other, tmp_path / "m.onnx")
    assert result.exit_code == 2 and f"the source declares ('{batch}', 3, 9, 6)" in \
        result.stderr, result.stderr
