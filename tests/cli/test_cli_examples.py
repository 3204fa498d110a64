"""The committed example models are what examples/make_examples.py builds, and they behave."""
from __future__ import annotations

import importlib.util

from nhwc_onnx.schemas import validate
from nhwc_onnx.serialize import load


def _make_examples(examples):
    spec = importlib.util.spec_from_file_location("make_examples", examples / "make_examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_examples_are_up_to_date(examples, tmp_path):
    written = _make_examples(examples).build_all(tmp_path)
    assert len(written) == 4
    for path in written:
        rel = path.relative_to(tmp_path)
        committed = examples / rel
        assert committed.is_file(), f"{rel} is missing: run python examples/make_examples.py"
        assert committed.read_bytes() == path.read_bytes(), (
            f"{rel} is stale: run python examples/make_examples.py")


def test_valid_examples_validate_and_the_broken_one_breaks_three_rules(examples):
    module = _make_examples(examples)
    for rel in module.VALID_EXAMPLES:
        assert validate(load(examples / rel)) == [], rel
    issues = validate(load(examples / "invalid/broken.onnx"))
    assert sorted(i.rule for i in issues) == ["attribute", "same-shape", "weight-shape"]


def test_constant_node_example_really_uses_constant_nodes(examples):
    import onnx

    proto = onnx.load(str(examples / "mlp_constants.onnx"))
    assert len(proto.graph.initializer) == 0
    assert sum(n.op_type == "Constant" for n in proto.graph.node) == 3
    for rel in ("tiny_convnet.onnx", "pad_pool_concat.onnx", "mlp_constants.onnx"):
        onnx.checker.check_model(str(examples / rel), full_check=True)


def test_demo_script_checks_and_runs_every_example(examples, tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(examples / "demo.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = proc.stdout.split("\nSummary\n", 1)[1].splitlines()
    assert sum(line.startswith("  ok ") for line in summary) == 7
    assert "invalid/broken.onnx" in proc.stdout and "invalid, as intended" in proc.stdout
    assert "7 example model(s), 0 unexpected result(s)" in proc.stdout
    for stem in ("small_cnn", "tiny_net", "small_nchw"):  # converted with --verify, checked
        assert (tmp_path / f"{stem}.nhwc.onnx").is_file()
    assert proc.stdout.count("verification: MATCH") == 3
    for stem, output in (("tiny_convnet", "probabilities"), ("pad_pool_concat", "upsample"),
                         ("mlp_constants", "scores")):
        assert (tmp_path / stem / f"{output}.npy").is_file()
