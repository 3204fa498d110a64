"""Reading files: bad bytes, external data confinement, structure errors, shapes, IR < 4."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nhwc_onnx.frontends.onnx.loader as loader_module
from nhwc_onnx.errors import InvalidModelError, ModelLoadError
from nhwc_onnx.frontends.onnx import load
from nhwc_onnx.options import ConvertOptions
from tests.core_reference import run_core
from tests.frontends.onnx.onnx_helpers import convert, make_model, run_ort


def _conv_relu() -> onnx.ModelProto:
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["y"])]
    return make_model(nodes, [("x", [2, 3, 7, 5])], [("y", None)], {"w": w})


def test_package_imports_the_onnx_library_not_itself():
    assert loader_module.onnx is onnx
    assert hasattr(loader_module.onnx, "ModelProto")


@pytest.mark.parametrize("content", [b"", os.urandom(0) + b"\x00\x01garbage\xff" * 50,
                                     b"name: 'not a model'\nlayer { type: 'Conv' }\n",
                                     b"PK\x03\x04rest-of-zip", b"\x89HDF\r\n\x1a\n....."])
def test_unreadable_files_are_one_line_model_load_errors(tmp_path, content):
    path = tmp_path / "model.onnx"
    path.write_bytes(content)
    with pytest.raises(ModelLoadError) as info:
        load(str(path))
    assert "\n" not in str(info.value)


def test_random_bytes_and_every_truncation_are_model_load_errors(tmp_path):
    data = _conv_relu().SerializeToString()
    path = tmp_path / "t.onnx"
    rng = np.random.default_rng(5)
    for cut in sorted(set(rng.integers(0, len(data), 40).tolist())):
        path.write_bytes(data[:cut])
        with pytest.raises(ModelLoadError):
            load(str(path))
    path.write_bytes(rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(ModelLoadError):
        load(str(path))


def test_missing_file(tmp_path):
    with pytest.raises(ModelLoadError, match="no such file"):
        load(str(tmp_path / "absent.onnx"))


def _external_model(tmp_path: Path, location: str, data: bytes | None, length=None):
    model = _conv_relu()
    w = model.graph.initializer[0]
    raw = numpy_helper.to_array(w).tobytes()
    w.ClearField("float_data")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": "0"}
    if length is not None:
        entries["length"] = str(length)
    for k, v in entries.items():
        e = w.external_data.add()
        e.key, e.value = k, v
    folder = tmp_path / "m"
    folder.mkdir(exist_ok=True)
    if data is not None:
        (folder / "weights.bin").write_bytes(raw if data == b"full" else data)
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path, raw


def test_external_data_inside_the_folder_loads(tmp_path):
    path, raw = _external_model(tmp_path, "weights.bin", b"full")
    core = load(str(path))
    w = next(v for v in core.graph.values() if v.is_const)
    assert w.const.tobytes() == raw


@pytest.mark.parametrize("location", ["/etc/passwd", "../weights.bin", "sub/../../weights.bin"])
def test_external_data_outside_the_folder_is_refused(tmp_path, location):
    (tmp_path / "weights.bin").write_bytes(b"\0" * 432)
    path, _ = _external_model(tmp_path, location, None)
    with pytest.raises(ModelLoadError, match="refused"):
        load(str(path))


def test_external_data_symlink_escaping_is_refused(tmp_path):
    outside = tmp_path / "secret.bin"
    outside.write_bytes(b"\0" * 432)
    path, _ = _external_model(tmp_path, "link.bin", None)
    os.symlink(outside, path.parent / "link.bin")
    with pytest.raises(ModelLoadError, match="outside"):
        load(str(path))


def test_external_data_missing_or_short(tmp_path):
    path, _ = _external_model(tmp_path, "weights.bin", None)
    with pytest.raises(ModelLoadError, match="does not exist"):
        load(str(path))
    path, _ = _external_model(tmp_path, "weights.bin", b"\0" * 100)
    with pytest.raises(ModelLoadError, match="too short"):
        load(str(path))


def test_cycle_dangling_and_duplicate_outputs_are_invalid_models():
    x = [("x", [2, 3])]
    cycle = make_model([helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"],
                                                                                 ["b"])],
                       x, [("b", None)])
    with pytest.raises(InvalidModelError, match="cycle"):
        convert(cycle)
    dangling = make_model([helper.make_node("Add", ["x", "ghost"], ["y"])], x, [("y", None)])
    with pytest.raises(InvalidModelError, match="ghost"):
        convert(dangling)
    twice = make_model([helper.make_node("Relu", ["x"], ["y"]),
                        helper.make_node("Sigmoid", ["x"], ["y"])], x, [("y", None)])
    with pytest.raises(InvalidModelError, match="produced twice"):
        convert(twice)


def test_symbolic_dims_need_shapes_and_say_so():
    model = _conv_relu()
    dim = model.graph.input[0].type.tensor_type.shape.dim[0]
    dim.dim_param = "batch"
    # The frontend alone (nhwc_onnx.convert keeps such a batch symbolic: tests/batch)
    with pytest.raises(InvalidModelError, match=r"axis \[0\].*--input-shape x=-1,3,7,5"):
        convert(model)
    core = convert(model, batch=2)
    assert core.graph.inputs[0].shape == (2, 3, 7, 5)
    core = convert(model, input_shapes={"x": [3, 3, 9, 6]})
    assert core.graph.inputs[0].shape == (3, 3, 9, 6)
    assert core.graph.inputs[0].layout == "NCHW"


def test_absurd_input_shape_is_refused():
    model = _conv_relu()
    with pytest.raises(InvalidModelError, match="absurd"):
        convert(model, input_shapes={"x": [1 << 20, 3, 1 << 20, 5]})


def test_ir3_initializers_listed_as_inputs_are_constants():
    model = _conv_relu()
    model.ir_version = 3
    w = model.graph.initializer[0]
    model.graph.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(w.dims)))
    core = convert(model)
    assert [v.name for v in core.graph.inputs] == ["x"]
    x = np.random.default_rng(1).standard_normal((2, 3, 7, 5)).astype(np.float32)
    model.ir_version = 8  # onnxruntime takes the IR 3 form at IR 8 as well
    want = run_ort(model, {"x": x})["y"]
    np.testing.assert_allclose(run_core(core, {"x": x})["y"], want, rtol=1e-4, atol=1e-4)


def test_load_from_path_sets_metadata(tmp_path):
    path = tmp_path / "net.onnx"
    path.write_bytes(_conv_relu().SerializeToString())
    core = load(str(path), ConvertOptions())
    assert core.metadata["source_framework"] == "onnx"
    assert core.metadata["source_file"] == "net.onnx"


def _big_conv_model(rng) -> onnx.ModelProto:
    """A Conv whose weight (64x32x5x5 = 200 KB) is lifted out of the parse, a small bias that
    stays in it, and a BatchNormalization folded into the Conv (its weight gets replaced)."""
    w = rng.standard_normal((64, 32, 5, 5)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    scale, shift = rng.uniform(0.5, 2, 64).astype(np.float32), rng.standard_normal(64)
    mean, var = rng.standard_normal(64), rng.uniform(0.5, 2, 64)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[5, 5]),
             helper.make_node("BatchNormalization", ["c", "s", "t", "m", "v"], ["y"])]
    inits = {"w": w, "b": b, "s": scale, "t": shift.astype(np.float32),
             "m": mean.astype(np.float32), "v": var.astype(np.float32)}
    return make_model(nodes, [("x", [1, 32, 9, 11])], [("y", None)], inits)


def test_large_initializers_are_read_only_views_of_the_mapped_file(tmp_path):
    import mmap

    rng = np.random.default_rng(3)
    proto = _big_conv_model(rng)
    path = tmp_path / "m.onnx"
    path.write_bytes(proto.SerializeToString())
    external: dict = {}
    loader_module.read_model(str(path), external)
    assert list(external) == ["w"]  # only the weight is over the lifting threshold
    w = external["w"]
    np.testing.assert_array_equal(w, numpy_helper.to_array(proto.graph.initializer[0]))
    assert not w.flags.writeable
    base = w
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base.obj if isinstance(base, memoryview) else base, mmap.mmap)
    # the conversion through the file computes what onnxruntime computes
    x = rng.standard_normal((1, 32, 9, 11)).astype(np.float32)
    (got,) = run_core(load(str(path), ConvertOptions()), {"x": x}).values()
    np.testing.assert_allclose(got, run_ort(proto, {"x": x})["y"], rtol=1e-4, atol=1e-4)


def test_a_lifted_initializer_with_the_wrong_size_is_refused(tmp_path):
    proto = _big_conv_model(np.random.default_rng(4))
    proto.graph.initializer[0].dims[0] = 63  # declares fewer elements than it stores
    path = tmp_path / "m.onnx"
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(ModelLoadError, match="initializer 'w'.*declares dims"):
        load(str(path), ConvertOptions())
