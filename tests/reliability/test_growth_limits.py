"""Small files that expand exponentially, and huge legal nets.

Each runs the real command line in a memory-bounded child with a timeout (a hang guard, not a
speed check). The bombs are built in code (``rel_bombs.py``).
"""
from __future__ import annotations

import pytest
from rel_bombs import inplace_relu_prototxt, onnx_function_bomb, tf_function_bomb
from rel_checks import folder_listing
from rel_limits import run_cli_limited

from nhwc_onnx.errors import EXIT_INVALID
from nhwc_onnx.frontends.base import MAX_SOURCE_NODES


def _refused(proc, *fragments: str) -> str:
    err = proc.stderr.strip()
    detail = f"exit {proc.returncode}, stderr: {err!r}"
    assert proc.returncode == EXIT_INVALID, detail
    assert "Traceback" not in proc.stderr and "internal error" not in err, detail
    assert len(err.splitlines()) == 1 and err.startswith("Error: "), detail
    for fragment in fragments:
        assert fragment in err, detail
    return err


@pytest.mark.parametrize("fmt", ["tf", "onnx"])
def test_function_bomb_is_refused_before_expanding(fmt, tmp_path):
    """20 levels, each calling the next twice: 2^20 nodes from a few kilobytes. Refused from
    the call graph, naming the function (before: TF 230 s and 3.6 GB then MemoryError; ONNX
    stuck in onnx.shape_inference)."""
    source = tmp_path / ("bomb.pb" if fmt == "tf" else "bomb.onnx")
    source.write_bytes(tf_function_bomb(20) if fmt == "tf" else onnx_function_bomb(20))
    assert source.stat().st_size < 5000
    (tmp_path / "out").mkdir()
    proc = run_cli_limited(["convert", source, "-o", tmp_path / "out" / "m.onnx"], timeout=60)
    _refused(proc, "'level20'", "expands to 1048576 nodes", str(MAX_SOURCE_NODES))
    assert folder_listing(tmp_path / "out") == []


def test_small_function_nesting_still_inlines(tmp_path):
    """The bound counts nodes, not calls: 3 levels (8 Relu copies) convert."""
    source = tmp_path / "nested.pb"
    source.write_bytes(tf_function_bomb(3))
    proc = run_cli_limited(["convert", source, "-o", tmp_path / "m.onnx"], timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Relu x8" in proc.stdout, proc.stdout


def test_million_layer_prototxt_is_refused_before_parsing(tmp_path):
    """1,000,000 in-place ReLU layers (66 MB). Before: parsed for ~240 s, then a segfault at
    3.7 GB leaving a 0-byte temp file. Now refused for the stated limit, before parsing."""
    source = tmp_path / "deep.prototxt"
    source.write_text(inplace_relu_prototxt(1_000_000))
    (tmp_path / "out").mkdir()
    proc = run_cli_limited(["convert", source, "--weights", "random",
                            "-o", tmp_path / "out" / "m.onnx"], timeout=60)
    _refused(proc, "1000002 layers", str(MAX_SOURCE_NODES))
    assert folder_listing(tmp_path / "out") == []


@pytest.mark.slow
def test_big_legal_prototxt_converts(tmp_path):
    """20,000 in-place ReLU layers (under the limit) convert without a crash."""
    source = tmp_path / "deep.prototxt"
    source.write_text(inplace_relu_prototxt(20_000))
    out = tmp_path / "m.onnx"
    proc = run_cli_limited(["convert", source, "--weights", "random", "-o", out], timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 0
    check = run_cli_limited(["check", out], timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
