"""ONNX sources with a dynamic batch, as PyTorch's two exporters and tf2onnx write them,
convert without shape flags and keep the batch symbolic: every graph input, output and value
carries the source's dim_param at axis 0, and the one converted file computes onnxruntime's
numbers at batch 1 and at batch 3. ``check`` passes it, ``lower`` keeps the dim_param and
onnxruntime runs the lowered file at both sizes."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

import nhwc_onnx
from nhwc_onnx.options import ConvertOptions
from tests.conversion.symbolic_batch import exporters
from tests.conversion.symbolic_batch.helpers import (
    BATCHES,
    assert_close,
    dims,
    feeds_at,
    onnxruntime_outputs,
    run_converted,
)

SOURCES = {
    "torchscript13_view": (lambda: exporters.torchscript(13), "batch"),
    "torchscript17_view": (lambda: exporters.torchscript(17), "batch"),
    "torchscript17_flatten": (lambda: exporters.torchscript(17, flatten="flatten"), "batch"),
    "dynamo18": (lambda: exporters.dynamo(), "s0"),
    "dynamo18_named": (lambda: exporters.dynamo(batch="batch"), "batch"),
    "tf2onnx": (exporters.tf2onnx, "unk__12"),
}


def _input_shapes(model: onnx.ModelProto) -> dict[str, tuple]:
    return {i.name: tuple(dims(i)) for i in model.graph.input}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Every source converted once (no options): name -> (source path, output path, result)."""
    folder = tmp_path_factory.mktemp("symbolic_onnx")
    done = {}
    for name, (build, _) in SOURCES.items():
        source = folder / f"{name}.onnx"
        onnx.save(build(), source)
        out = folder / f"{name}.nhwc.onnx"
        done[name] = (source, out, nhwc_onnx.convert(source, out))
    return done


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_one_converted_file_matches_onnxruntime_at_batch_1_and_3(converted, name):
    source, out, _ = converted[name]
    shapes = _input_shapes(onnx.load(source))
    for batch in BATCHES:
        feeds = feeds_at(shapes, batch)
        got = run_converted(out, feeds)
        want = onnxruntime_outputs(source, feeds)
        assert_close(got, want)
        assert all(v.shape[0] == batch for v in got.values())
    assert len(converted) == len(SOURCES)  # every exporter's form converted


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_dim_param_is_the_sources_name_on_inputs_outputs_and_every_value(converted, name):
    _, out, result = converted[name]
    symbol = SOURCES[name][1]
    proto = onnx.load(out)
    graph = proto.graph
    assert [dims(v)[0] for v in graph.input] == [symbol] * len(graph.input)
    assert [dims(v)[0] for v in graph.output] == [symbol] * len(graph.output)
    # every value the file describes: the batch at axis 0 by name, no other dim named
    values = {v.name: dims(v) for v in graph.value_info}
    computed = {o for node in graph.node for o in node.output} - {o.name for o in graph.output}
    assert computed and computed <= set(values)
    for value, shape in values.items():
        assert shape[0] == symbol and all(isinstance(d, int) for d in shape[1:]), (value, shape)
    meta = {p.key: p.value for p in proto.metadata_props}
    record = {"dim_param": symbol, "inputs": [i.name for i in graph.input],
              "outputs": [o.name for o in graph.output]}
    assert json.loads(meta["batch"]) == record
    assert result.report.batch == record
    assert result.report.inputs[0]["shape"][0] == symbol
    # the probe sizes never reach the report
    assert "11" not in json.dumps([d["detail"] for d in result.report.decisions])


@pytest.mark.parametrize("name", ["torchscript13_view", "dynamo18", "tf2onnx"])
def test_check_passes_and_lower_keeps_the_dim_param(converted, name, tmp_path):
    import onnxruntime as ort

    source, out, _ = converted[name]
    symbol = SOURCES[name][1]
    assert nhwc_onnx.check(out) == {str(out): []}
    lowered = tmp_path / "lowered.onnx"
    nhwc_onnx.lower(out, lowered)
    proto = onnx.load(lowered)
    assert [dims(v)[0] for v in proto.graph.input] == [symbol]
    assert all(dims(v)[0] == symbol for v in proto.graph.output)
    session = ort.InferenceSession(str(lowered), providers=["CPUExecutionProvider"])
    perms = json.loads({p.key: p.value for p in proto.metadata_props}.get("io_permutations", "{}"))
    shapes = _input_shapes(onnx.load(source))
    for batch in BATCHES:
        feeds = feeds_at(shapes, batch)
        ours = {k: np.ascontiguousarray(v.transpose(perms[k])) if k in perms else v
                for k, v in feeds.items()}
        names = [o.name for o in session.get_outputs()]
        got = dict(zip(names, session.run(names, ours)))
        got = {k: v.transpose(np.argsort(perms[k])) if k in perms else v for k, v in got.items()}
        assert_close(got, onnxruntime_outputs(source, feeds))


def test_the_reshapes_copy_the_batch_with_0(converted):
    from nhwc_onnx.serialize import load

    for name in ("torchscript13_view", "torchscript17_view", "dynamo18", "tf2onnx"):
        model = load(converted[name][1])
        reshapes = [n for n in model.graph.nodes if n.op == "Reshape"]
        assert reshapes, name
        for node in reshapes:
            assert int(node.inputs[1].const[0]) == 0, (name, node.inputs[1].const)


def test_a_fixed_batch_is_converted_once_and_stays_fixed(tmp_path, monkeypatch):
    """A static source never meets the probe: one conversion, no batch record."""
    from nhwc_onnx import frameworks

    model = exporters.torchscript(17)
    for value in (model.graph.input[0], model.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_value = 2
    source = tmp_path / "static.onnx"
    onnx.save(model, source)
    loads = []
    real = frameworks.load_source
    monkeypatch.setattr(frameworks, "load_source",
                        lambda *a, **k: loads.append(a) or real(*a, **k))
    result = nhwc_onnx.convert(source, tmp_path / "out.onnx")
    assert len(loads) == 1
    assert result.report.batch is None and "batch" not in result.model.metadata
    assert result.model.graph.inputs[0].shape == (2, exporters.H, exporters.W, 3)
    assert "symbolic_batch" not in result.report.timings
    # --batch replaces a fixed ONNX batch as well (the one rule)
    three = nhwc_onnx.convert(source, tmp_path / "three.onnx", ConvertOptions(batch=3))
    assert three.model.graph.inputs[0].shape == (3, exporters.H, exporters.W, 3)


def test_batch_fixes_the_symbolic_batch(tmp_path):
    source = tmp_path / "ts.onnx"
    onnx.save(exporters.torchscript(13), source)
    result = nhwc_onnx.convert(source, tmp_path / "out.onnx", ConvertOptions(batch=2))
    assert result.report.batch is None
    assert result.model.graph.inputs[0].shape == (2, exporters.H, exporters.W, 3)
    assert result.model.graph.outputs[0].shape == (2, 5)
    feeds = feeds_at(_input_shapes(onnx.load(source)), 2)
    assert_close(run_converted(tmp_path / "out.onnx", feeds), onnxruntime_outputs(source, feeds))


def test_an_input_shape_with_minus_one_keeps_the_batch_and_gives_the_rest(tmp_path):
    """dynamic_axes {0: "batch", 2: "h", 3: "w"}: H and W need --input-shape, the batch may
    stay symbolic (-1) or be fixed."""
    model = exporters.torchscript(17, flatten="flatten")
    dim = model.graph.input[0].type.tensor_type.shape.dim
    dim[2].dim_param, dim[3].dim_param = "h", "w"
    source = tmp_path / "hw.onnx"
    onnx.save(model, source)
    with pytest.raises(nhwc_onnx.errors.InvalidModelError) as info:
        nhwc_onnx.convert(source, tmp_path / "out.onnx")
    message = str(info.value)
    assert "unknown dimension(s) at axis [2, 3]" in message
    assert "--input-shape input=-1,3,D2,D3" in message and "input_shapes" not in message
    shape = {"input": [-1, 3, exporters.H, exporters.W]}
    result = nhwc_onnx.convert(source, tmp_path / "out.onnx", ConvertOptions(input_shapes=shape))
    assert result.model.graph.inputs[0].shape == ("batch", exporters.H, exporters.W, 3)
    shapes = {"input": (1, 3, exporters.H, exporters.W)}
    for batch in BATCHES:
        feeds = feeds_at(shapes, batch)
        assert_close(run_converted(tmp_path / "out.onnx", feeds),
                     onnxruntime_outputs(source, feeds))


def test_the_non_batch_error_comes_before_any_conversion_work(tmp_path, monkeypatch):
    from nhwc_onnx.passes import pipeline

    model = exporters.torchscript(13)
    model.graph.input[0].type.tensor_type.shape.dim[3].dim_param = "w"
    source = tmp_path / "w.onnx"
    onnx.save(model, source)
    monkeypatch.setattr(pipeline, "to_dialect", lambda *a, **k: pytest.fail("converted"))
    with pytest.raises(nhwc_onnx.errors.InvalidModelError, match=r"axis \[3\]"):
        nhwc_onnx.convert(source, tmp_path / "out.onnx")


def test_inputs_naming_the_batch_differently_share_the_first_inputs_name(tmp_path):
    """tf2onnx gives each input its own unk__<n>; the dialect has one batch: the first's."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["unk__1", 5, 7]),
                     helper.make_tensor_value_info("b", TensorProto.FLOAT, ["unk__2", 5, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["unk__3", 5, 7])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    source, out = tmp_path / "two.onnx", tmp_path / "two.nhwc.onnx"
    onnx.save(model, source)
    result = nhwc_onnx.convert(source, out)
    assert result.report.batch == {"dim_param": "unk__1", "inputs": ["a", "b"],
                                   "outputs": ["y"]}
    assert [v.shape for v in result.model.graph.inputs] == [("unk__1", 5, 7)] * 2
    for batch in BATCHES:
        feeds = feeds_at({"a": (1, 5, 7), "b": (1, 5, 7)}, batch)
        assert_close(run_converted(out, feeds), onnxruntime_outputs(source, feeds))
