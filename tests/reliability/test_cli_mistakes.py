"""User mistakes end with the
documented exit code and one clear line (never "internal error"), reads are bounded by the
file's size, and `--jobs` starts no more workers than there are sources and CPUs."""
from __future__ import annotations

import os
import struct
from concurrent import futures
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from rel_limits import run_cli_limited
from rel_models import write_source

from nhwc_onnx.api import convert
from nhwc_onnx.conversion import several as batch
from nhwc_onnx.errors import EXIT_OK, EXIT_UNREADABLE
from nhwc_onnx.options import ConvertOptions


def _one_error_line(proc) -> str:
    err = proc.stderr.strip()
    assert "Traceback" not in err and "internal error" not in err, err
    assert len(err.splitlines()) == 1 and err.startswith("Error: "), err
    return err


@pytest.fixture
def converted(tmp_path) -> tuple[Path, Path]:
    """(ONNX source with input x of 2x3x7x5, its conversion)."""
    source, _ = write_source(tmp_path / "src", "onnx")
    output = tmp_path / "converted.onnx"
    convert(source, output)
    return source, output


def _npy_claiming(path: Path, elements: int) -> Path:
    """A version 1.0 .npy whose header declares ``elements`` float32 values, followed by 64
    bytes of data."""
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({elements},), }}"
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
                     + b"\0" * 64)
    return path


# -- finding 10: .npy inputs --------------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "verify"])
@pytest.mark.parametrize("kind", ["empty", "header claims 2^40 elements"])
def test_bad_npy_input_is_unreadable_input(command, kind, converted, tmp_path):
    source, model = converted
    npy = tmp_path / "x.npy"
    if kind == "empty":
        npy.write_bytes(b"")
    else:
        _npy_claiming(npy, 2**40)  # 4 TiB: must be refused from the header, not allocated
    args = [model] if command == "run" else [source, model]
    proc = run_cli_limited([command, *args, "--input", f"x={npy}"], timeout=60)
    assert proc.returncode == EXIT_UNREADABLE, proc.stderr
    err = _one_error_line(proc)
    assert str(npy) in err
    assert ("empty" in err) if kind == "empty" else ("shape (1099511627776,)" in err
                                                     and "holds 64 bytes" in err)


def test_npy_input_of_the_right_size_still_runs(converted, tmp_path):
    _, model = converted
    np.save(tmp_path / "x.npy", np.linspace(-1, 1, 2 * 7 * 5 * 3, dtype=np.float32)
            .reshape(2, 7, 5, 3))
    proc = run_cli_limited(["run", model, "--input", f"x={tmp_path / 'x.npy'}",
                            "-o", tmp_path / "outs"], timeout=60)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert np.load(tmp_path / "outs" / "y.npy").shape == (2, 6)


# -- finding 10: verify against the wrong source ------------------------------------------------


def test_verify_against_a_source_with_other_shapes_names_the_mismatch(converted, tmp_path):
    _, model = converted
    other, _ = write_source(tmp_path / "other", "onnx")
    import onnx

    proto = onnx.load(str(other))
    proto.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 9
    onnx.save(proto, str(other))
    proc = run_cli_limited(["verify", other, model], timeout=60)
    assert proc.returncode == EXIT_UNREADABLE, proc.stderr
    err = _one_error_line(proc)
    assert "was converted from the onnx model 'model.onnx'" in err
    assert "(2, 3, 7, 5)" in err and "(2, 3, 9, 5)" in err


def test_verify_of_a_caffe_conversion_against_an_onnx_source_says_so(converted, tmp_path):
    onnx_source, _ = converted
    caffe_source, extra = write_source(tmp_path / "caffe", "caffe")
    caffe_converted = tmp_path / "caffe.onnx"
    convert(caffe_source, caffe_converted, options=ConvertOptions(weights=extra[-1]))
    proc = run_cli_limited(["verify", onnx_source, caffe_converted], timeout=120)
    assert proc.returncode == EXIT_UNREADABLE, proc.stderr
    assert "was converted from the caffe model 'deploy.prototxt', not from an onnx model" \
        in _one_error_line(proc)


@pytest.mark.parametrize("fmt", ["tf", "caffe"])
def test_verify_against_a_source_of_another_framework_says_so(fmt, converted, tmp_path):
    _, model = converted
    other, extra = write_source(tmp_path / "other", fmt)
    proc = run_cli_limited(["verify", other, model, *extra], timeout=120)
    assert proc.returncode == EXIT_UNREADABLE, proc.stderr
    err = _one_error_line(proc)
    assert f"was converted from the onnx model 'model.onnx', not from a {fmt} model" in err


def test_verify_of_the_right_pair_still_matches(converted):
    source, model = converted
    proc = run_cli_limited(["verify", source, model], timeout=60)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "verification: MATCH" in proc.stdout


# -- finding 10: option values that are usage mistakes ------------------------------------------


@pytest.mark.parametrize("option", [["--batch", "0"], ["--jobs", "0"]])
def test_zero_batch_or_jobs_is_a_usage_error(option, tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    proc = run_cli_limited(["convert", source, "-o", tmp_path / "m.onnx", *option], timeout=60)
    assert proc.returncode == EXIT_UNREADABLE, proc.stderr
    assert f"Invalid value for '{option[0]}': 0 is not in the range x>=1." in proc.stderr
    assert not (tmp_path / "m.onnx").exists()


# -- finding 9: --jobs ----------------------------------------------------------------------------


def _usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def test_jobs_is_capped_at_sources_and_cpus_in_a_real_run(tmp_path):
    sources = [write_source(tmp_path / d, "onnx")[0] for d in "abc"]
    proc = run_cli_limited(["-v", "convert", *sources, "--output-dir", tmp_path / "out",
                            "--jobs", "1000"], timeout=120)
    assert proc.returncode == EXIT_OK, proc.stderr
    expected = min(3, _usable_cpus())
    assert f"3 source(s), {expected} worker process(es) (--jobs 1000)" in proc.stderr
    assert "3 of 3 converted" in proc.stdout


class _RecordingPool(futures.ThreadPoolExecutor):
    created: ClassVar[list[int]] = []

    def __init__(self, max_workers, initializer=None):
        type(self).created.append(max_workers)
        super().__init__(max_workers=max_workers)


@pytest.mark.parametrize(("jobs", "sources", "cpus", "expected"),
                         [(1000, 3, 8, 3), (1000, 5, 2, 2), (2, 5, 8, 2), (1, 5, 8, 1)])
def test_the_pool_gets_min_of_jobs_sources_and_cpus(jobs, sources, cpus, expected, tmp_path,
                                                     monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    monkeypatch.setattr(futures, "ProcessPoolExecutor", _RecordingPool)
    monkeypatch.setattr(_RecordingPool, "created", [])
    calls = []
    monkeypatch.setattr(batch, "convert_one", lambda *a: calls.append(a) or batch.BatchOutcome(
        a[0], a[1], "ok", EXIT_OK, 0.0))
    paths = [write_source(tmp_path / f"s{i}", "onnx")[0] for i in range(sources)]
    outcomes = batch.convert_many(paths, tmp_path / "out", ConvertOptions(), jobs=jobs)
    assert batch.exit_code(outcomes) == EXIT_OK and len(calls) == sources
    assert _RecordingPool.created == ([expected] if expected > 1 else [])


def test_help_says_how_jobs_is_capped():
    proc = run_cli_limited(["convert", "--help"], timeout=60)
    assert "capped at the number of sources and of usable CPUs" in " ".join(proc.stdout.split())


def test_pairing_allows_the_input_shape_overrides_of_the_conversion(tmp_path):
    """Declared x: 1x3x4x5, converted with --input-shape x=1,3,6,5: with the same option the
    pair fits (only the rank is compared); without it the shapes disagree and verify says so."""
    import onnx
    from onnx import TensorProto, helper

    from nhwc_onnx.errors import ModelLoadError
    from nhwc_onnx.serialize import load
    from nhwc_onnx.verification.pairing import check_pairing

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    source = tmp_path / "relu.onnx"
    onnx.save(model, str(source))
    output = tmp_path / "relu.nhwc.onnx"
    override = ConvertOptions(input_shapes={"x": [1, 3, 6, 5]})
    convert(source, output, options=override)
    shapes = {"x": (1, 3, 6, 5)}
    check_pairing(source, "onnx", override, output, load(output), shapes)  # fits
    with pytest.raises(ModelLoadError, match=r"\(1, 3, 6, 5\) in the converted model"):
        check_pairing(source, "onnx", ConvertOptions(), output, load(output), shapes)
