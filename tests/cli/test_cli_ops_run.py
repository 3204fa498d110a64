"""`nhwc-onnx ops` and `nhwc-onnx run`."""
from __future__ import annotations

import json
import re
import sys
import types

import numpy as np
import pytest

from nhwc_onnx.frontends.base import OpRegistry
from nhwc_onnx.schemas import DIALECT_OPS
from nhwc_onnx.serialize import load
from nhwc_onnx.support.claims import frontend_registry

# -- ops ----------------------------------------------------------------------------------------


def test_ops_lists_every_dialect_op_with_attributes(invoke):
    result = invoke("ops")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{len(DIALECT_OPS.names())} ops in domain 'nhwc'")
    listed = [line.split()[0] for line in lines[1:]]
    assert listed == DIALECT_OPS.names()
    conv = next(line for line in lines if line.split()[0] == "Conv")
    assert 'pads: string = "VALID" in {"SAME", "VALID"}' in conv
    assert "(X, W, B?) -> (Y)" in conv


def test_ops_details_of_named_ops(invoke):
    result = invoke("ops", "Pad", "Concat")
    assert result.exit_code == 0
    assert result.stdout.startswith("Pad  (domain nhwc, layout class attribute)")
    assert "pads: ints (required)" in result.stdout
    assert "Concat  (domain nhwc" in result.stdout
    assert "inputs...   " in result.stdout or "inputs..." in result.stdout


def test_ops_unknown_name_is_a_usage_error(invoke):
    result = invoke("ops", "Conv2D")
    assert result.exit_code == 2
    assert "not dialect op(s): Conv2D" in result.stderr
    typo = invoke("ops", "conv", "Softmx", "Pad")
    assert typo.exit_code == 2 and typo.stdout == ""
    assert ("not dialect op(s): conv (did you mean Conv?), Softmx (did you mean Softmax?) "
            "(known: Abs,") in typo.stderr


def _fake_caffe_registry(monkeypatch) -> None:
    registry = OpRegistry("caffe")
    registry.register("Convolution", doc="conv with explicit pads", emits=("Conv",))(
        lambda *a: None)
    registry.register("ReLU", "ReLU6", emits={"ReLU": ("Relu",), "ReLU6": ("Erf",)})(
        lambda *a: None)
    fake = types.ModuleType("nhwc_onnx.frontends.caffe")
    fake.REGISTRY = registry
    monkeypatch.setitem(sys.modules, "nhwc_onnx.frontends.caffe", fake)


def test_ops_framework_with_names_shows_those_ops_or_refuses_unknown_ones(invoke, monkeypatch):
    _fake_caffe_registry(monkeypatch)
    named = invoke("ops", "--framework", "caffe", "ReLU6", "Convolution")
    assert named.exit_code == 0, named.output
    lines = named.stdout.splitlines()
    assert [line.split()[0] for line in lines if not line.startswith((" ", "- "))] == [
        "ReLU6", "Convolution"]
    assert lines[-1].startswith("- Claims are about nodes that compute on run-time data")
    assert lines[0].split()[1:] == ["never", "-"]
    assert lines[1] == "    why: Erf: no dialect op computes the error function"
    assert lines[2].split()[1:] == ["when", "AddBias,", "Conv,", "DepthwiseConv2d,", "Pad"]
    assert lines[3].startswith("    when: Conv: a 2-D convolution of a 4-D map with constant")
    unknown = invoke("ops", "--framework", "caffe", "relu", "Pooling")
    assert unknown.exit_code == 2 and unknown.stdout == ""
    assert unknown.stderr.strip().endswith(
        "not caffe op(s) with a converter: relu (did you mean ReLU?), Pooling "
        "(known: Convolution, ReLU, ReLU6)")


def test_ops_framework_lists_the_three_groups(invoke, monkeypatch):
    _fake_caffe_registry(monkeypatch)
    result = invoke("ops", "--framework", "caffe")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.splitlines()[0] == "3 caffe op(s): 1 always, 1 when, 1 never"
    always = text.index("always (1):\n  ReLU ")
    when = text.index("when (1):\n  Convolution ")
    never = text.index("never (1):\n  ReLU6 ")
    assert always < when < never


def test_ops_framework_json_has_one_claim_per_source_op(invoke, monkeypatch):
    _fake_caffe_registry(monkeypatch)
    result = invoke("ops", "--framework", "caffe", "--format", "json")
    assert result.exit_code == 0, result.output
    claims = json.loads(result.stdout)
    assert [c["op"] for c in claims] == ["Convolution", "ReLU", "ReLU6"]
    assert claims[1] == {"op": "ReLU", "converts": "always", "condition": "",
                         "dialect_ops": ["Relu"]}
    assert claims[0]["converts"] == "when" and "constant weights" in claims[0]["condition"]
    assert claims[2] == {"op": "ReLU6", "converts": "never", "dialect_ops": [],
                         "condition": "Erf: no dialect op computes the error function"}


def test_ops_json_of_the_real_onnx_frontend_makes_no_false_claims(invoke):
    """Ops refused as soon as they compute anything are listed as never (they were all
    "supported" before), ops with a condition as when."""
    claims = {c["op"]: c for c in json.loads(
        invoke("ops", "--framework", "onnx", "--format", "json").stdout)}
    for op in ("Exp", "Sqrt", "Softsign", "Reciprocal", "Div", "Equal", "ArgMax", "Cast"):
        assert claims[op]["converts"] != "always", op
    for op in ("Sqrt", "Softsign", "Reciprocal", "Equal", "ArgMax", "Erf", "LRN"):
        assert claims[op]["converts"] == "never" and claims[op]["condition"], op
    assert claims["Div"]["converts"] == "when"
    assert claims["Div"]["condition"].startswith("the divisor is constant")
    assert claims["Relu"] == {"op": "Relu", "converts": "always", "condition": "",
                              "dialect_ops": ["Relu"]}


def test_ops_json_of_dialect_ops(invoke):
    ops = json.loads(invoke("ops", "Pad", "--format", "json").stdout)
    assert [o["op"] for o in ops] == ["Pad"] and ops[0]["attributes"]["pads"] == \
        "pads: ints (required)"


def test_ops_framework_with_a_broken_frontend_import_fails_loudly(invoke, monkeypatch):
    monkeypatch.setitem(sys.modules, "nhwc_onnx.frontends.onnx", None)  # import fails
    result = invoke("ops", "--framework", "onnx")
    assert result.exit_code == 1
    assert "internal error" in result.stderr and "nhwc_onnx.frontends.onnx" in result.stderr
    assert "Traceback" not in result.output
    with pytest.raises(ModuleNotFoundError):  # the claims need the registry: no fallback
        frontend_registry("onnx")


# -- run ----------------------------------------------------------------------------------------


def _mlp_reference(model, x: np.ndarray) -> dict[str, np.ndarray]:
    """Independent numpy formula of examples/mlp_constants.onnx."""
    consts = {v.name: v.const.astype(np.float64) for v in model.graph.constants()}
    flat = x.astype(np.float64).reshape(x.shape[0], -1)  # Flatten axis=1 on the NHWC tensor
    fc1 = flat @ consts["fc1/W"].T + consts["fc1/B"]
    leaky = np.where(fc1 >= 0, fc1, 0.1 * fc1)
    fc2 = leaky @ consts["fc2/W"].T
    return {"fc1": fc1, "scores": 1.0 / (1.0 + np.exp(-fc2))}


def test_run_random_writes_npy_matching_a_numpy_formula(invoke, examples, tmp_path):
    model_path = examples / "mlp_constants.onnx"
    out = tmp_path / "out"
    result = invoke("run", model_path, "--random", "--seed", "5", "--output-dir", out,
                    "--intermediate", "fc1")
    assert result.exit_code == 0, result.output
    x = np.random.default_rng(5).standard_normal((2, 3, 2, 5)).astype(np.float32)
    expected = _mlp_reference(load(model_path), x)
    scores = np.load(out / "scores.npy")
    fc1 = np.load(out / "fc1.npy")
    assert scores.shape == (2, 4) and scores.dtype == np.float32
    np.testing.assert_allclose(scores, expected["scores"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(fc1, expected["fc1"], rtol=1e-4, atol=1e-4)
    assert "output scores: float32 2x4" in result.stdout
    line = next(li for li in result.stdout.splitlines() if li.startswith("output scores"))
    stats = re.search(r"min (\S+)  max (\S+)  mean (\S+)  std (\S+)", line).groups()
    s = expected["scores"]
    np.testing.assert_allclose([float(v) for v in stats], [s.min(), s.max(), s.mean(), s.std()],
                               rtol=1e-4, atol=1e-5)
    assert "input  x: float32 2x3x2x5" in result.stdout
    assert f"-> {out / 'scores.npy'}" in result.stdout


def test_run_with_input_files(invoke, examples, tmp_path):
    model_path = examples / "mlp_constants.onnx"
    x = np.random.default_rng(11).uniform(-3, 3, (2, 3, 2, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = invoke("run", model_path, "--input", f"x={tmp_path / 'x.npy'}", "-o", tmp_path)
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(np.load(tmp_path / "scores.npy"),
                               _mlp_reference(load(model_path), x)["scores"], rtol=1e-4,
                               atol=1e-4)


def test_run_convnet_example_random(invoke, examples, tmp_path):
    result = invoke("run", examples / "tiny_convnet.onnx", "--random", "-o", tmp_path)
    assert result.exit_code == 0, result.output
    probs = np.load(tmp_path / "probabilities.npy")
    assert probs.shape == (1, 5)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)  # a softmax
    assert (probs > 0).all()


def test_run_default_output_dir(invoke, examples, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("run", examples / "pad_pool_concat.onnx", "--random")
    assert result.exit_code == 0, result.output
    assert np.load(tmp_path / "pad_pool_concat_outputs" / "upsample.npy").shape == (1, 12, 10, 6)


def test_run_input_errors_are_clear(invoke, examples, tmp_path):
    model_path = examples / "mlp_constants.onnx"
    no_data = invoke("run", model_path, "-o", tmp_path)
    assert no_data.exit_code == 2
    assert "no data for input(s) x" in no_data.stderr
    np.save(tmp_path / "x64.npy", np.zeros((2, 3, 2, 5)))
    wrong_type = invoke("run", model_path, "--input", f"x={tmp_path / 'x64.npy'}")
    assert wrong_type.exit_code == 2
    assert "needs float32, the file holds float64" in wrong_type.stderr
    np.save(tmp_path / "small.npy", np.zeros((2, 3, 2, 4), np.float32))
    wrong_shape = invoke("run", model_path, "--input", f"x={tmp_path / 'small.npy'}")
    assert wrong_shape.exit_code == 2
    assert "needs shape (2, 3, 2, 5)" in wrong_shape.stderr
    unknown = invoke("run", model_path, "--input", f"y={tmp_path / 'small.npy'}")
    assert unknown.exit_code == 2 and "no input 'y' (inputs: x)" in unknown.stderr
    malformed = invoke("run", model_path, "--input", "x")
    assert malformed.exit_code == 2 and "expected NAME=FILE.npy" in malformed.stderr
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    unreadable = invoke("run", model_path, "--input", f"x={tmp_path / 'bad.npy'}")
    assert unreadable.exit_code == 2 and "cannot be read as a .npy array" in unreadable.stderr
    missing = invoke("run", model_path, "--random", "--intermediate", "nope", "-o", tmp_path)
    assert missing.exit_code == 2 and "no tensor named 'nope'" in missing.stderr


def test_run_refuses_an_invalid_model(invoke, examples, tmp_path):
    result = invoke("run", examples / "invalid/broken.onnx", "--random", "-o", tmp_path)
    assert result.exit_code == 1
    assert "3 dialect rule violation(s)" in result.stderr
    assert "node 'add_broadcast' (Add) [same-shape]" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_run_unreadable_model_exit_2(invoke, tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"\x08")
    result = invoke("run", tmp_path / "m.onnx", "--random")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {tmp_path / 'm.onnx'}: ")


def test_run_without_onnxruntime_is_a_clear_exit_2(invoke, examples, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    result = invoke("run", examples / "mlp_constants.onnx", "--random", "-o", tmp_path)
    assert result.exit_code == 2
    assert "needs 'onnxruntime'" in result.stderr
    assert "pip install 'nhwc-onnx[verify]'" in result.stderr
    assert "Traceback" not in result.output


def test_debug_lets_the_traceback_through(invoke, examples, tmp_path):
    from nhwc_onnx.errors import SchemaValidationError

    result = invoke("--debug", "run", examples / "invalid/broken.onnx", "--random")
    assert isinstance(result.exception, SchemaValidationError)


def test_internal_errors_are_one_line_without_debug(invoke, examples, tmp_path, monkeypatch):
    import nhwc_onnx.runtime

    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(nhwc_onnx.runtime, "run", explode)
    result = invoke("run", examples / "mlp_constants.onnx", "--random", "-o", tmp_path)
    assert result.exit_code == 1
    assert result.stderr.strip() == ("Error: internal error in nhwc-onnx (RuntimeError: boom); "
                                     "rerun with --debug for the traceback")


def test_a_reader_that_goes_away_ends_the_command_quietly():
    # `nhwc-onnx ops ... | head -1`: more output than a pipe holds, the reader gone after one
    # line; the command stops with exit 1 and nothing on stderr (no traceback, no "Exception
    # ignored" from the final flush)
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "nhwc_onnx.cli", "ops", *["Conv"] * 300],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=120) == 1
    assert first.startswith(b"Conv  (domain nhwc") and stderr == b""


@pytest.mark.parametrize("args", [["ops", "Conv"], ["--version"], ["convert", "-h"],
                                  ["check", "EXAMPLES/mlp_constants.onnx"]],
                         ids=["command", "version", "help of a command", "check"])
def test_a_full_stdout_is_one_error_line(args, examples):
    # `nhwc-onnx ... > /dev/full`: every write fails with ENOSPC; one line says so, exit 1
    import subprocess

    args = [a.replace("EXAMPLES", str(examples)) for a in args]
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "nhwc_onnx.cli", *args], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    assert proc.returncode == 1
    assert proc.stderr == "Error: cannot write to standard output (No space left on device)\n"


def test_every_onnx_default_domain_op_answers_with_its_claim(invoke):
    """Each op of the ONNX default domain answers always / when / never (exit 0); one without
    a converter is never, with its reason."""
    import onnx

    names = sorted({s.name for s in onnx.defs.get_all_schemas() if s.domain in ("", "ai.onnx")})
    result = invoke("ops", "--framework", "onnx", "--format", "json", *names)
    assert result.exit_code == 0, result.stderr
    claims = {c["op"]: c for c in json.loads(result.stdout)}
    assert sorted(claims) == names
    assert all(c["converts"] in ("always", "when", "never") for c in claims.values())
    assert all(c["condition"] for c in claims.values() if c["converts"] != "always")
    for op in ("LayerNormalization", "Einsum", "Mod", "InstanceNormalization"):
        assert claims[op]["converts"] == "never", op
    assert "standard deviation" in claims["LayerNormalization"]["condition"]


def test_the_onnx_listing_puts_ops_without_converter_in_the_never_group(invoke):
    text = invoke("ops", "--framework", "onnx").stdout
    never = text[text.index("\nnever ("):]
    for op in ("LayerNormalization", "Einsum", "Mod", "InstanceNormalization"):
        assert f"\n  {op} " in never, op


def test_a_tensorflow_op_without_converter_is_never_and_a_non_op_a_usage_error(invoke):
    einsum = invoke("ops", "--framework", "tf", "Einsum", "Mod")
    assert einsum.exit_code == 0, einsum.stderr
    assert [line.split()[:2] for line in einsum.stdout.splitlines()
            if not line.startswith((" ", "- "))] == [["Einsum", "never"], ["Mod", "never"]]
    unknown = invoke("ops", "--framework", "tf", "Einsom")
    assert unknown.exit_code == 2 and unknown.stdout == ""
    assert "not tensorflow op(s): Einsom (did you mean Einsum?)" in unknown.stderr


@pytest.mark.slow
def test_any_tensorflow_raw_op_without_converter_is_never(invoke):
    """Ops outside the listing are known from TensorFlow's own registry."""
    result = invoke("ops", "--framework", "tf", "--format", "json", "Cumsum", "TopKV2")
    assert result.exit_code == 0, result.stderr
    assert [(c["op"], c["converts"]) for c in json.loads(result.stdout)] == [
        ("Cumsum", "never"), ("TopKV2", "never")]
