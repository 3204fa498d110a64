"""The same input converted twice, in two processes with different hash seeds, gives
byte-identical files (one model per frontend)."""
from __future__ import annotations

import hashlib

import onnx
import pytest
from rel_limits import run_cli_limited
from rel_models import write_source


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["onnx", "tf", "caffe"])
def test_conversion_is_byte_identical_across_processes(fmt, tmp_path):
    source, extra = write_source(tmp_path / "src", fmt)
    digests = []
    for hash_seed in ("1", "4242"):
        out = tmp_path / f"run{hash_seed}" / "model.nhwc.onnx"
        proc = run_cli_limited(["convert", source, "-o", out, *extra], timeout=120,
                               PYTHONHASHSEED=hash_seed)
        assert proc.returncode == 0, proc.stderr
        data = out.read_bytes()
        model = onnx.load_from_string(data)
        assert any(n.domain == "nhwc" for n in model.graph.node)  # a real conversion
        digests.append(hashlib.sha256(data).hexdigest())
    assert digests[0] == digests[1]
