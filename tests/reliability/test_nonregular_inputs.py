"""Inputs that never end or block.

A FIFO, a device or a hostile external-data entry given to the converter or to ``check`` /
``info`` / ``run`` is refused with exit 2 and one line, before anything is read. Every case runs
the real command line in a memory-bounded child with a timeout, so a regression (a hang, a read
of /dev/zero until memory runs out) fails the test instead of hanging CI.
"""
from __future__ import annotations

import os

import pytest
from rel_checks import folder_listing
from rel_fs import external_dialect, fifo, sparse, symlink_to, weights_file
from rel_limits import run_cli_limited
from rel_models import write_source

from nhwc_onnx.errors import EXIT_UNREADABLE

HANG_GUARD = float(os.environ.get("NHWC_HANG_GUARD", "60"))  # seconds; a case takes about one


def _refused(proc, fragment: str) -> str:
    err = proc.stderr.strip()
    detail = f"exit {proc.returncode}, stderr: {err!r}"
    assert proc.returncode == EXIT_UNREADABLE, detail
    assert "Traceback" not in proc.stderr and "internal error" not in err, detail
    assert len(err.splitlines()) == 1 and err.startswith("Error: "), detail
    assert fragment.lower() in err.lower(), detail
    return err


# -- finding 5: the dialect reader (check/run/info) guards external data like the loader -----

EXTERNAL_CASES = {
    # name: (external_dialect kwargs, fragment of the refusal)
    "FIFO as location": ({"location": "w.bin", "data": fifo()}, "named pipe"),
    "dims [-1], 2 GB sparse file": ({"location": "w.bin", "dims": [-1], "data": sparse(2 << 30)},
                                    "negative dimension"),
    "dims overflowing int64": ({"location": "w.bin", "dims": [2**62, 2**62],
                                "data": weights_file()}, "too short"),
    "NUL byte in location": ({"location": "w\0.bin", "data": weights_file("w")}, "NUL byte"),
    "location escapes the folder": ({"location": "../w.bin"}, "outside the model's folder"),
    "symlink to /dev/zero": ({"location": "w.bin", "data": symlink_to("/dev/zero")},
                             "outside the model's folder"),
    "dangling symlink": ({"location": "w.bin", "data": symlink_to("gone.bin")},
                         "does not exist"),
    "length disagrees with dims": ({"location": "w.bin", "length": 8, "data": weights_file()},
                                   "does not match"),
    "offset past the end": ({"location": "w.bin", "offset": 1 << 40, "data": weights_file()},
                            "too short"),
}


# every case through check; the blocking one through info and run too
COMMAND_CASES = [("check", c) for c in EXTERNAL_CASES] + [
    ("info", "FIFO as location"), ("run", "FIFO as location"),
    ("info", "dims [-1], 2 GB sparse file"), ("run", "NUL byte in location")]


@pytest.mark.parametrize(("command", "case"), COMMAND_CASES)
def test_dialect_reader_refuses_hostile_external_data(case, command, tmp_path):
    kwargs, fragment = EXTERNAL_CASES[case]
    if case == "location escapes the folder":
        weights_file()(tmp_path, b"\0" * 4096)  # it exists, just outside
    model = external_dialect(tmp_path / "m", **kwargs)
    before = folder_listing(tmp_path)
    args = {"check": ["check", model], "info": ["info", model],
            "run": ["run", model, "--random", "--output-dir", tmp_path / "m" / "out"]}[command]
    proc = run_cli_limited(args, timeout=HANG_GUARD)
    _refused(proc, fragment)
    assert folder_listing(tmp_path) == before


def test_dialect_reader_reads_good_external_data(tmp_path):
    """The guard refuses hostile entries only: a correct external weight still loads."""
    model = external_dialect(tmp_path, "w.bin", data=weights_file())
    proc = run_cli_limited(["check", model], timeout=HANG_GUARD)
    assert proc.returncode == 0, proc.stderr


def test_one_guard_for_both_onnx_readers(monkeypatch, tmp_path):
    """The source loader and the dialect reader share files.reads.external_span (one home): a
    rule added there applies to both."""
    from nhwc_onnx.errors import ModelLoadError
    from nhwc_onnx.files import reads as safe_io
    from nhwc_onnx.frontends.onnx import loader
    from nhwc_onnx.serialize import load, reader

    model = external_dialect(tmp_path, "w.bin", data=weights_file())
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args[-1])
        raise ModelLoadError("planted refusal")

    monkeypatch.setattr(safe_io, "external_span", refuse)
    monkeypatch.setattr(loader, "external_span", refuse, raising=True)
    monkeypatch.setattr(reader, "external_span", refuse, raising=True)
    for read in (load, lambda p: loader.read_model(str(p), {})):
        with pytest.raises(ModelLoadError, match="planted refusal"):
            read(model)
    assert len(calls) == 2


# -- finding 8: non-regular files as sources, or given to check/info/run --------------------


def _sources(tmp_path):
    """(name, CLI arguments, fragment) of every non-regular input the CLI must refuse."""
    caffe_proto, caffe_args = write_source(tmp_path / "caffe", "caffe")
    for name in ("pipe.pb", "pipe.prototxt", "pipe.onnx", "pipe.caffemodel", "pipe.keras"):
        os.mkfifo(tmp_path / name)
    out = tmp_path / "out" / "m.onnx"
    return [
        ("tf /dev/zero", ["convert", "/dev/zero", "--framework", "tf", "-o", out],
         "character device"),
        ("caffe /dev/zero", ["convert", "/dev/zero", "--framework", "caffe", "--weights",
                             "random", "-o", out], "character device"),
        ("onnx /dev/zero", ["convert", "/dev/zero", "--framework", "onnx", "-o", out],
         "character device"),
        ("caffemodel /dev/zero", ["convert", caffe_proto, "--weights", "/dev/zero", "-o", out],
         "character device"),
        ("caffemodel FIFO", ["convert", caffe_proto, "--weights", tmp_path / "pipe.caffemodel",
                             "-o", out], "named pipe"),
        ("tf FIFO", ["convert", tmp_path / "pipe.pb", "-o", out], "named pipe"),
        ("keras FIFO", ["convert", tmp_path / "pipe.keras", "-o", out], "named pipe"),
        ("prototxt FIFO", ["convert", tmp_path / "pipe.prototxt", "--weights", "random",
                           "-o", out], "named pipe"),
        ("onnx FIFO", ["convert", tmp_path / "pipe.onnx", "-o", out], "named pipe"),
        ("check /dev/zero", ["check", "/dev/zero"], "character device"),
        ("check FIFO", ["check", tmp_path / "pipe.onnx"], "named pipe"),
        ("info /dev/zero", ["info", "/dev/zero", "--framework", "tf"], "character device"),
        ("info FIFO", ["info", tmp_path / "pipe.onnx"], "named pipe"),
        ("run /dev/zero", ["run", "/dev/zero", "--random"], "character device"),
        ("run FIFO", ["run", tmp_path / "pipe.onnx", "--random"], "named pipe"),
    ], caffe_args


SOURCE_CASES = ["tf /dev/zero", "caffe /dev/zero", "onnx /dev/zero", "caffemodel /dev/zero",
                "caffemodel FIFO", "tf FIFO", "keras FIFO", "prototxt FIFO", "onnx FIFO",
                "check /dev/zero", "check FIFO", "info /dev/zero", "info FIFO",
                "run /dev/zero", "run FIFO"]


@pytest.mark.parametrize("name", SOURCE_CASES)
def test_non_regular_input_is_refused_before_reading(name, tmp_path):
    cases, _ = _sources(tmp_path)
    (args, fragment), = [(a, f) for n, a, f in cases if n == name]
    (tmp_path / "out").mkdir()
    proc = run_cli_limited(args, timeout=HANG_GUARD)
    _refused(proc, fragment)
    assert folder_listing(tmp_path / "out") == []


def test_the_case_list_is_complete(tmp_path):
    cases, _ = _sources(tmp_path)
    assert [n for n, _, _ in cases] == SOURCE_CASES
