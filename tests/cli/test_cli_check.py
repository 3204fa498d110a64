"""`nhwc-onnx check`: reports, formats, exit codes; plus the group's own options."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from nhwc_onnx import __version__

VALID = ["tiny_convnet.onnx", "pad_pool_concat.onnx", "mlp_constants.onnx"]
BROKEN = "invalid/broken.onnx"


def test_version(invoke):
    result = invoke("--version")
    assert result.exit_code == 0
    assert __version__ in result.stdout


def test_no_command_prints_the_help_on_stderr_and_exits_2(invoke):
    result = invoke()
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("Usage: nhwc-onnx [OPTIONS] COMMAND")
    assert "Commands:" in result.stderr and "Error" not in result.stderr
    missing = invoke("-q")  # options of the group, still no command: a mistake
    assert missing.exit_code == 2
    assert missing.stderr.splitlines()[-1] == "Error: Missing command."


def test_check_valid_models_exit_0(invoke, examples):
    result = invoke("check", *(examples / name for name in VALID))
    assert result.exit_code == 0, result.output
    for name in VALID:
        assert f"{examples / name}: valid" in result.stdout
    assert "3 files: 3 valid, 0 invalid, 0 unreadable" in result.stdout
    assert result.stderr == ""


def test_quiet_check_prints_nothing_for_valid_models(invoke, examples):
    result = invoke("-q", "check", examples / VALID[0], examples / VALID[1])
    assert result.exit_code == 0
    assert result.output == ""


def test_check_reports_all_three_problems_of_the_broken_example(invoke, examples):
    result = invoke("check", examples / BROKEN)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"{examples / BROKEN}: INVALID, 3 problem(s)"
    problems = lines[1:]
    assert len(problems) == 3
    by_node = {line.split("'")[1]: line for line in problems}
    assert "(Conv) [weight-shape]" in by_node["conv_oihw"]
    assert "found (4,3,5,5)" in by_node["conv_oihw"]
    assert "(MaxPool) [attribute]" in by_node["pool_bad_pads"]
    assert "SAME_UPPER" in by_node["pool_bad_pads"]
    assert "(Add) [same-shape]" in by_node["add_broadcast"]
    assert "(1,1,1,3)" in by_node["add_broadcast"]


def test_check_json_format(invoke, examples):
    result = invoke("check", "--format", "json", examples / VALID[0], examples / BROKEN)
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["summary"] == {"valid": 1, "invalid": 1, "unreadable": 0}
    valid, broken = report["files"]
    assert valid["status"] == "valid" and valid["issues"] == [] and valid["nodes"] == 8
    assert broken["status"] == "invalid"
    assert sorted((i["node"], i["op"], i["rule"]) for i in broken["issues"]) == [
        ("add_broadcast", "Add", "same-shape"),
        ("conv_oihw", "Conv", "weight-shape"),
        ("pool_bad_pads", "MaxPool", "attribute"),
    ]
    conv = next(i for i in broken["issues"] if i["node"] == "conv_oihw")
    assert conv["found"] == "(4,3,5,5)" and conv["expected"]


def _truncated(examples: Path, tmp_path: Path) -> Path:
    data = (examples / VALID[0]).read_bytes()
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[: len(data) // 2])
    return path


def test_check_truncated_file_exit_2_one_line_no_traceback(invoke, examples, tmp_path):
    path = _truncated(examples, tmp_path)
    result = invoke("check", path)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"Error: {path}: not an ONNX model")
    assert "Traceback" not in result.output


def test_check_unreadable_inputs_of_every_kind(invoke, tmp_path):
    (tmp_path / "empty.onnx").write_bytes(b"")
    (tmp_path / "text.onnx").write_text("hello, I am not a model\n" * 10)
    (tmp_path / "no_models").mkdir()
    result = invoke("check", tmp_path / "empty.onnx", tmp_path / "text.onnx",
                    tmp_path / "missing.onnx", tmp_path / "no_models")
    assert result.exit_code == 2
    err = result.stderr.splitlines()
    assert len(err) == 4
    assert "empty file" in err[0] and "not an ONNX model" in err[1]
    assert "no such file" in err[2] and "holds no *.onnx file" in err[3]
    assert "4 files: 0 valid, 0 invalid, 4 unreadable" in result.stdout


def test_check_unreadable_wins_over_invalid(invoke, examples, tmp_path):
    result = invoke("check", "--format", "json", examples / BROKEN, _truncated(examples, tmp_path))
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    assert [f["status"] for f in report["files"]] == ["invalid", "unreadable"]
    assert report["files"][1]["error"].startswith(str(tmp_path / "truncated.onnx"))


def test_check_needs_a_file(invoke):
    result = invoke("check")
    assert result.exit_code == 2
    assert result.stderr.startswith("Usage: nhwc-onnx check [OPTIONS] MODELS...\n")
    assert result.stderr.splitlines()[-1] == "Error: Missing argument 'MODELS...'."


_CHECK_IN_SUBPROCESS = textwrap.dedent("""
    import json, sys, time
    start = time.perf_counter()
    from nhwc_onnx.cli import command_line
    sys.argv = ["nhwc-onnx", "check", sys.argv[1]]
    code = command_line()
    elapsed = time.perf_counter() - start
    heavy = sorted(m for m in ("tensorflow", "onnxruntime", "cv2", "keras") if m in sys.modules)
    print(json.dumps({"code": code, "heavy": heavy, "seconds": elapsed}), file=sys.stderr)
""")


def test_check_in_a_fresh_process_is_fast_and_light(examples):
    proc = subprocess.run([sys.executable, "-c", _CHECK_IN_SUBPROCESS,
                           str(examples / VALID[0])], capture_output=True, text=True, timeout=60,
                          check=False)
    facts = json.loads(proc.stderr.strip().splitlines()[-1])
    assert facts["code"] == 0, proc.stderr
    assert facts["heavy"] == []
    # about 0.5 s on an idle machine (imports included); generous bound for a loaded CI box
    assert facts["seconds"] < 3.0, facts


def test_real_console_command(examples, tmp_path):
    script = Path(sys.executable).parent / "nhwc-onnx"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "nhwc_onnx.cli"]
    ok = subprocess.run([*cmd, "check", str(examples / VALID[0])], capture_output=True,
                        text=True, timeout=60, check=False)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == f"{examples / VALID[0]}: valid (8 nodes)"
    bad = subprocess.run([*cmd, "check", str(_truncated(examples, tmp_path))],
                         capture_output=True, text=True, timeout=60, check=False,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1
    assert "Traceback" not in bad.stderr


def test_verbosity_flags_are_accepted_and_keep_the_report(invoke, examples):
    for flags in (["-v"], ["-vv"], ["--debug"]):
        result = invoke(*flags, "check", examples / VALID[0])
        assert result.exit_code == 0, (flags, result.output)
        assert f"{examples / VALID[0]}: valid (8 nodes)" in result.stdout
    assert invoke("-q", "-v", "check", examples / VALID[0]).stdout == ""


def test_the_api_check_takes_one_path_or_several(examples):
    import nhwc_onnx

    broken, valid = examples / BROKEN, examples / VALID[0]
    for one in (str(broken), broken):
        issues = nhwc_onnx.check(one)
        assert list(issues) == [str(broken)]
        assert [i.rule for i in issues[str(broken)]] == ["weight-shape", "attribute",
                                                         "same-shape"]
    both = nhwc_onnx.check([valid, str(broken)])
    assert list(both) == [str(valid), str(broken)]
    assert both[str(valid)] == [] and len(both[str(broken)]) == 3
