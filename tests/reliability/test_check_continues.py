"""`nhwc-onnx check a b c` reports every file even when one of them hits an internal error
, through the real command line in a child process."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
from onnx import TensorProto

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# Runs the CLI with validate() raising a plain bug for one chosen file: an internal error
# that no fix of a particular loader can make go away.
CHILD = """
import sys
import nhwc_onnx.schemas as schemas
real = schemas.validate
def validate(model):
    if model.graph.name == "BUG":
        raise RuntimeError("planted bug")
    return real(model)
schemas.validate = validate
from nhwc_onnx.cli import main
sys.argv = ["nhwc-onnx", *sys.argv[1:]]
main()
"""


def _run(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-c", CHILD, *map(str, args)], check=False,
                          capture_output=True, text=True, timeout=120, env=env)


def _model_named(path: Path, graph_name: str) -> Path:
    proto = onnx.load(str(EXAMPLES / "tiny_convnet.onnx"))
    proto.graph.name = graph_name
    onnx.save(proto, str(path))
    return path


def _nul_location(path: Path) -> Path:
    """An external-data location with a NUL byte (made os calls raise ValueError)."""
    proto = onnx.load(str(EXAMPLES / "tiny_convnet.onnx"))
    t = proto.graph.initializer[0]
    t.ClearField("raw_data")
    t.ClearField("float_data")
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "w\0.bin"), ("offset", "0"), ("length", "16")):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    path.write_bytes(proto.SerializeToString())
    return path


def test_one_file_internal_error_does_not_hide_the_others(tmp_path):
    a = shutil.copy(EXAMPLES / "mlp_constants.onnx", tmp_path / "a.onnx")
    b = _model_named(tmp_path / "b.onnx", "BUG")
    c = shutil.copy(EXAMPLES / "invalid" / "broken.onnx", tmp_path / "c.onnx")
    proc = _run("check", a, b, c)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{a}: valid" in proc.stdout
    assert f"{c}: INVALID, 3 problem(s)" in proc.stdout
    assert f"{b}: internal error in nhwc-onnx (RuntimeError: planted bug)" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "3 files: 1 valid, 1 invalid, 0 unreadable, 1 internal error(s)" in proc.stdout

    as_json = _run("check", "--format", "json", a, b, c)
    data = json.loads(as_json.stdout)
    assert [f["status"] for f in data["files"]] == ["valid", "error", "invalid"]
    assert as_json.returncode == 1


def test_real_world_oddity_in_the_middle_still_reports_both_neighbours(tmp_path):
    a = shutil.copy(EXAMPLES / "tiny_convnet.onnx", tmp_path / "a.onnx")
    b = _nul_location(tmp_path / "b.onnx")
    c = shutil.copy(EXAMPLES / "pad_pool_concat.onnx", tmp_path / "c.onnx")
    proc = _run("check", a, b, c)
    assert proc.returncode in (1, 2), proc.stdout + proc.stderr  # 2 once loaders refuse NUL
    assert f"{a}: valid" in proc.stdout and f"{c}: valid" in proc.stdout
    assert str(b) in proc.stderr and "Traceback" not in proc.stderr
