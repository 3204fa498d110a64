"""SIGTERM, SIGHUP (and SIGINT) while the output is being written.

A real `nhwc-onnx convert` of a 64 MB model is frozen (SIGSTOP) the moment its temp file
appears beside the output, sent the signal, and continued: it must remove the temp file, keep
the old output and exit with 128 + the signal number.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from rel_checks import folder_listing
from rel_limits import child_env, limit_memory

WIDTH = 4096  # a 4096 x 4096 float32 Gemm weight: 64 MB, a write long enough to catch


def _big_model(path: Path) -> Path:
    weight = numpy_helper.from_array(np.ones((WIDTH, WIDTH), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)], "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, WIDTH])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _temp_files(folder: Path) -> list[str]:
    return [name for name in os.listdir(folder) if name.endswith(".tmp")]


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT],
                         ids=lambda s: signal.Signals(s).name)
def test_signal_while_writing_removes_the_temp_file_and_keeps_the_old_output(signum, tmp_path):
    source = _big_model(tmp_path / "big.onnx")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    output = out_dir / "model.nhwc.onnx"
    output.write_bytes(b"the previous conversion")
    child = subprocess.Popen(
        [sys.executable, "-m", "nhwc_onnx.cli", "-q", "convert", str(source), "-o", str(output)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
        preexec_fn=limit_memory)  # noqa: PLW1509 - the bound rel_limits uses
    try:
        deadline = time.monotonic() + 120  # hang guard only
        while not _temp_files(out_dir) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.0005)
        child.send_signal(signal.SIGSTOP)
        caught = _temp_files(out_dir)
        assert caught and output.read_bytes() == b"the previous conversion", (
            "the write was not caught in progress", child.poll())
        child.send_signal(signum)
        child.send_signal(signal.SIGCONT)
        _, stderr = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 128 + signum, stderr
    assert stderr.strip() == f"Error: stopped by {signal.Signals(signum).name} (temp files removed)"
    assert folder_listing(out_dir) == ["model.nhwc.onnx"]
    assert output.read_bytes() == b"the previous conversion"


@pytest.mark.slow
def test_sigterm_during_a_batch_reaches_the_workers_and_leaves_no_temp_file(tmp_path):
    """`--jobs 2`: the parent passes the signal to its workers and waits for them; each output
    is then either the old file or a complete model, never a temp file."""
    first = _big_model(tmp_path / "one.onnx")
    second = tmp_path / "two.onnx"
    second.write_bytes(first.read_bytes())
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    for name in ("one.onnx", "two.onnx"):
        (out_dir / name).write_bytes(b"old")
    child = subprocess.Popen(
        [sys.executable, "-m", "nhwc_onnx.cli", "-q", "convert", str(first), str(second),
         "--output-dir", str(out_dir), "--jobs", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
    try:
        deadline = time.monotonic() + 120  # hang guard only
        while not _temp_files(out_dir) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.0005)
        assert _temp_files(out_dir), ("the write was not caught in progress", child.poll())
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 128 + signal.SIGTERM, stderr
    assert folder_listing(out_dir) == ["one.onnx", "two.onnx"]
    for name in ("one.onnx", "two.onnx"):
        data = (out_dir / name).read_bytes()
        assert data == b"old" or onnx.load_from_string(data).graph.node
