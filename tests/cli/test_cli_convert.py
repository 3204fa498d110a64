"""convert / verify / info run in-process (tests/cli_runner.py), plus one real subprocess."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nhwc_onnx.serialize import load, save

REPO = Path(__file__).resolve().parents[2]


def _conv_net(path: Path, with_unsupported: bool = False) -> Path:
    """NCHW 2x3x7x5 -> conv1 -> relu -> conv2 -> relu (-> LRN when asked)."""
    rng = np.random.default_rng(1)
    w1 = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((6, 4, 3, 3)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["y"], name="relu2"),
    ]
    out = "y"
    if with_unsupported:
        nodes.append(helper.make_node("Hardmax", ["y"], ["z"], name="norm"))
        nodes.append(helper.make_node("LpNormalization", ["z"], ["z2"], name="lp"))
        out = "z2"
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 7, 5])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], [w1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_convert_writes_a_valid_model_and_report(invoke, tmp_path):
    src = _conv_net(tmp_path / "net.onnx")
    out = tmp_path / "net.nhwc.onnx"
    report = tmp_path / "report.json"
    result = invoke("convert", src, "-o", out, "--verify", "--report", report)
    assert result.exit_code == 0, result.output + result.stderr
    assert "verification: MATCH" in result.output
    assert invoke("check", out).exit_code == 0
    data = json.loads(report.read_text())
    schema = json.loads((REPO / "docs" / "report-schema.json").read_text())
    jsonschema.validate(data, schema)
    assert data["io_permutations"] == {"x": [0, 2, 3, 1], "y": [0, 2, 3, 1]}
    assert data["target_ops"] == {"Conv": 2, "Relu": 2}
    assert {d["kind"] for d in data["decisions"]} >= {"padding"}
    assert data["verification"]["ok"] is True
    model = load(out)
    assert [tuple(v.shape) for v in model.graph.inputs] == [(2, 7, 5, 3)]


def test_report_schema_rejects_a_broken_report(tmp_path):
    schema = json.loads((REPO / "docs" / "report-schema.json").read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"source": "x", "framework": "keras"}, schema)


def test_unsupported_ops_listed_together_and_nothing_written(invoke, tmp_path):
    src = _conv_net(tmp_path / "net.onnx", with_unsupported=True)
    out = tmp_path / "out.onnx"
    result = invoke("convert", src, "-o", out)
    assert result.exit_code == 1
    assert "'norm' (Hardmax)" in result.stderr and "'lp' (LpNormalization)" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [src]


def test_existing_output_survives_a_failed_conversion(invoke, tmp_path):
    src = _conv_net(tmp_path / "net.onnx", with_unsupported=True)
    out = tmp_path / "out.onnx"
    out.write_bytes(b"previous")
    assert invoke("convert", src, "-o", out).exit_code == 1
    assert out.read_bytes() == b"previous"


def test_output_equal_to_input_is_refused(invoke, tmp_path):
    src = _conv_net(tmp_path / "net.onnx")
    before = src.read_bytes()
    result = invoke("convert", src, "-o", src)
    assert result.exit_code == 1
    assert "overwrite the input" in result.stderr
    assert src.read_bytes() == before


def test_unreadable_input_exits_2(invoke, tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x01garbage that is not onnx")
    result = invoke("convert", bad, "-o", tmp_path / "o.onnx")
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    missing = invoke("convert", tmp_path / "nope.onnx", "-o", tmp_path / "o.onnx")
    assert missing.exit_code == 2 and "no such file" in missing.stderr


def test_an_unknown_option_shows_the_usage_of_the_command_it_was_given_to(invoke, tmp_path):
    src = _conv_net(tmp_path / "net.onnx")
    out = tmp_path / "o.onnx"
    result = invoke("convert", src, "-o", out, "--force")
    assert result.exit_code == 2 and not out.exists()
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Usage: nhwc-onnx convert ")
    assert "Try 'nhwc-onnx convert -h' for help." in lines
    assert lines[-1] == "Error: No such option '--force'."
    # the same mistake placed before the command still names the command that runs
    early = invoke("--force", "check", src)
    assert early.exit_code == 2
    assert early.stderr.startswith("Usage: nhwc-onnx check ")
    assert "Try 'nhwc-onnx check -h' for help." in early.stderr.splitlines()
    # with no command there is only the top level to show
    bare = invoke("--force")
    assert bare.exit_code == 2
    assert bare.stderr.startswith("Usage: nhwc-onnx [OPTIONS] COMMAND")
    assert bare.stderr.splitlines()[-1] == "Error: No such option '--force'."


def test_a_mistyped_command_is_named_with_the_closest_one(invoke):
    typo = invoke("-q", "convrt", "model.pb")
    assert typo.exit_code == 2
    assert typo.stderr.startswith("Usage: nhwc-onnx [OPTIONS] COMMAND")
    assert typo.stderr.splitlines()[-1] == (
        "Error: no such command 'convrt'. Did you mean 'convert'? "
        "Commands: check, convert, info, lower, ops, run, verify.")
    unknown = invoke("zzz")
    assert unknown.exit_code == 2
    assert unknown.stderr.splitlines()[-1] == (
        "Error: no such command 'zzz'. Commands: check, convert, info, lower, ops, run, verify.")


def test_verify_catches_a_corrupted_weight_and_bisect_names_the_node(invoke, tmp_path):
    src = _conv_net(tmp_path / "net.onnx")
    out = tmp_path / "net.nhwc.onnx"
    assert invoke("convert", src, "-o", out).exit_code == 0
    model = load(out)
    conv2 = next(n for n in model.graph.nodes if n.op == "Conv" and n.name == "conv2")
    weight = conv2.inputs[1]
    corrupted = weight.const.copy()
    corrupted.flat[7] += 3.0
    weight.set_const(corrupted)
    save(model, out)
    ok_before = invoke("verify", src, out)
    assert ok_before.exit_code == 3, ok_before.output
    assert "MISMATCH" in ok_before.output
    result = invoke("verify", src, out, "--bisect", "--format", "json")
    assert result.exit_code == 3
    report = json.loads(result.output)
    assert report["first_divergence"]["node"] == "conv2"
    assert report["first_divergence"]["source_op"] in ("Conv", "")


def test_batch_mode_converts_the_good_and_reports_the_broken(invoke, tmp_path):
    good = _conv_net(tmp_path / "good.onnx")
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(good.read_bytes()[:100])
    out_dir = tmp_path / "out"
    result = invoke("convert", good, broken, "--output-dir", out_dir, "--jobs", "2")
    assert result.exit_code == 2
    assert (out_dir / "good.onnx").exists()
    assert not (out_dir / "broken.onnx").exists()
    assert "1 of 2 converted" in result.output
    assert "broken.onnx" in result.output and "failed" in result.output


def test_info_reads_sources_and_dialect_models(invoke, tmp_path):
    src = _conv_net(tmp_path / "net.onnx")
    result = invoke("info", src, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["format"] == "onnx"
    assert data["parameters"] == 4 * 3 * 9 + 6 * 4 * 9
    assert data["inputs"][0]["shape"] == [2, 3, 7, 5]
    out = tmp_path / "net.nhwc.onnx"
    invoke("convert", src, "-o", out)
    text = invoke("info", out)
    assert text.exit_code == 0 and "nhwc dialect" in text.output and "Conv x2" in text.output
    # --framework dialect reads a dialect model whatever its file name
    renamed = tmp_path / "net.model"
    renamed.write_bytes(out.read_bytes())
    named = invoke("info", renamed, "--framework", "dialect", "--format", "json")
    assert named.exit_code == 0, named.stderr
    assert json.loads(named.output)["format"] == "nhwc dialect"
    assert json.loads(named.output)["nodes"] == len(load(out).graph)
    # and a file that is no ONNX model at all is refused as unreadable, by what it is
    not_onnx = tmp_path / "graph.pb"
    not_onnx.write_bytes(b"\x00" * 64)
    refused = invoke("info", not_onnx, "--framework", "dialect")
    assert refused.exit_code == 2 and "unknown framework" not in refused.stderr


def _verification_that_fails(monkeypatch):
    """The real verification, with every output then judged out of tolerance: a conversion
    that computes other numbers, without needing one."""
    import dataclasses

    import nhwc_onnx.verification
    real = nhwc_onnx.verification.verify

    def failing(*args, **kwargs):
        report = real(*args, **kwargs)
        report.outputs = [dataclasses.replace(c, within=False) for c in report.outputs]
        return report

    monkeypatch.setattr(nhwc_onnx.verification, "verify", failing)


def test_a_failed_verification_writes_nothing_and_keeps_an_existing_output(
        invoke, tmp_path, monkeypatch):
    src = _conv_net(tmp_path / "net.onnx")
    out, report = tmp_path / "net.nhwc.onnx", tmp_path / "report.json"
    out.write_bytes(b"the previous conversion")
    _verification_that_fails(monkeypatch)
    result = invoke("convert", src, "-o", out, "--verify", "--report", report)
    assert result.exit_code == 3, result.output + result.stderr
    assert "verification: MISMATCH" in result.output
    assert result.stderr.endswith(f"Error: verification failed, so {out} was not written\n")
    assert out.read_bytes() == b"the previous conversion"
    data = json.loads(report.read_text())
    jsonschema.validate(data, json.loads((REPO / "docs" / "report-schema.json").read_text()))
    assert data["output"] is None and data["verification"]["ok"] is False
    # in a batch, the same: that model is not written, the others are
    good = _conv_net(tmp_path / "other.onnx")
    batch = invoke("convert", src, good, "--output-dir", tmp_path / "out", "--verify")
    assert batch.exit_code == 3
    assert "not written" in batch.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == []


def test_verification_uses_the_seed_given_in_a_batch_too(invoke, tmp_path):
    sources = [_conv_net(tmp_path / "a.onnx"), _conv_net(tmp_path / "b.onnx")]
    result = invoke("convert", *sources, "--output-dir", tmp_path / "out", "--verify",
                    "--seed", "5", "--report", tmp_path / "reports")
    assert result.exit_code == 0, result.output + result.stderr
    reports = sorted((tmp_path / "reports").iterdir())
    assert len(reports) == 2
    assert [json.loads(r.read_text())["verification"]["seed"] for r in reports] == [5, 5]


def test_tolerances_are_numbers_of_at_least_zero(invoke, tmp_path):
    import nhwc_onnx
    from nhwc_onnx.errors import UsageError

    src = _conv_net(tmp_path / "net.onnx")
    out = tmp_path / "net.nhwc.onnx"
    for option, value, says in (("--atol", "-1", "-1 is not a number >= 0"),
                                ("--rtol", "nan", "nan is not a number >= 0"),
                                ("--atol", "x", "'x' is not a number")):
        result = invoke("convert", src, "-o", out, "--verify", option, value)
        assert result.exit_code == 2 and not out.exists()
        assert result.stderr.splitlines()[-1] == f"Error: Invalid value for '{option}': {says}"
    assert invoke("convert", src, "-o", out, "--verify", "--atol", "0").exit_code == 0
    with pytest.raises(UsageError, match="^Invalid value for 'rtol': nan is not a number >= 0$"):
        nhwc_onnx.verify(src, out, rtol=float("nan"))


def test_a_model_in_another_format_than_its_name_says_is_named(invoke, tmp_path, examples):
    onnx_as_pb = tmp_path / "model.pb"
    onnx_as_pb.write_bytes(_conv_net(tmp_path / "net.onnx").read_bytes())
    graphdef_as_onnx = tmp_path / "graph.onnx"
    graphdef_as_onnx.write_bytes((examples / "tf" / "small_cnn.pb").read_bytes())
    for source, hint in ((onnx_as_pb, "it reads as an ONNX model: pass --framework onnx"),
                         (graphdef_as_onnx, "it reads as a TensorFlow model: pass --framework tf")):
        result = invoke("convert", source, "-o", tmp_path / "out.onnx")
        assert result.exit_code == 2 and not (tmp_path / "out.onnx").exists()
        assert len(result.stderr.splitlines()) == 1 and result.stderr.endswith(f"; {hint}\n")
        framework = hint.rsplit(" ", 1)[1]
        assert invoke("convert", source, "-o", tmp_path / "out.onnx",
                      "--framework", framework).exit_code == 0
        (tmp_path / "out.onnx").unlink()
    noise = tmp_path / "noise.pb"
    noise.write_bytes(bytes(range(256)) * 4)
    result = invoke("convert", noise, "-o", tmp_path / "out.onnx")
    assert result.exit_code == 2 and "it reads as" not in result.stderr
    weights = invoke("convert", examples / "caffe" / "tiny_net.caffemodel", "-o",
                     tmp_path / "o.onnx")
    assert weights.exit_code == 2
    assert "a .caffemodel holds a Caffe net's weights; convert the net's deploy .prototxt with " \
        "--weights" in weights.stderr


def test_converting_a_dialect_model_again_says_it_is_one(invoke, tmp_path):
    src = _conv_net(tmp_path / "net.onnx")
    for domain in ("nhwc", "default"):
        converted = tmp_path / f"net.{domain}.onnx"
        assert invoke("convert", src, "-o", converted, "--domain", domain).exit_code == 0
        again = tmp_path / f"again.{domain}.onnx"
        result = invoke("convert", converted, "-o", again)
        assert result.exit_code == 1 and not again.exists()
        assert result.stderr == (
            f"Error: {converted}: already an nhwc dialect model (written by nhwc-onnx), so there "
            "is nothing to convert; check, info and run read it as it is, and lower writes it "
            "as standard ONNX\n")


def test_convert_as_a_real_process(tmp_path):
    src = _conv_net(tmp_path / "net.onnx")
    out = tmp_path / "net.nhwc.onnx"
    exe = Path(sys.executable).with_name("nhwc-onnx")
    proc = subprocess.run([str(exe), "-q", "convert", str(src), "-o", str(out)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert out.exists()
