"""A number computed from a symbolic batch's size depends on the batch, also when it happens to
be equal at both probe sizes of the conversion (11 and 13). ``min(N, 5)``, ``N > 10``,
``N // 100``, ``N`` used as data and ``min(N, 2)`` as a Slice bound (ONNX Shape/Gather
arithmetic, TensorFlow ``tf.shape(x)[0]`` arithmetic) are refused naming the source node with the
``--batch N`` remedy - with ``--batch B`` the same graph converts and matches the source at B = 1,
3, 17 and 100. Near misses whose batch arithmetic has an exact form (``N * 2 / 2`` or
``Size / (C*H*W)`` as a Reshape's batch entry, ``N - N``, a Min of the channel count - also one
equal to a probe size, Resize sizes that copy the batch) and the exporters' idioms convert with a
symbolic batch and match the source at 1, 3, 17 and 100."""
from __future__ import annotations

import contextlib
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import nhwc_onnx
from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.schemas.symbolic_batch import PROBES
from tests.conversion.symbolic_batch import exporters
from tests.conversion.symbolic_batch.helpers import (
    assert_close,
    dims,
    feeds_at,
    onnxruntime_outputs,
    run_converted,
    run_frozen_graph,
)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
BATCH_SIZES = (1, 3, 17, 100)  # 100: N // 100 changes there, and min(N, 5) already at 1 and 3
NO_CUT = ConvertOptions(exact_cut=False)


def _scalar(name: str, value) -> onnx.TensorProto:
    return onnx.numpy_helper.from_array(np.array(value, np.int64), name)


def _batch_size(tensor: str = "x", axis: int = 0):
    """x.size(axis) as exporters write it: Shape -> Gather."""
    return [helper.make_node("Shape", [tensor], ["shape"], name="shape"),
            helper.make_node("Gather", ["shape", "axis"], ["n"], name="gather", axis=0)]


def _times_x(value: str, op: str = "Mul"):
    """y = x (op) float(value)."""
    return [helper.make_node("Cast", [value], ["f"], name="cast", to=TensorProto.FLOAT),
            helper.make_node(op, ["x", "f"], ["y"], name=op.lower())]


def _reshape_by(value: str):
    """y = x.reshape(value, -1) (x of rank 3: not an image, whose flattening is a layout
    question)."""
    return [helper.make_node("Unsqueeze", [value, "axes0"], ["n1"], name="unsqueeze"),
            helper.make_node("Concat", ["n1", "minus1"], ["target"], name="target", axis=0),
            helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape")]


RESHAPE_INITS = [exporters.ints("axes0", [0]), exporters.ints("minus1", [-1])]

# name -> (nodes, initializers, input shape after the batch, the node a symbolic batch's
#          refusal names; None: converts with a symbolic batch)
ONNX_CASES = {
    "min_of_the_batch": (
        [*_batch_size(), helper.make_node("Min", ["n", "five"], ["m"], name="batch_min"),
         *_times_x("m")], [_scalar("axis", 0), _scalar("five", 5)], (3, 5, 7), "batch_min"),
    "batch_greater_than_10": (
        [*_batch_size(), helper.make_node("Greater", ["n", "ten"], ["m"], name="batch_greater"),
         *_times_x("m")], [_scalar("axis", 0), _scalar("ten", 10)], (3, 5, 7), "batch_greater"),
    "batch_divided_by_100": (
        [*_batch_size(), helper.make_node("Div", ["n", "hundred"], ["m"], name="batch_div"),
         *_times_x("m", "Add")], [_scalar("axis", 0), _scalar("hundred", 100)], (3, 5, 7),
        "batch_div"),
    "batch_added_as_data": (
        [*_batch_size(), *_times_x("n", "Add")], [_scalar("axis", 0)], (3, 5, 7), "add"),
    # x[:, :, :min(N, 2)]: the bound is an attribute of the dialect's Slice
    "slice_bound_min_of_the_batch": (
        [*_batch_size(), helper.make_node("Min", ["n", "two"], ["m"], name="batch_min"),
         helper.make_node("Unsqueeze", ["m", "axes0"], ["m1"], name="unsqueeze"),
         helper.make_node("Slice", ["x", "starts", "m1", "axes"], ["y"], name="batch_slice")],
        [_scalar("axis", 0), _scalar("two", 2), exporters.ints("axes0", [0]),
         exporters.ints("starts", [0]), exporters.ints("axes", [2])], (3, 5, 7), "batch_slice"),
    # near misses: exact at every batch size
    "min_of_the_channels": (
        [*_batch_size(axis=1), helper.make_node("Min", ["n", "two"], ["m"], name="channel_min"),
         *_times_x("m")], [_scalar("axis", 1), _scalar("two", 2)], (3, 5, 7), None),
    # 11 channels: tagged as the batch in the first probe conversion, not in the second
    "min_of_channels_equal_to_a_probe_size": (
        [*_batch_size(axis=1), helper.make_node("Min", ["n", "five"], ["m"], name="channel_min"),
         *_times_x("m")], [_scalar("axis", 1), _scalar("five", 5)], (PROBES[0], 5, 7), None),
    "batch_minus_batch_plus_1": (
        [*_batch_size(), helper.make_node("Sub", ["n", "n"], ["zero"], name="n_minus_n"),
         helper.make_node("Add", ["zero", "one"], ["m"], name="plus_one"), *_times_x("m")],
        [_scalar("axis", 0), _scalar("one", 1)], (3, 5, 7), None),
    "reshape_by_twice_the_batch_halved": (
        [*_batch_size(), helper.make_node("Mul", ["n", "two"], ["n2"], name="twice"),
         helper.make_node("Div", ["n2", "two"], ["half"], name="halved"), *_reshape_by("half")],
        [_scalar("axis", 0), _scalar("two", 2), *RESHAPE_INITS], (6, 35), None),
    # F.interpolate(x, size=...) as TorchScript writes it: sizes = Shape(x)[:2] ++ (H', W')
    "resize_sizes_keep_the_batch_and_channels": (
        [helper.make_node("Shape", ["x"], ["shape"], name="shape"),
         helper.make_node("Slice", ["shape", "zero", "two"], ["nc"], name="batch_channels"),
         helper.make_node("Concat", ["nc", "hw"], ["sizes"], name="sizes", axis=0),
         helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="resize",
                          mode="nearest")],
        [exporters.ints("zero", [0]), exporters.ints("two", [2]),
         exporters.ints("hw", [10, 14])], (3, 5, 7), None),
    "reshape_by_size_over_the_sample_size": (
        [helper.make_node("Size", ["x"], ["size"], name="size"),
         helper.make_node("Div", ["size", "sample"], ["n"], name="per_sample"),
         *_reshape_by("n")], [_scalar("sample", 6 * 35), *RESHAPE_INITS], (6, 35), None),
}
EXPORTERS = {
    "torchscript13_view": lambda: exporters.torchscript(13),
    "torchscript17_flatten": lambda: exporters.torchscript(17, flatten="flatten"),
    "dynamo18": exporters.dynamo,
    "tf2onnx": exporters.tf2onnx,
}


def _onnx_source(folder, name: str):
    if name in EXPORTERS:
        model = EXPORTERS[name]()
    else:
        nodes, inits, shape, _ = ONNX_CASES[name]
        model = exporters.single(nodes, shape, inits)
    path = folder / f"{name}.onnx"
    onnx.save(model, path)
    return path, {i.name: tuple(dims(i)) for i in model.graph.input}


def _matches_onnxruntime_at(source, out, shapes, batches) -> None:
    for batch in batches:
        feeds = feeds_at(shapes, batch)
        assert_close(run_converted(out, feeds), onnxruntime_outputs(source, feeds))


def _assert_refused_by_name(source, node: str) -> None:
    with pytest.raises(UnsupportedOpError) as info:
        nhwc_onnx.convert(source, options=NO_CUT)
    problems = info.value.problems
    assert [p.node for p in problems] == [node], str(info.value)
    assert problems[0].rule == "batch" and "--batch N" in problems[0].reason


@pytest.mark.parametrize("name", sorted(n for n, case in ONNX_CASES.items() if case[3]))
def test_onnx_batch_arithmetic_is_refused_naming_the_node(tmp_path, name):
    source, _ = _onnx_source(tmp_path, name)
    _assert_refused_by_name(source, ONNX_CASES[name][3])


@pytest.mark.parametrize("name", sorted(n for n, case in ONNX_CASES.items() if case[3]))
def test_onnx_batch_arithmetic_converts_with_a_fixed_batch(tmp_path, name):
    source, shapes = _onnx_source(tmp_path, name)
    for batch in BATCH_SIZES:
        out = tmp_path / f"fixed{batch}.onnx"
        nhwc_onnx.convert(source, out, ConvertOptions(batch=batch, exact_cut=False))
        _matches_onnxruntime_at(source, out, shapes, [batch])


@pytest.mark.parametrize("name", sorted([n for n, case in ONNX_CASES.items() if not case[3]]
                                        + list(EXPORTERS)))
def test_exact_batch_arithmetic_keeps_the_batch_symbolic(tmp_path, name):
    source, shapes = _onnx_source(tmp_path, name)
    out = tmp_path / "out.onnx"
    result = nhwc_onnx.convert(source, out, NO_CUT)
    assert result.report.batch is not None and result.report.batch["outputs"]
    _matches_onnxruntime_at(source, out, shapes, BATCH_SIZES)


def test_onnx_count_of_refused_and_converted_cases(tmp_path):
    refused, converted = [], []
    for name in [*ONNX_CASES, *EXPORTERS]:
        source, _ = _onnx_source(tmp_path, name)
        try:
            nhwc_onnx.convert(source, options=NO_CUT)
            converted.append(name)
        except UnsupportedOpError:
            refused.append(name)
    assert sorted(refused) == sorted(n for n, case in ONNX_CASES.items() if case[3])
    assert (len(refused), len(converted)) == (5, 10)


# -- TensorFlow: tf.shape(x)[0] arithmetic in a frozen graph ----------------------------------

TF_SHAPE = (4, 6, 3)


def _tf_cases():
    import tensorflow as tf

    def n(x):
        return tf.shape(x)[0]

    def as_float(v):
        return tf.cast(v, tf.float32)

    # name -> (y of x, the node a symbolic batch's refusal names; None: converts)
    return {
        "min_of_the_batch": (lambda x: x * as_float(tf.minimum(n(x), 5)), "Minimum"),
        "batch_greater_than_10": (lambda x: x * as_float(n(x) > 10), "Greater"),
        "batch_floor_divided_by_100": (lambda x: x + as_float(n(x) // 100), "floordiv"),
        "batch_added_as_data": (lambda x: x + as_float(n(x)), "add"),
        "slice_size_min_of_the_batch": (
            lambda x: tf.slice(x, [0, 0, 0, 0], tf.stack([-1, tf.minimum(n(x), 2), -1, -1])),
            "Slice"),
        "min_of_the_channels": (lambda x: x * as_float(tf.minimum(tf.shape(x)[3], 2)), None),
        "reshape_by_twice_the_batch_halved": (
            lambda x: tf.reshape(x, tf.stack([n(x) * 2 // 2, -1])), None),
        "keras_style_reshape": (
            lambda x: tf.reshape(x, tf.concat([tf.shape(x)[:1], [24, 3]], 0)), None),
    }


def _frozen(fn) -> bytes:
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, *TF_SHAPE], name="x")
        tf.identity(fn(x), name="y")
    return graph.as_graph_def().SerializeToString()


def _matches_tensorflow_at(data: bytes, out, batches) -> None:
    for batch in batches:
        x = np.random.default_rng(batch).uniform(-1, 1, (batch, *TF_SHAPE)).astype(np.float32)
        [got] = run_converted(out, {"x": x}).values()
        assert_close({"y": got}, {"y": run_frozen_graph(data, x)})


@pytest.mark.slow
def test_tensorflow_batch_arithmetic_is_refused_or_exact(tmp_path):
    """Each refused case names its node with the remedy and converts at --batch B; each
    other converts with a symbolic batch; all match TensorFlow at 1, 3, 17 and 100."""
    refused, converted = [], []
    for name, (fn, node) in _tf_cases().items():
        data = _frozen(fn)
        source = tmp_path / f"{name}.pb"
        source.write_bytes(data)
        if node is None:
            out = tmp_path / f"{name}.onnx"
            nhwc_onnx.convert(source, out, NO_CUT)
            _matches_tensorflow_at(data, out, BATCH_SIZES)
            converted.append(name)
            continue
        _assert_refused_by_name(source, node)
        refused.append(name)
        for batch in BATCH_SIZES:
            out = tmp_path / f"{name}{batch}.onnx"
            nhwc_onnx.convert(source, out, ConvertOptions(batch=batch, exact_cut=False))
            _matches_tensorflow_at(data, out, [batch])
    assert (len(refused), len(converted)) == (5, 3)


# -- a divisor corrected per position: one constant per sample --------------------------------


def _average_pool(tmp_path, name: str, size: int, pads: list[int]):
    """AveragePool(count_include_pad=0, ceil_mode=1) of a (N, 3, size, size) map."""
    nodes = [helper.make_node("AveragePool", ["x"], ["y"], name="pool", kernel_shape=[2, 2],
                              strides=[1, 1] if any(pads) else [2, 2], pads=pads, ceil_mode=1,
                              count_include_pad=0)]
    path = tmp_path / f"{name}.onnx"
    onnx.save(exporters.single(nodes, (3, size, size)), path)
    return path, {"x": (1, 3, size, size)}


def test_an_average_pool_whose_divisor_needs_a_ratio_map_is_refused_by_its_own_name(tmp_path):
    """Pads (1, 1) divide the border windows by the cells they read: with a fixed batch the
    ratio map corrects the divisor (a Mul by a constant of the batch's size, a node the source
    does not have); with a symbolic batch the refusal names the source's AveragePool."""
    source, shapes = _average_pool(tmp_path, "padded", 6, [1, 1, 1, 1])
    with pytest.raises(UnsupportedOpError) as info:
        nhwc_onnx.convert(source, options=NO_CUT)
    [problem] = info.value.problems
    assert (problem.node, problem.op, problem.rule) == ("pool", "AveragePool", "batch")
    assert "ratio map is one constant per sample" in problem.reason
    assert "--batch N" in problem.reason
    out = tmp_path / "fixed.onnx"
    result = nhwc_onnx.convert(source, out, ConvertOptions(batch=3, exact_cut=False))
    assert result.report.target_ops.get("Mul") == 1  # the correction the symbolic batch lacks
    _matches_onnxruntime_at(source, out, shapes, [3])


def test_an_average_pool_with_ceil_mode_that_needs_no_ratio_map_stays_symbolic(tmp_path):
    source, shapes = _average_pool(tmp_path, "unpadded", 7, [0, 0, 0, 0])
    out = tmp_path / "out.onnx"
    nhwc_onnx.convert(source, out, NO_CUT)
    _matches_onnxruntime_at(source, out, shapes, BATCH_SIZES)


# -- a product by a constant matrix written with the batch folded into its rows ----------------


def _tensordot(split_back: list[str], computing_it=()):
    """x (N, 6, 5) -> Reshape to (6N, 5) -> MatMul (5, 7) -> Add bias -> Reshape by
    ``split_back`` (entries computed from N, by the nodes ``computing_it`` too), as tf2onnx
    writes TensorFlow's Tensordot."""
    rng = np.random.default_rng(3)
    weight = onnx.numpy_helper.from_array(rng.standard_normal((5, 7)).astype(np.float32), "w")
    bias = onnx.numpy_helper.from_array(rng.standard_normal(7).astype(np.float32), "b")
    nodes = [*_batch_size(), helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="n1"),
             helper.make_node("Mul", ["n1", "six"], ["rows"], name="rows"),
             helper.make_node("Concat", ["rows", "five"], ["flat"], name="flat", axis=0),
             helper.make_node("Reshape", ["x", "flat"], ["x2"], name="Tensordot/Reshape"),
             helper.make_node("MatMul", ["x2", "w"], ["p"], name="Tensordot/MatMul"),
             helper.make_node("Add", ["p", "b"], ["pb"], name="BiasAdd"), *computing_it,
             helper.make_node("Concat", split_back, ["back"], name="back", axis=0),
             helper.make_node("Reshape", ["pb", "back"], ["y"], name="Tensordot")]
    inits = [_scalar("axis", 0), exporters.ints("axes0", [0]), exporters.ints("six", [6]),
             exporters.ints("five", [5]), exporters.ints("six_seven", [6, 7]),
             exporters.ints("two", [2]), exporters.ints("three_seven", [3, 7]), weight, bias]
    return exporters.single(nodes, (6, 5), inits)


def _batch_findings(tmp_path, model) -> list[str]:
    """The nodes the first probe conversion finds reading a number computed from the batch's
    size where the dialect cannot write it."""
    from nhwc_onnx import frameworks
    from nhwc_onnx.conversion.symbolic_batch import probing
    from nhwc_onnx.passes import PassContext
    from nhwc_onnx.passes.pipeline import to_dialect

    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    options = probing(NO_CUT)
    loaded = frameworks.load_source(path, frameworks.get("onnx"), options)
    with contextlib.suppress(UnsupportedOpError):  # what the passes refuse is not the question
        to_dialect(loaded, PassContext(options=NO_CUT, log_warnings=False))
    return sorted(p.node for p in loaded.batch_findings)


def test_a_product_whose_rows_fold_the_batch_and_split_it_back_converts_per_pixel(tmp_path):
    """Tensordot's two Reshapes (6N, 5) and (N, 6, 7) are per sample as a pair: the numbers
    computed from N in them are no findings, and the pair converts as a 1x1 Conv that
    matches onnxruntime at every batch size."""
    model = _tensordot(["n1", "six_seven"])
    assert _batch_findings(tmp_path, model) == []
    source, out = tmp_path / "tensordot.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    result = nhwc_onnx.convert(source, out, NO_CUT)
    assert result.report.target_ops.get("Conv") == 1
    _matches_onnxruntime_at(source, out, {"x": (1, 6, 5)}, BATCH_SIZES)


def test_rows_split_back_other_than_they_were_folded_are_batch_numbers(tmp_path):
    """(6N, 7) split into (2N, 3, 7) mixes samples: the Reshapes are findings."""
    model = _tensordot(["n2", "three_seven"],
                       [helper.make_node("Mul", ["n1", "two"], ["n2"], name="twice")])
    assert _batch_findings(tmp_path, model) == ["Tensordot", "Tensordot/Reshape"]


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(6, 5), (4, 6, 5)], ids=["rank3", "rank4"])
def test_a_keras_dense_on_a_rank_3_or_4_tensor_keeps_the_batch_symbolic(tmp_path, shape):
    """Keras writes Dense on (N, ..., C) as TensorFlow's Tensordot: the rows fold the batch
    and are split back. With a symbolic batch it is a 1x1 Conv of the map; one file matches
    Keras at batch 1, 3, 17 and 100."""
    import keras

    keras.utils.set_random_seed(2)
    x = keras.Input(shape, name="img")
    model = keras.Model(x, keras.layers.Dense(7, name="dense")(keras.layers.ReLU()(x)))
    source, out = tmp_path / "dense.keras", tmp_path / "dense.onnx"
    model.save(source)
    result = nhwc_onnx.convert(source, out, NO_CUT)
    assert result.report.batch["dim_param"] == "N"
    assert result.report.target_ops.get("Conv") == 1 and "Dense" not in result.report.target_ops
    for batch in BATCH_SIZES:
        pixels = np.random.default_rng(batch).uniform(-1, 1, (batch, *shape)).astype(np.float32)
        [got] = run_converted(out, {"img": pixels}).values()
        assert_close({"y": got}, {"y": model(pixels).numpy()})


@pytest.mark.slow
def test_rows_split_back_into_other_samples_are_refused(tmp_path):
    """x (N, 6, 5) -> (6N, 5) -> MatMul -> (2N, 3, 7): the split mixes samples; with a fixed
    batch it converts and matches TensorFlow."""
    import tensorflow as tf

    weight = np.random.default_rng(4).standard_normal((5, 7)).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 6, 5], name="x")
        rows = tf.matmul(tf.reshape(x, [-1, 5]), tf.constant(weight))
        tf.identity(tf.reshape(rows, [-1, 3, 7], name="split"), name="y")
    data = graph.as_graph_def().SerializeToString()
    source = tmp_path / "split.pb"
    source.write_bytes(data)
    with pytest.raises(UnsupportedOpError) as info:
        nhwc_onnx.convert(source, options=NO_CUT)
    assert "split" in {p.node for p in info.value.problems}, str(info.value)
    out = tmp_path / "fixed.onnx"
    nhwc_onnx.convert(source, out, ConvertOptions(batch=3, exact_cut=False))
    x3 = np.random.default_rng(3).uniform(-1, 1, (3, 6, 5)).astype(np.float32)
    [got] = run_converted(out, {"x": x3}).values()
    assert_close({"y": got}, {"y": run_frozen_graph(data, x3)})
