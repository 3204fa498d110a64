"""save/load on disk: atomic writes, external data, determinism, unreadable files."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from nhwc_onnx.errors import (
    InvalidAttributeError,
    ModelLoadError,
    NhwcOnnxError,
    OutputPathError,
)
from nhwc_onnx.ir import NHWC, Graph, Model, Value
from nhwc_onnx.serialize import from_onnx, load, parse_model_bytes, save, to_bytes
from nhwc_onnx.serialize import writer as writer_module

REPO = Path(__file__).resolve().parents[2]


def test_save_then_load_round_trips(rich_model, tmp_path):
    path = save(rich_model, tmp_path / "m.onnx")
    assert path.read_bytes() == to_bytes(rich_model)
    onnx.checker.check_model(str(path), full_check=True)
    back = load(path)
    save(back, tmp_path / "again.onnx")
    assert (tmp_path / "again.onnx").read_bytes() == path.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.onnx", "m.onnx"]


def test_save_creates_missing_directories_and_refuses_a_directory(rich_model, tmp_path):
    save(rich_model, tmp_path / "a" / "b" / "m.onnx")
    assert (tmp_path / "a" / "b" / "m.onnx").is_file()
    with pytest.raises(OutputPathError, match="is a directory"):
        save(rich_model, tmp_path / "a")


def _dir_listing(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def test_failed_save_leaves_old_file_and_no_temp_files(rich_model, tmp_path, monkeypatch):
    target = tmp_path / "m.onnx"
    target.write_bytes(b"old contents")

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer_module.os, "fsync", broken_fsync)
    with pytest.raises(OutputPathError,
                       match=r"cannot write the output \(No space left on device\)"):
        save(rich_model, target)
    assert target.read_bytes() == b"old contents"
    assert _dir_listing(tmp_path) == ["m.onnx"]


def test_failed_serialization_leaves_old_file_and_no_temp_files(rich_model, tmp_path):
    target = tmp_path / "m.onnx"
    target.write_bytes(b"old contents")
    rich_model.graph.find_node("softmax").attrs["axis"] = object()
    with pytest.raises(InvalidAttributeError):
        save(rich_model, target, external_threshold=0)  # with a side file under way too
    assert target.read_bytes() == b"old contents"
    assert _dir_listing(tmp_path) == ["m.onnx"]


def test_interrupted_rename_leaves_old_file(rich_model, tmp_path, monkeypatch):
    target = tmp_path / "m.onnx"
    target.write_bytes(b"old contents")

    def broken_replace(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(writer_module.os, "replace", broken_replace)
    with pytest.raises(KeyboardInterrupt):
        save(rich_model, target)
    assert target.read_bytes() == b"old contents"
    assert _dir_listing(tmp_path) == ["m.onnx"]


def test_written_files_get_normal_permissions(rich_model, tmp_path):
    path = save(rich_model, tmp_path / "m.onnx")
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_large_weights_go_to_an_external_data_file(rich_model, tmp_path):
    path = save(rich_model, tmp_path / "big.onnx", external_threshold=0)
    data_file = tmp_path / "big.onnx.data"
    assert _dir_listing(tmp_path) == ["big.onnx", "big.onnx.data"]
    proto = onnx.load(str(path), load_external_data=False)
    external = [t for t in proto.graph.initializer
                if t.data_location == onnx.TensorProto.EXTERNAL]
    assert external, "tensors over the size floor must be stored outside the model"
    for t in external:
        info = {e.key: e.value for e in t.external_data}
        assert info["location"] == "big.onnx.data"  # relative: the pair can move together
        assert int(info["offset"]) % 64 == 0
    onnx.checker.check_model(str(path), full_check=True)
    # onnx's own loader and ours read the same numbers
    full = onnx.load(str(path))
    theirs = {t.name: onnx.numpy_helper.to_array(t) for t in full.graph.initializer}
    ours = {v.name: v.const for v in load(path).graph.constants()}
    expected = {v.name: v.const for v in rich_model.graph.constants()}
    assert theirs.keys() == ours.keys() == expected.keys()
    for name, arr in expected.items():
        np.testing.assert_array_equal(theirs[name], arr)
        np.testing.assert_array_equal(ours[name], arr)
    # saving the loaded model again gives the same pair of files
    save(load(path), tmp_path / "copy" / "big.onnx", external_threshold=0)
    assert (tmp_path / "copy" / "big.onnx.data").read_bytes() == data_file.read_bytes()
    assert (tmp_path / "copy" / "big.onnx").read_bytes() == path.read_bytes()


def test_missing_or_truncated_external_data_is_a_load_error(rich_model, tmp_path):
    path = save(rich_model, tmp_path / "big.onnx", external_threshold=0)
    data_file = tmp_path / "big.onnx.data"
    data_file.write_bytes(data_file.read_bytes()[:100])
    with pytest.raises(ModelLoadError, match="truncated"):
        load(path)
    data_file.unlink()
    with pytest.raises(ModelLoadError, match="external data file 'big.onnx.data' does not exist"):
        load(path)


def test_small_models_have_no_external_data(rich_model, tmp_path):
    save(rich_model, tmp_path / "m.onnx")
    assert _dir_listing(tmp_path) == ["m.onnx"]


_BUILD_IN_SUBPROCESS = """
import sys
sys.path.insert(0, sys.argv[2])
from make_examples import build_all
from pathlib import Path
build_all(Path(sys.argv[1]))
"""


def test_bytes_are_identical_across_processes(tmp_path):
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / f"run{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", _BUILD_IN_SUBPROCESS, str(out),
                        str(REPO / "examples")], check=True, env=env, cwd=REPO)
        outs.append(out)
    files = sorted(p.relative_to(outs[0]) for p in outs[0].rglob("*.onnx"))
    assert len(files) >= 4
    for rel in files:
        assert (outs[0] / rel).read_bytes() == (outs[1] / rel).read_bytes(), rel


# -- unreadable input ---------------------------------------------------------------------------


def _one_line_error(path) -> str:
    with pytest.raises(ModelLoadError) as info:
        load(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    return message


def test_truncated_files_are_load_errors(rich_model, tmp_path):
    data = to_bytes(rich_model)
    # Cuts inside the trailing metadata entries can land on an entry boundary and still parse;
    # everything up to the end of the opset imports must be refused.
    proto = onnx.ModelProto()
    proto.ParseFromString(data)
    del proto.metadata_props[:]
    protected = len(proto.SerializeToString(deterministic=True))
    for cut in range(1, protected):
        with pytest.raises(ModelLoadError):
            parse_model_bytes(data[:cut], "cut.onnx")
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    assert "not an ONNX model" in _one_line_error(path)


def test_garbage_empty_and_text_files_are_load_errors(tmp_path):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    assert "not an ONNX model" in _one_line_error(garbage)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    assert "empty file" in _one_line_error(empty)
    text = tmp_path / "notes.onnx"
    text.write_text("This is not a model.\nJust some words, 42 of them.\n" * 20)
    assert "not an ONNX model" in _one_line_error(text)
    for name in ("graph.pb", "net.prototxt"):
        other = tmp_path / name
        other.write_text('name: "LeNet"\nlayer { name: "data" type: "Input" }\n')
        _one_line_error(other)


def test_missing_file_and_directory_are_load_errors(tmp_path):
    assert "no such file" in _one_line_error(tmp_path / "nope.onnx")
    assert "is a directory" in _one_line_error(tmp_path)


def test_a_foreign_valid_protobuf_is_not_taken_for_a_model(tmp_path):
    tensor = onnx.numpy_helper.from_array(np.ones((3, 2), np.float32), "t")
    path = tmp_path / "tensor.pb"
    path.write_bytes(tensor.SerializeToString())
    _one_line_error(path)


def test_standard_onnx_files_with_unnamed_nodes_load(tmp_path):
    node = onnx.helper.make_node("Relu", ["x"], ["y"])
    graph = onnx.helper.make_graph(
        [node, onnx.helper.make_node("Relu", ["y"], ["z"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
        [onnx.helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [2, 3])])
    path = tmp_path / "std.onnx"
    onnx.save(onnx.helper.make_model(graph), str(path))
    model = load(path)
    names = [n.name for n in model.graph.nodes]
    assert len(set(names)) == 2 and all(names)
    assert {n.domain for n in model.graph.nodes} == {""}


def test_value_layout_and_unknown_dims_survive(tmp_path):
    g = Graph("dims")
    x = g.add_input(Value("x", "float32", (None, 5, 3, 2), NHWC))
    y = g.make_node("Relu", [x], name="relu", domain="nhwc").output
    g.outputs.append(y)
    path = save(Model(g), tmp_path / "m.onnx")
    back = load(path)
    assert back.graph.inputs[0].shape == (None, 5, 3, 2)
    assert back.graph.inputs[0].layout == NHWC
    assert back.graph.outputs[0].shape == (None, 5, 3, 2)


def test_names_that_are_not_utf8_are_load_errors(rich_model):
    data = to_bytes(rich_model)
    assert data.count(b"softmax") >= 1
    corrupt = data.replace(b"softmax", b"\xffoftmax")
    with pytest.raises(ModelLoadError, match="not UTF-8 text"):
        from_onnx(parse_model_bytes(corrupt, "c.onnx"), label="c.onnx")


def test_corrupted_bytes_never_crash_load_validate_or_write(rich_model):
    from nhwc_onnx.schemas import validate

    data = to_bytes(rich_model)
    rng = np.random.default_rng(1)
    outcomes = {"refused": 0, "loaded": 0}
    for _ in range(300):
        buf = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            buf[int(rng.integers(0, len(buf)))] = int(rng.integers(0, 256))
        try:
            model = from_onnx(parse_model_bytes(bytes(buf)))
        except ModelLoadError:
            outcomes["refused"] += 1
            continue
        validate(model)
        with contextlib.suppress(NhwcOnnxError):  # a clear refusal is fine; only crashes are not
            to_bytes(model)
        outcomes["loaded"] += 1
    assert outcomes["refused"] > 0 and outcomes["loaded"] > 0


def test_constant_nodes_cannot_hold_models_over_the_external_data_limit(rich_model, tmp_path):
    with pytest.raises(OutputPathError, match="need ONNX external data"):
        save(rich_model, tmp_path / "m.onnx", weights_as_constants=True, external_threshold=100)
    assert list(tmp_path.iterdir()) == []


def _relu_chain(middle_shape):
    g = Graph()
    x = g.add_input(Value("x", shape=(1, 4, 5, 3), layout=NHWC))
    first = g.make_node("Relu", [x], name="first", domain="nhwc")
    first.outputs[0].shape = middle_shape
    second = g.make_node("Relu", [first.outputs[0]], name="second", domain="nhwc")
    second.outputs[0].shape = (1, 4, 5, 3)
    g.outputs = list(second.outputs)
    return Model(g), first.outputs[0].name


@pytest.mark.parametrize("middle_shape", [(1, 4, 5, 3), None])
def test_value_info_shapes_are_inferred_only_when_a_shape_is_missing(
        tmp_path, monkeypatch, middle_shape):
    runs = []

    def counted(model):
        runs.append(model)
        return real(model)

    real = writer_module.infer_shapes
    monkeypatch.setattr(writer_module, "infer_shapes", counted)
    model, middle = _relu_chain(middle_shape)
    path = save(model, tmp_path / "m.onnx")
    # every shape known (what a conversion gives): no second inference over the whole graph
    assert len(runs) == (0 if middle_shape else 1)
    infos = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim]
             for i in onnx.load(str(path)).graph.value_info}
    assert infos[middle] == [1, 4, 5, 3]  # known, or inferred for the file
