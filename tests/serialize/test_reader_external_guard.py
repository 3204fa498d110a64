"""The dialect reader (check / run / info / verify) reads external data only inside the model's
folder. Checked by behaviour, wherever the guard lives: the file outside holds
exactly the right bytes, so a reader without the guard would load the model and exit 0."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nhwc_onnx
from nhwc_onnx.errors import EXIT_UNREADABLE, ModelLoadError
from nhwc_onnx.serialize import load, save
from tests.cli_runner import run_cli

_OPENED: list[str] | None = None


def _record_opens(event: str, args: tuple) -> None:
    if _OPENED is not None and event == "open" and isinstance(args[0], (str, bytes, Path)):
        _OPENED.append(str(Path(args[0] if not isinstance(args[0], bytes)
                                else args[0].decode(errors="replace")).resolve()))


sys.addaudithook(_record_opens)  # audit hooks cannot be removed; it only records while a test asks


@pytest.fixture
def opened():
    global _OPENED
    _OPENED = []
    try:
        yield _OPENED
    finally:
        _OPENED = None


def _source(path: Path) -> Path:
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"], name="relu")], "net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 7, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _model_pointing_outside(tmp_path: Path, how: str) -> tuple[Path, Path]:
    """A converted model in ``model/`` whose weight file is ``secret/weights.bin`` (reached by
    ``../secret/...`` or by its absolute path): the same bytes the model had next to it."""
    folder = tmp_path / "model"
    folder.mkdir()
    result = nhwc_onnx.convert(_source(tmp_path / "net.onnx"), None)
    path = save(result.model, folder / "m.onnx", external_threshold=0)
    proto = onnx.load(str(path), load_external_data=False)
    externals = [t for t in proto.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    assert externals, "the fixture needs a weight stored outside the model file"
    location = {e.key: e.value for e in externals[0].external_data}["location"]
    secret = tmp_path / "secret" / "weights.bin"
    secret.parent.mkdir()
    shutil.move(folder / location, secret)
    target = "../secret/weights.bin" if how == "relative" else str(secret)
    for tensor in externals:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = target
    onnx.save(proto, str(path))
    # the premise: with the file back next to the model, the same model loads
    shutil.copy(secret, folder / location)
    for tensor in externals:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    onnx.save(proto, str(folder / "inside.onnx"))
    assert load(folder / "inside.onnx").graph.nodes
    (folder / location).unlink()
    (folder / "inside.onnx").unlink()
    return path, secret.resolve()


@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_load_refuses_external_data_outside_the_models_folder(tmp_path, how, opened):
    path, secret = _model_pointing_outside(tmp_path, how)
    opened.clear()  # building the fixture read the file; from here on nothing may
    with pytest.raises(ModelLoadError) as info:
        load(path)
    assert info.value.exit_code == EXIT_UNREADABLE
    assert str(secret) not in opened, "the file outside the folder was opened"


@pytest.mark.parametrize("how", ["relative", "absolute"])
@pytest.mark.parametrize("command", ["check", "info", "run"])
def test_cli_refuses_external_data_outside_the_models_folder(tmp_path, how, command, opened):
    path, secret = _model_pointing_outside(tmp_path, how)
    opened.clear()  # building the fixture read the file; from here on nothing may
    args = [command, str(path)]
    if command == "run":
        args += ["--random", "-o", str(tmp_path / "outputs")]
    result = run_cli(*args)
    assert result.exit_code == EXIT_UNREADABLE, result.output + result.stderr
    assert "Traceback" not in result.output + result.stderr
    assert str(secret) not in opened, "the file outside the folder was opened"
    assert not (tmp_path / "outputs").exists() or not any((tmp_path / "outputs").iterdir())
