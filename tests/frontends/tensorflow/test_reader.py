"""Reading GraphDefs without TensorFlow: text and binary forms, broken and hostile files."""
from __future__ import annotations

import contextlib
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from nhwc_onnx.errors import InvalidModelError, ModelLoadError, UnsupportedOpError
from nhwc_onnx.frontends.tensorflow import load
from nhwc_onnx.frontends.tensorflow.proto import tf_graph_pb2 as pb
from nhwc_onnx.options import ConvertOptions
from tests.core_reference import run_core
from tests.frontends.tensorflow.tf_helpers import load_bytes, rand


def _node(graph, name, op, inputs=(), **attrs):
    node = graph.node.add(name=name, op=op)
    node.input.extend(inputs)
    for key, value in attrs.items():
        node.attr[key].CopyFrom(value)
    return node


def _placeholder(graph, name, shape):
    attr = pb.AttrValue()
    for d in shape:
        attr.shape.dim.add(size=d)
    return _node(graph, name, "Placeholder", dtype=pb.AttrValue(type=pb.DT_FLOAT), shape=attr)


def _const(graph, name, array):
    array = np.asarray(array)
    dtype = {np.dtype("float32"): pb.DT_FLOAT, np.dtype("int32"): pb.DT_INT32,
             np.dtype("bool"): pb.DT_BOOL}[array.dtype]
    value = pb.AttrValue()
    value.tensor.dtype = dtype
    for d in array.shape:
        value.tensor.tensor_shape.dim.add(size=d)
    value.tensor.tensor_content = array.tobytes()
    return _node(graph, name, "Const", dtype=pb.AttrValue(type=dtype), value=value)


def _relu_graph() -> pb.GraphDef:
    graph = pb.GraphDef()
    _placeholder(graph, "x", [2, 3])
    _node(graph, "r", "Relu", ["x"], T=pb.AttrValue(type=pb.DT_FLOAT))
    return graph


def test_binary_and_text_forms_give_the_same_numbers(tmp_path):
    from google.protobuf import text_format

    graph = _relu_graph()
    x = rand(2, 3)
    for name, data in (("g.pb", graph.SerializeToString()),
                       ("g.pbtxt", text_format.MessageToString(graph).encode())):
        model = load_bytes(tmp_path, data, name)
        out = run_core(model, {"x": x})[model.graph.outputs[0].name]
        np.testing.assert_array_equal(out, np.maximum(x, 0))
        assert model.metadata["source_framework"] == "tensorflow"
        assert model.metadata["source_file"] == name


def test_splatted_constant_fills_like_tensorflow(tmp_path):
    graph = pb.GraphDef()
    _placeholder(graph, "x", [2, 3])
    value = pb.AttrValue()
    value.tensor.dtype = pb.DT_FLOAT
    value.tensor.tensor_shape.dim.add(size=2)
    value.tensor.tensor_shape.dim.add(size=3)
    value.tensor.float_val.extend([1.0, 2.5])  # fewer values than elements: the last repeats
    _node(graph, "c", "Const", dtype=pb.AttrValue(type=pb.DT_FLOAT), value=value)
    _node(graph, "add", "AddV2", ["x", "c"])
    model = load_bytes(tmp_path, graph.SerializeToString())
    x = rand(2, 3)
    out = run_core(model, {"x": x})["add"]
    np.testing.assert_allclose(out, x + np.array([[1.0, 2.5, 2.5], [2.5, 2.5, 2.5]]))


def _bad(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ModelLoadError) as info:
        load(path, ConvertOptions())
    message = str(info.value)
    assert "\n" not in message and name in message
    return message


def test_bad_files_are_one_clear_line(tmp_path):
    good = _relu_graph().SerializeToString()
    assert "empty" in _bad(tmp_path, "empty.pb", b"")
    assert "GraphDef" in _bad(tmp_path, "noise.pb", np.random.default_rng(1).bytes(3000))
    for cut in (3, len(good) // 2, len(good) - 2):
        _bad(tmp_path, f"cut{cut}.pb", good[:cut])
    assert "text GraphDef" in _bad(tmp_path, "garbage.pb", b"hello, this is not a graph {\n")
    assert "line" in _bad(tmp_path, "syntax.pbtxt", b'node {\n  name: "a"\n  op: \n}\n}')
    assert "HDF5" in _bad(tmp_path, "model.pb", b"\x89HDF\r\n\x1a\n" + bytes(100))
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("config.json", "{}")
    assert "ZIP" in _bad(tmp_path, "zipped.pb", archive.read_bytes())
    with pytest.raises(ModelLoadError):
        load(tmp_path / "missing.pb", ConvertOptions())


def test_structural_errors(tmp_path):
    graph = pb.GraphDef()
    _placeholder(graph, "x", [2, 3])
    _node(graph, "a", "Relu", ["x", "b"][:1] + ["b"])
    _node(graph, "b", "AddV2", ["a", "x"])
    _node(graph, "out", "Relu", ["b"])
    with pytest.raises(InvalidModelError, match="cycle"):
        load_bytes(tmp_path, graph.SerializeToString())
    graph = _relu_graph()
    _node(graph, "y", "AddV2", ["r", "nowhere:0"])
    with pytest.raises(InvalidModelError, match="no node produces"):
        load_bytes(tmp_path, graph.SerializeToString())


def test_unknown_dims_need_input_shape(tmp_path):
    graph = pb.GraphDef()
    _placeholder(graph, "img", [-1, -1, -1, 1])
    _node(graph, "r", "Relu", ["img"])
    with pytest.raises(InvalidModelError, match="--input-shape img="):
        load_bytes(tmp_path, graph.SerializeToString())
    model = load_bytes(tmp_path, graph.SerializeToString(),
                       input_shapes={"img": [2, 5, 7, 1]})
    assert model.graph.inputs[0].shape == (2, 5, 7, 1)
    assert model.graph.inputs[0].layout == "NHWC"


def test_all_unsupported_nodes_in_one_error(tmp_path):
    graph = _relu_graph()
    _node(graph, "u1", "Cumsum", ["r", "r"])
    _node(graph, "u2", "Lgamma", ["u1"])
    _node(graph, "u3", "Lgamma", ["r"])
    _node(graph, "m", "MirrorPad", ["r", "r"], mode=pb.AttrValue(s=b"REFLECT"))
    _node(graph, "out", "AddN", ["u2", "u3", "m"])
    with pytest.raises(UnsupportedOpError) as info:
        load_bytes(tmp_path, graph.SerializeToString())
    names = sorted(p.node for p in info.value.problems)
    assert names == ["m", "u1", "u2", "u3"]


def test_constant_switch_merge_is_resolved(tmp_path):
    graph = _relu_graph()
    _const(graph, "pred", np.array(False))
    _node(graph, "sw", "Switch", ["r", "pred"])
    _node(graph, "on_true", "Neg", ["sw:1"])
    _node(graph, "on_false", "Abs", ["sw:0"])
    _node(graph, "merge", "Merge", ["on_true", "on_false"])
    _node(graph, "out", "Sigmoid", ["merge"])
    model = load_bytes(tmp_path, graph.SerializeToString())
    assert "Neg" not in model.graph.op_counts()
    x = rand(2, 3)
    out = run_core(model, {"x": x})["out"]
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-np.abs(np.maximum(x, 0)))), rtol=1e-6)


def test_nchw_conv_keeps_its_format(tmp_path):
    import tensorflow as tf

    graph = pb.GraphDef()
    _placeholder(graph, "x", [2, 3, 7, 5])
    w = rand(3, 2, 3, 4, seed=3)
    _const(graph, "w", w)
    strides = pb.AttrValue()
    strides.list.i.extend([1, 1, 2, 1])
    _node(graph, "conv", "Conv2D", ["x", "w"], strides=strides,
          padding=pb.AttrValue(s=b"SAME"), data_format=pb.AttrValue(s=b"NCHW"))
    _const(graph, "b", rand(4, seed=4))
    _node(graph, "out", "BiasAdd", ["conv", "b"], data_format=pb.AttrValue(s=b"NCHW"))
    model = load_bytes(tmp_path, graph.SerializeToString())
    assert model.graph.inputs[0].layout == "NCHW"
    x = rand(2, 3, 7, 5)
    got = run_core(model, {"x": x})["out"]
    want = tf.nn.conv2d(x.transpose(0, 2, 3, 1), w, [1, 2, 1, 1], "SAME").numpy() + rand(4, seed=4)
    np.testing.assert_allclose(got, want.transpose(0, 3, 1, 2), atol=1e-5)


def test_converting_a_pb_never_imports_tensorflow(tmp_path):
    path = tmp_path / "g.pb"
    path.write_bytes(_relu_graph().SerializeToString())
    code = (
        "import sys\n"
        "from nhwc_onnx.frontends.tensorflow import load\n"
        f"model = load({str(path)!r})\n"
        "assert len(model.graph) == 1\n"
        "print('tensorflow' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_absurd_shapes_and_duplicate_names(tmp_path):
    graph = pb.GraphDef()
    _placeholder(graph, "x", [1, 1 << 40])
    _node(graph, "r", "Relu", ["x"])
    with pytest.raises(InvalidModelError, match="absurd"):
        load_bytes(tmp_path, graph.SerializeToString())
    for dims in ([1 << 20, 1 << 20, 1 << 10], [1 << 15, 1 << 15]):  # splats of 4 TB and 4 GB
        graph = pb.GraphDef()
        _placeholder(graph, "x", [2])
        value = pb.AttrValue()
        value.tensor.dtype = pb.DT_FLOAT
        for d in dims:
            value.tensor.tensor_shape.dim.add(size=d)
        value.tensor.float_val.append(1.0)
        _node(graph, "c", "Const", dtype=pb.AttrValue(type=pb.DT_FLOAT), value=value)
        _node(graph, "add", "AddV2", ["x", "c"])
        with pytest.raises(InvalidModelError):
            load_bytes(tmp_path, graph.SerializeToString())
    graph = _relu_graph()
    _node(graph, "r", "Abs", ["x"])
    with pytest.raises(InvalidModelError, match="two nodes are named 'r'"):
        load_bytes(tmp_path, graph.SerializeToString())


def test_mutated_graphs_raise_only_project_errors(tmp_path):
    """A bounded, seeded mutation fuzz: flipped, deleted and inserted bytes."""
    import random

    from nhwc_onnx.errors import NhwcOnnxError

    graph = _relu_graph()
    _const(graph, "w", rand(3, 2, 3, 4, seed=1))
    _const(graph, "big", rand(30, 20, seed=2))  # large enough to be lifted (wire.py)
    _node(graph, "mm", "MatMul", ["big", "big"], transpose_b=pb.AttrValue(b=True))
    _node(graph, "out", "AddN", ["mm", "mm"])
    base = graph.SerializeToString()
    rng = random.Random(0)
    path = tmp_path / "fuzz.pb"
    for _ in range(400):
        data = bytearray(base)
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(len(data))
            kind = rng.random()
            if kind < 0.6:
                data[pos] = rng.randrange(256)
            elif kind < 0.8:
                del data[pos:pos + rng.randint(1, 40)]
            else:
                data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
        path.write_bytes(bytes(data))
        with contextlib.suppress(NhwcOnnxError):
            load(path, ConvertOptions())


def test_large_weights_are_read_only_views_of_the_mapped_file(tmp_path):
    import mmap

    graph = pb.GraphDef()
    _placeholder(graph, "x", [2, 300])
    weights = rand(300, 1000, seed=3)  # 1.2 MB: viewed in place, pages released when dropped
    _const(graph, "w", weights)
    _node(graph, "y", "MatMul", ["x", "w"], T=pb.AttrValue(type=pb.DT_FLOAT))
    model = load_bytes(tmp_path, graph.SerializeToString())
    (w,) = [v.const for v in model.graph.constants() if v.const.size == weights.size]
    assert np.array_equal(w, weights)
    assert not w.flags.writeable and not w.flags.owndata
    base = w
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base.obj if isinstance(base, memoryview) else base, mmap.mmap)
    x = rand(2, 300, seed=4)
    (got,) = run_core(model, {"x": x}).values()
    np.testing.assert_allclose(got, x @ weights, rtol=1e-5, atol=1e-5)


def test_a_savedmodel_graph_file_points_to_its_folder(tmp_path):
    """A SavedModel's saved_model.pb (schema version, then a MetaGraphDef) given as a .pb:
    the message names the folder to convert instead (it said 'corrupt'), exit 2."""
    from tests.cli_runner import run_cli

    folder = tmp_path / "exported"
    (folder / "variables").mkdir(parents=True)
    graph = _relu_graph().SerializeToString()
    meta_graph = b"\x12" + bytes([len(graph)]) + graph  # MetaGraphDef.graph_def (field 2)
    saved = b"\x08\x01" + b"\x12" + bytes([len(meta_graph)]) + meta_graph
    assert len(graph) < 100  # one-byte lengths above
    (folder / "saved_model.pb").write_bytes(saved)
    result = run_cli("convert", folder / "saved_model.pb", "-o", tmp_path / "out.onnx")
    assert result.exit_code == 2, result.output
    assert f"pass the SavedModel folder '{folder}'" in result.stderr
    # the same bytes under another name are just not a GraphDef
    assert "SavedModel folder" not in _bad(tmp_path, "other.pb", saved)


@pytest.mark.parametrize("command", ["convert", "info"])
def test_the_graph_file_of_a_savedmodel_says_to_pass_its_folder(command, tmp_path):
    from tests.cli_runner import run_cli

    folder = tmp_path / "exported"
    (folder / "variables").mkdir(parents=True)
    # a SavedModel proto (saved_model_schema_version: 1, one empty MetaGraphDef), which is
    # not a GraphDef
    (folder / "saved_model.pb").write_bytes(b"\x08\x01\x12\x00")
    args = ["-o", tmp_path / "m.onnx"] if command == "convert" else []
    result = run_cli(command, folder / "saved_model.pb", *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().endswith(
        f"the graph file of a SavedModel, not a GraphDef; pass the SavedModel folder "
        f"'{folder}' as the source"), result.stderr
