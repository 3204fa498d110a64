"""`run --output-dir d` writes its .npy files by convert's rules.

It wrote with a plain np.save: a FIFO named like an output hung it, a symlink there was written
through (a victim file replaced by .npy bytes), a model or a feed named like an output was
overwritten, and an unwritable folder or a full disk was an "internal error". Now every path is
checked before the model runs (exit 1, one line, nothing written), a symlink at a derived name
is replaced (never followed), and each file is written to a temp file and renamed. Real
processes: a FIFO, symlinks, a file-size limit standing in for a full disk.
"""
from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rel_checks import folder_listing
from rel_limits import child_env, run_cli_limited
from rel_models import write_source

from nhwc_onnx.errors import EXIT_INVALID, EXIT_OK

VICTIM_TEXT = "do not overwrite me\n"


@pytest.fixture(scope="module")
def dialect_model(tmp_path_factory) -> Path:
    """A converted model: input 'x' (2x7x5x3 NHWC), output 'y' (2x6)."""
    folder = tmp_path_factory.mktemp("model")
    source, _ = write_source(folder / "src", "onnx")
    model = folder / "m.onnx"
    proc = run_cli_limited(["-q", "convert", source, "-o", model])
    assert proc.returncode == EXIT_OK, proc.stderr
    return model


def _one_error_line(proc) -> str:
    err = proc.stderr.strip()
    assert "Traceback" not in err and "internal error" not in err, err
    assert len(err.splitlines()) == 1 and err.startswith("Error: "), err
    return err


def _run(model: Path, out_dir: Path, *extra, timeout: float = 60, **kwargs):
    args = [sys.executable, "-m", "nhwc_onnx.cli", "run", str(model), "--random",
            "--output-dir", str(out_dir), *map(str, extra)]
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False,
                          env=child_env(), **kwargs)


def test_a_fifo_named_like_an_output_is_refused_without_hanging(dialect_model, tmp_path):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    os.mkfifo(out_dir / "y.npy")
    proc = _run(dialect_model, out_dir, timeout=60)  # main hung here, opening the FIFO
    assert proc.returncode == EXIT_INVALID, proc.stderr
    assert "y.npy: is a FIFO (named pipe)" in _one_error_line(proc)
    assert stat.S_ISFIFO(os.lstat(out_dir / "y.npy").st_mode)
    assert folder_listing(out_dir) == ["y.npy"]


def test_a_symlink_named_like_an_output_is_replaced_and_its_target_kept(dialect_model,
                                                                        tmp_path):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    (out_dir / "y.npy").symlink_to(victim)
    proc = _run(dialect_model, out_dir)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert victim.read_text() == VICTIM_TEXT
    assert not (out_dir / "y.npy").is_symlink()
    assert np.load(out_dir / "y.npy").shape == (2, 6)
    assert folder_listing(out_dir) == ["y.npy"]  # no temp file


@pytest.mark.parametrize("what", ["the model", "an --input file"])
def test_a_file_the_run_reads_is_never_an_output(what, dialect_model, tmp_path):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "y.npy"  # the output 'y' would be saved here
    if what == "the model":
        target.write_bytes(dialect_model.read_bytes())
        proc = _run(target, out_dir)
    else:
        np.save(target, np.zeros((2, 7, 5, 3), np.float32))
        proc = _run(dialect_model, out_dir, "--input", f"x={target}")
    before = target.read_bytes()
    assert proc.returncode == EXIT_INVALID, proc.stderr
    assert "the output would overwrite the input" in _one_error_line(proc)
    assert target.read_bytes() == before
    assert folder_listing(out_dir) == ["y.npy"]


@pytest.mark.parametrize("where", ["under a regular file", "in /proc"])
def test_a_folder_that_cannot_be_written_is_one_line_before_running(where, dialect_model,
                                                                     tmp_path):
    # (as root, permission bits do not stop a write: a file in the way and /proc do)
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file")
    out_dir = blocker / "out" if where == "under a regular file" else Path("/proc/self/out")
    proc = _run(dialect_model, out_dir)
    assert proc.returncode == EXIT_INVALID, proc.stderr
    err = _one_error_line(proc)
    assert err.startswith(f"Error: {out_dir / 'y.npy'}: ")
    assert ("is not a folder" in err) if where == "under a regular file" else (
        "no permission to write the output" in err)
    assert "output y" not in proc.stdout  # refused before the model ran
    assert blocker.read_text() == "a file"


def test_a_full_disk_is_one_line_and_leaves_no_temp_file(dialect_model, tmp_path):
    """RLIMIT_FSIZE stands in for a full disk: the .npy (224 bytes) cannot be written whole
    (EFBIG, as ENOSPC would be)."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "y.npy").write_bytes(b"the previous run")

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))

    proc = _run(dialect_model, out_dir, preexec_fn=small_files)
    assert proc.returncode == EXIT_INVALID, proc.stderr
    err = _one_error_line(proc)
    assert err == f"Error: {out_dir / 'y.npy'}: cannot write the output (File too large)"
    assert (out_dir / "y.npy").read_bytes() == b"the previous run"
    assert folder_listing(out_dir) == ["y.npy"]


def test_the_library_saves_by_the_same_rules(dialect_model, tmp_path):
    """nhwc_onnx.run(output_dir=...) and RunResult.save check the paths first and never
    overwrite the files the run read."""
    import nhwc_onnx
    from nhwc_onnx.errors import OutputPathError

    out_dir = tmp_path / "out"
    out_dir.mkdir()
    feed = out_dir / "y.npy"
    np.save(feed, np.ones((2, 7, 5, 3), np.float32))
    with pytest.raises(OutputPathError, match="would overwrite the input"):
        nhwc_onnx.run(dialect_model, {"x": feed}, output_dir=out_dir)
    result = nhwc_onnx.run(dialect_model, {"x": feed})
    with pytest.raises(OutputPathError, match="would overwrite the input"):
        result.save(out_dir)
    assert np.load(feed).shape == (2, 7, 5, 3)
    saved = nhwc_onnx.run(dialect_model, {"x": feed}, output_dir=tmp_path / "new").paths
    assert saved == {"y": tmp_path / "new" / "y.npy"}
    np.testing.assert_array_equal(np.load(saved["y"]), result.outputs["y"])
