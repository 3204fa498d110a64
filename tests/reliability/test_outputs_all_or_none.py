"""A command writes every output it was asked for, or none: a report or HTML page that cannot
be written (a full disk, here a file-size limit) leaves the model at ``-o`` as it was, and no
temp file behind."""
from __future__ import annotations

import resource
import subprocess
import sys

import pytest
from rel_checks import folder_listing
from rel_limits import child_env, default_signals
from rel_models import write_source

from nhwc_onnx.errors import EXIT_INVALID

MODEL_BYTES_AT_MOST = 4000  # the model of rel_models converts to ~2.4 kB, its report is ~5 kB


def _convert_with_file_size_limit(args: list, limit: int) -> subprocess.CompletedProcess:
    """``nhwc-onnx ARGS`` where no file may grow past ``limit`` bytes (EFBIG past it, as a
    full disk gives ENOSPC: Python ignores SIGXFSZ)."""
    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        default_signals()

    return subprocess.run([sys.executable, "-m", "nhwc_onnx.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300, check=False,
                          preexec_fn=limit_file_size,
                          env=child_env(PYTHONDONTWRITEBYTECODE="1"))


@pytest.mark.parametrize("extra", [["--report", "report.json"],
                                   ["--verify", "--html", "page.html"]],
                         ids=["report", "html"])
def test_failed_report_write_keeps_existing_output(extra, tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    out = tmp_path / "out"
    out.mkdir()
    model = out / "m.onnx"
    model.write_bytes(b"the previous conversion")
    args = [a if not a.endswith((".json", ".html")) else out / a for a in extra]
    proc = _convert_with_file_size_limit(["convert", source, "-o", model, *args],
                                         MODEL_BYTES_AT_MOST)
    assert proc.returncode == EXIT_INVALID, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert "File too large" in proc.stderr, proc.stderr
    assert model.read_bytes() == b"the previous conversion"
    assert folder_listing(out) == ["m.onnx"]  # no report, no page, no temp file


def test_outputs_are_written_together_when_all_fit(tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    out = tmp_path / "out"
    proc = _convert_with_file_size_limit(
        ["convert", source, "-o", out / "m.onnx", "--report", out / "report.json"], 1 << 20)
    assert proc.returncode == 0, proc.stderr
    assert folder_listing(out) == ["m.onnx", "report.json"]
    assert (out / "m.onnx").stat().st_size <= MODEL_BYTES_AT_MOST  # the limit above holds it
