"""A truncated ``.keras`` file said ``File not found: filepath=...``
although it exists (Keras 3 takes a file without a ZIP directory for no file). The archive is
now looked at before TensorFlow is imported: a truncated or foreign file is "truncated or
not a .keras archive", exit 2, one line."""
from __future__ import annotations

import zipfile

import pytest

from nhwc_onnx.errors import EXIT_UNREADABLE, ModelLoadError
from nhwc_onnx.frontends.tensorflow import load
from nhwc_onnx.options import ConvertOptions
from tests.cli_runner import run_cli


@pytest.fixture(scope="module")
def keras_bytes(tmp_path_factory) -> bytes:
    import keras

    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((7, 5, 3)), keras.layers.Conv2D(4, 3),
                              keras.layers.ReLU()])
    path = tmp_path_factory.mktemp("keras") / "m.keras"
    model.save(path)
    return path.read_bytes()


@pytest.mark.parametrize("keep", [0.25, 0.5, 0.9, 0.999])
def test_truncated_keras_file_says_truncated(keep, keras_bytes, tmp_path):
    path = tmp_path / "m.keras"
    path.write_bytes(keras_bytes[:int(len(keras_bytes) * keep)])
    result = run_cli("convert", path, "-o", tmp_path / "m.onnx")
    err = result.stderr.strip()
    assert result.exit_code == EXIT_UNREADABLE, err
    assert len(err.splitlines()) == 1 and err.startswith("Error: "), err
    assert "truncated or not a .keras archive" in err and "File not found" not in err, err
    assert str(path) in err and not (tmp_path / "m.onnx").exists()


def test_zip_without_keras_config_is_not_a_keras_model(tmp_path):
    path = tmp_path / "m.keras"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "not a model")
    with pytest.raises(ModelLoadError, match="holds no config.json"):
        load(path, ConvertOptions())


def test_whole_keras_file_still_loads(keras_bytes, tmp_path):
    """The check refuses damaged archives only."""
    path = tmp_path / "m.keras"
    path.write_bytes(keras_bytes)
    model = load(path, ConvertOptions(batch=1))
    assert model.graph.op_counts()
