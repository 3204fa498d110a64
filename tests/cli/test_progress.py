"""Progress output: stage lines and a live batch bar on a terminal (a pseudo-terminal here),
nothing extra when stderr is piped."""
from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "examples" / "onnx" / "small_nchw.onnx"
STAGES = ["loading the source model ...", "running the dialect passes ...",
          "writing the dialect model ...", "done"]


def _cli(args, cwd, tty: bool) -> tuple[int, str, str]:
    """Run nhwc-onnx; stderr on a pseudo-terminal when ``tty`` (stdout stays a pipe)."""
    cmd = [sys.executable, "-m", "nhwc_onnx.cli", *map(str, args)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100"}
    if not tty:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env,
                              timeout=300, check=False)
        return proc.returncode, proc.stdout, proc.stderr
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 300)
        assert ready, "no output for 300 s (hang guard)"
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out = proc.stdout.read().decode()
    proc.wait(timeout=60)
    return proc.returncode, out, b"".join(chunks).decode()


def test_single_conversion_reports_its_stages_on_a_terminal_only(tmp_path):
    code, out, err = _cli(["convert", SOURCE, "-o", tmp_path / "a.onnx"], tmp_path, tty=True)
    assert code == 0, err
    positions = [err.find(stage) for stage in STAGES]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), err
    assert "small_nchw.onnx -> " in out  # the report itself is unchanged, on stdout

    code, out_piped, err_piped = _cli(["convert", SOURCE, "-o", tmp_path / "b.onnx"], tmp_path,
                                      tty=False)
    assert code == 0
    assert err_piped == ""
    assert out_piped.splitlines()[1:] == out.splitlines()[1:]  # line 0 holds a timing


def test_batch_shows_a_live_bar_with_per_model_status_on_a_terminal_only(tmp_path):
    good = shutil.copy(SOURCE, tmp_path / "good.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    args = ["convert", good, bad, "--output-dir", tmp_path / "out"]
    code, out, err = _cli(args, tmp_path, tty=True)
    assert code == 2, out + err
    assert "\r" in err and "] 2/2" in err and "[" + "#" * 24 + "]" in err
    assert "] 1/2" in err or "] 0/2" in err  # drawn before the end too
    lines = [ln.split("\r")[-1].replace("\x1b[K", "") for ln in err.splitlines()]
    assert any(ln.startswith("ok") and "good.onnx" in ln for ln in lines), lines
    assert any(ln.startswith("failed") and "bad.onnx" in ln for ln in lines), lines

    code_piped, out_piped, err_piped = _cli(args, tmp_path, tty=False)
    assert code_piped == 2
    assert err_piped == ""  # CI logs stay clean: the table on stdout is all
    assert "1 of 2 converted" in out_piped
