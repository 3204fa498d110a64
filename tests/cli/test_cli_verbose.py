"""-v / -vv are real.

-v logs each stage of a conversion with its time at INFO on stderr (load, every pass - the
legalisation too -, write), -vv adds DEBUG detail per pass (node counts, decisions); stdout
stays what it is without them, and without them stderr stays empty. Run as real processes:
the CLI configures the handler of the ``nhwc_onnx`` loggers at start-up, the library never.
"""
from __future__ import annotations

import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

from nhwc_onnx import api
from nhwc_onnx.passes.pipeline import core_passes
from nhwc_onnx.passes.to_dialect.pipeline import dialect_passes

MODEL = Path(__file__).resolve().parents[2] / "examples" / "onnx" / "small_nchw.onnx"
SECONDS = re.compile(r"\d+\.\d+ s\b")
PASSES = [p.name for p in core_passes() + dialect_passes()]


def nhwc_onnx(cwd: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nhwc_onnx.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)


def convert(tmp_path: Path, *flags, source: Path = MODEL) -> subprocess.CompletedProcess:
    out = tmp_path / f"out{len(list(tmp_path.glob('out*.onnx')))}.onnx"
    done = nhwc_onnx(tmp_path, *flags, "convert", source, "-o", out.name)
    assert done.returncode == 0, done.stderr
    return done


def stdout_without_times(done: subprocess.CompletedProcess) -> str:
    return re.sub(r"out\d+\.onnx", "OUT", SECONDS.sub("T s", done.stdout))


def test_verbose_logs_every_stage_with_its_time_on_stderr_only(tmp_path):
    plain, verbose = convert(tmp_path), convert(tmp_path, "-v")
    assert plain.stderr == ""
    assert stdout_without_times(verbose) == stdout_without_times(plain)
    lines = verbose.stderr.splitlines()
    assert all(line.startswith("INFO nhwc_onnx.") for line in lines), lines
    assert re.fullmatch(rf"INFO nhwc_onnx.convert: load .*small_nchw.onnx \(onnx\): "
                        rf"{SECONDS.pattern}", lines[0]), lines[0]
    passes = [m.group(1) for line in lines
              if (m := re.fullmatch(rf"INFO nhwc_onnx.passes: pass (\w+): {SECONDS.pattern}",
                                    line))]
    assert passes == PASSES and "legalize" in passes, passes
    assert any(re.fullmatch(rf"INFO nhwc_onnx.convert: write out\d.onnx: {SECONDS.pattern}", line)
               for line in lines), lines
    assert not [line for line in lines if line.startswith("DEBUG")]


def test_very_verbose_adds_the_detail_of_each_pass(tmp_path):
    done = convert(tmp_path, "-vv")
    detail = [line for line in done.stderr.splitlines() if line.startswith("DEBUG")]
    per_pass = [line for line in detail if re.fullmatch(
        r"DEBUG nhwc_onnx.passes: pass \w+: \d+ -> \d+ nodes, (changed|unchanged); "
        r"decisions: .+", line)]
    assert len(per_pass) == len(PASSES), detail
    assert any("pass fold_batchnorm: 12 -> 11 nodes, changed; decisions: fold_batchnorm x1"
               in line for line in per_pass), per_pass
    assert "INFO nhwc_onnx.passes: pass legalize" in done.stderr


def test_control_characters_from_a_file_name_are_escaped_in_the_log(tmp_path):
    odd = tmp_path / "clear\x1b[2Jscreen.onnx"
    shutil.copy2(MODEL, odd)
    done = convert(tmp_path, "-v", source=Path(odd.name))
    assert "\x1b" not in done.stderr and "clear\\x1b[2Jscreen.onnx" in done.stderr, done.stderr


def test_the_library_configures_no_logging(tmp_path):
    root, ours = logging.getLogger(), logging.getLogger("nhwc_onnx")
    before = (list(root.handlers), root.level, list(ours.handlers), ours.level)
    api.convert(MODEL, tmp_path / "m.onnx")
    assert (list(root.handlers), root.level, list(ours.handlers), ours.level) == before


def test_group_flags_work_after_the_command_too(tmp_path):
    from nhwc_onnx.cli import group_options_first

    before = nhwc_onnx(tmp_path, "-vv", "convert", MODEL, "-o", "a.onnx")
    after = nhwc_onnx(tmp_path, "convert", MODEL, "-o", "b.onnx", "-vv")
    assert before.returncode == after.returncode == 0, after.stderr
    assert "DEBUG nhwc_onnx.passes" in after.stderr
    assert SECONDS.sub("", before.stderr).replace("a.onnx", "b.onnx") == \
        SECONDS.sub("", after.stderr)
    quiet = nhwc_onnx(tmp_path, "convert", MODEL, "-o", "c.onnx", "-q")
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""
    # the value of the command's own option, and anything after --, stay where they are
    assert group_options_first(["convert", "m.onnx", "--outputs", "-v", "-q", "--debug"]) == \
        ["-q", "--debug", "convert", "m.onnx", "--outputs", "-v"]
    assert group_options_first(["-v", "ops", "--", "-q"]) == ["-v", "ops", "--", "-q"]
