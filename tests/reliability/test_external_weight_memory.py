"""External weights were read whole. ``check`` of a valid dialect model with a
906 MB external weight peaked at 917 MB (README: check reads the structure only), ``run`` and
``lower`` at 4.4-4.5 GB, and a 7 GB weight file ended in "internal error (MemoryError)".

Now the dialect reader checks an external entry (location, size, dims) without reading it:
``check`` never reads the bytes, the others map them (only the pages used are read, nothing is
copied), ``run`` hands onnxruntime the file itself, the library's ``save_lowered`` streams the
weights into the output, and a lowering that cannot be one file is refused in one line before
anything is allocated. Every measurement is a real process's peak resident set; the weight
files are sparse (no disk space, zeros when read).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from rel_checks import folder_listing
from rel_limits import MEMORY_LIMIT, run_measured

from nhwc_onnx.errors import EXIT_UNREADABLE, UsageError

MIB = 1 << 20
K = 1024  # Dense input features; the weight is (M, K) float32
BASELINE = 250 * MIB  # Python, numpy, onnx, onnxruntime and the small arrays of a run
HANG_GUARD = 120


def dialect_with_external_weight(folder: Path, weight_bytes: int) -> Path:
    """folder/model.onnx: x (1, K) -> Dense with W (M, K) in folder/w.bin (sparse)."""
    m = weight_bytes // (4 * K)
    folder.mkdir(parents=True, exist_ok=True)
    w = TensorProto(name="fc/W", data_type=TensorProto.FLOAT, dims=[m, K])
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="w.bin")
    with open(folder / "w.bin", "wb") as f:
        f.truncate(m * K * 4)
    graph = helper.make_graph(
        [helper.make_node("Dense", ["x", "fc/W"], ["y"], name="fc", domain="nhwc")], "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("nhwc", 1),
                                                    helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def _cli(*args) -> list:
    return ["-m", "nhwc_onnx.cli", *args]


WEIGHT = 512 * MIB


@pytest.fixture(scope="module")
def model_512m(tmp_path_factory) -> Path:
    return dialect_with_external_weight(tmp_path_factory.mktemp("w512"), WEIGHT)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["check", "info"])
def test_structure_commands_read_no_weight_bytes(command, model_512m):
    proc, peak = run_measured(_cli(command, model_512m), HANG_GUARD)
    assert proc.returncode == 0, proc.stderr
    assert peak < BASELINE, f"{command} peaked at {peak / MIB:.0f} MiB for 512 MiB of weights"


@pytest.mark.slow
def test_run_maps_the_weights_once(model_512m, tmp_path):
    """onnxruntime reads the weight file itself (mapped): no copy in the lowered model, the
    serialized bytes or the session. Was 4.4x the weight."""
    proc, peak = run_measured(_cli("run", model_512m, "--random", "--output-dir", tmp_path),
                              HANG_GUARD, address_space=MEMORY_LIMIT)
    assert proc.returncode == 0, proc.stderr
    assert peak < WEIGHT + BASELINE, f"run peaked at {peak / MIB:.0f} MiB"
    assert np.load(tmp_path / "y.npy").shape == (1, WEIGHT // (4 * K))


SAVE_LOWERED = """
import sys
from nhwc_onnx.runtime.standard_onnx import save_lowered
from nhwc_onnx.schemas import validate
from nhwc_onnx.serialize import load
model = load(sys.argv[1])
assert not validate(model)
save_lowered(model, sys.argv[2])
"""


@pytest.mark.slow
def test_save_lowered_streams_the_weights(model_512m, tmp_path):
    """The library's lowering to a file (for ``lower``) writes each weight straight from the
    mapped file: was 4.5x the weight through SerializeToString and the checker."""
    out = tmp_path / "lowered.onnx"
    proc, peak = run_measured(["-c", SAVE_LOWERED, model_512m, out], HANG_GUARD)
    assert proc.returncode == 0, proc.stderr
    assert peak < WEIGHT + BASELINE, f"save_lowered peaked at {peak / MIB:.0f} MiB"
    assert out.stat().st_size > WEIGHT
    lowered = onnx.load(str(out), load_external_data=False)
    assert [t.name for t in lowered.graph.initializer] == ["fc/W"]
    assert list(lowered.graph.initializer[0].dims) == [WEIGHT // (4 * K), K]


@pytest.mark.slow
def test_lower_command_streams_the_weights(model_512m, tmp_path):
    """``nhwc-onnx lower`` itself (not only the library): was 4.5x the weight."""
    out = tmp_path / "lowered.onnx"
    proc, peak = run_measured(_cli("lower", model_512m, "-o", out), HANG_GUARD)
    assert proc.returncode == 0, proc.stderr
    assert peak < WEIGHT + BASELINE, f"lower peaked at {peak / MIB:.0f} MiB"
    lowered = onnx.load(str(out), load_external_data=False)
    assert list(lowered.graph.initializer[0].dims) == [WEIGHT // (4 * K), K]


@pytest.mark.slow
def test_onnx_source_external_weights_are_mapped(tmp_path):
    """The ONNX frontend (convert's reader) maps external weights too (was a full read)."""
    folder = tmp_path / "src"
    folder.mkdir()
    m = WEIGHT // (4 * K)
    w = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[m, K])
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="w.bin")
    with open(folder / "w.bin", "wb") as f:
        f.truncate(WEIGHT)
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "W"], ["y"], transB=1)], "src",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, K])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (folder / "src.onnx").write_bytes(model.SerializeToString())
    code = ("import sys\nfrom nhwc_onnx.frontends import onnx as f\n"
            "m = f.load(sys.argv[1])\n"
            f"assert [v.const.shape for v in m.graph.constants()] == [({m}, {K})]\n")
    proc, peak = run_measured(["-c", code, folder / "src.onnx"], HANG_GUARD)
    assert proc.returncode == 0, proc.stderr
    assert peak < BASELINE, f"loading peaked at {peak / MIB:.0f} MiB"


# -- 7 GB: more than the memory bound of the child -------------------------------------------

HUGE = 7 << 30


@pytest.fixture(scope="module")
def model_7g(tmp_path_factory) -> Path:
    return dialect_with_external_weight(tmp_path_factory.mktemp("w7g"), HUGE)


@pytest.mark.slow
def test_check_of_a_7gb_weight_stays_small(model_7g):
    """Under a 3 GiB address-space bound: nothing of the weight is read or even mapped."""
    proc, peak = run_measured(_cli("check", model_7g), HANG_GUARD)
    assert proc.returncode == 0, proc.stderr
    assert "valid" in proc.stdout and peak < BASELINE


@pytest.mark.slow
def test_info_of_a_7gb_weight_maps_it(model_7g):
    """``info`` maps the weight (address space for it, no resident memory)."""
    proc, peak = run_measured(_cli("info", model_7g), HANG_GUARD,
                              address_space=HUGE + (1 << 30))
    assert proc.returncode == 0, proc.stderr
    assert f"{HUGE // 4:,} parameters" in proc.stdout and peak < BASELINE


@pytest.mark.slow
def test_lower_of_a_7gb_weight_is_refused_before_reading(model_7g, tmp_path):
    """A standard ONNX file cannot hold 7 GB (protobuf's 2 GiB): one line, exit 2, nothing
    written, the weight never read."""
    out = tmp_path / "out"
    out.mkdir()
    proc, peak = run_measured(_cli("lower", model_7g, "-o", out / "low.onnx"), HANG_GUARD,
                              address_space=HUGE + (1 << 30))
    err = proc.stderr.strip()
    assert proc.returncode == EXIT_UNREADABLE, err
    assert len(err.splitlines()) == 1 and "2 GiB" in err and "internal error" not in err, err
    assert folder_listing(out) == [] and peak < BASELINE


# -- run --random on an absurd input ----------------------------------------------------------


def test_random_feed_of_an_absurd_input_is_refused_before_allocating():
    """``run --random`` on a 2^40-pixel input was a MemoryError ("internal error"); the
    library's ``random_feed`` (what the CLI must call) refuses it from the shape alone."""
    from nhwc_onnx.ir import Value
    from nhwc_onnx.runtime import MAX_RANDOM_FEED_ELEMENTS, random_feed

    rng = np.random.default_rng(0)
    huge = Value("image", "float32", (1, 1 << 20, 1 << 20, 1))
    with pytest.raises(UsageError, match="'image' has shape .*1,099,511,627,776 elements"):
        random_feed(huge, rng)
    limit = Value("x", "float32", (MAX_RANDOM_FEED_ELEMENTS + 1,))
    with pytest.raises(UsageError, match="refused before allocating"):
        random_feed(limit, rng)
    with pytest.raises(UsageError, match="static shape"):
        random_feed(Value("x", "float32", (None, 3)), rng)
    # a sane input: the generator's stream, as the CLI drew it before
    small = random_feed(Value("x", "float32", (2, 3, 5)), np.random.default_rng(7))
    expected = np.random.default_rng(7).standard_normal((2, 3, 5)).astype(np.float32)
    assert small.dtype == np.float32 and np.array_equal(small, expected)
    assert math.prod(huge.shape) > MAX_RANDOM_FEED_ELEMENTS


def test_run_random_of_an_absurd_input_exits_2(tmp_path):
    """``nhwc-onnx run --random`` on a 2^40-pixel input: was "internal error (MemoryError)"."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu", domain="nhwc")], "huge",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1 << 20, 1 << 20, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1 << 20, 1 << 20, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("nhwc", 1),
                                                    helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "huge.onnx"
    path.write_bytes(model.SerializeToString())
    proc, peak = run_measured(_cli("run", path, "--random", "--output-dir", tmp_path / "o"),
                              HANG_GUARD)
    assert proc.returncode == EXIT_UNREADABLE, proc.stderr
    assert "refused before allocating" in proc.stderr and "internal error" not in proc.stderr
    assert peak < BASELINE
    assert not (tmp_path / "o").exists()
