"""The model (-o), the report (--report)
and every batch output are planned and checked before converting. A path that is a source,
another output, a directory or not a regular file is refused (exit 1, nothing written); a
symlink to a regular file is written through (the link stays, its target is replaced)."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import onnx
import pytest
from rel_checks import folder_listing
from rel_limits import run_cli_limited
from rel_models import write_source

from nhwc_onnx.errors import EXIT_INVALID, EXIT_OK, EXIT_UNREADABLE


def _one_error_line(proc) -> str:
    err = proc.stderr.strip()
    assert "Traceback" not in err and "internal error" not in err, err
    assert len(err.splitlines()) == 1 and err.startswith("Error: "), err
    return err


def _is_dialect_model(path: Path) -> bool:
    return any(n.domain == "nhwc" for n in onnx.load(str(path)).graph.node)


# -- finding 1: --report ------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["same path", "dotted", "symlink", "hard link"])
def test_report_naming_the_source_is_refused_before_converting(spelling, tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    before = source.read_bytes()
    report = {"same path": source,
              "dotted": tmp_path / "src" / ".." / "src" / source.name,
              "symlink": tmp_path / "link.json",
              "hard link": tmp_path / "hard.json"}[spelling]
    if spelling == "symlink":
        report.symlink_to(source)
    elif spelling == "hard link":
        os.link(source, report)
    out_dir = tmp_path / "out"
    proc = run_cli_limited(["convert", source, "-o", out_dir / "m.onnx", "--report", report])
    assert proc.returncode == EXIT_INVALID, proc.stderr
    err = _one_error_line(proc)
    assert "the report would overwrite the input" in err
    assert source.read_bytes() == before
    assert not out_dir.exists()  # refused before converting: no model either


@pytest.mark.parametrize("spelling", ["same path", "dot slash"])
def test_report_naming_the_output_is_refused(spelling, tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    output = out_dir / "m.onnx"
    output.write_bytes(b"the previous conversion")
    report = output if spelling == "same path" else f"{out_dir}/./m.onnx"
    proc = run_cli_limited(["convert", source, "-o", output, "--report", report])
    assert proc.returncode == EXIT_INVALID, proc.stderr
    assert "the report and the output" in _one_error_line(proc)
    assert output.read_bytes() == b"the previous conversion"
    assert folder_listing(out_dir) == ["m.onnx"]


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_report_that_is_not_a_regular_file_is_refused(kind, tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    report = tmp_path / "report.json"
    if kind == "directory":
        report.mkdir()
    else:
        os.mkfifo(report)
    out_dir = tmp_path / "out"
    proc = run_cli_limited(["convert", source, "-o", out_dir / "m.onnx", "--report", report],
                           timeout=60)
    assert proc.returncode == EXIT_INVALID, proc.stderr
    assert ("is a directory" if kind == "directory" else "is a FIFO") in _one_error_line(proc)
    assert not out_dir.exists()
    assert report.is_dir() if kind == "directory" else stat.S_ISFIFO(report.stat().st_mode)


def test_report_is_replaced_in_one_rename_and_symlinks_are_written_through(tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    reports = tmp_path / "reports"
    reports.mkdir()
    real = reports / "latest-real.json"
    real.write_text("old")
    link = reports / "latest.json"
    link.symlink_to(real.name)
    proc = run_cli_limited(["-q", "convert", source, "-o", tmp_path / "m.onnx",
                            "--report", link])
    assert proc.returncode == EXIT_OK, proc.stderr
    assert link.is_symlink() and os.readlink(link) == real.name
    assert json.loads(real.read_text())["source"] == str(source)
    assert folder_listing(reports) == ["latest-real.json", "latest.json"]  # no temp file


def test_failed_conversion_keeps_the_old_report(tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    source.write_bytes(source.read_bytes()[:50])
    report = tmp_path / "report.json"
    report.write_text("old")
    proc = run_cli_limited(["convert", source, "-o", tmp_path / "m.onnx", "--report", report])
    assert proc.returncode == EXIT_UNREADABLE, proc.stderr
    assert report.read_text() == "old"
    assert folder_listing(tmp_path) == ["report.json", "src", "src/model.onnx"]


def test_batch_writes_one_report_per_model_beside_its_output(tmp_path):
    first, _ = write_source(tmp_path / "a", "onnx")
    second, _ = write_source(tmp_path / "b", "onnx")
    out_dir = tmp_path / "out"
    proc = run_cli_limited(["-q", "convert", first, second, "--output-dir", out_dir,
                            "--report", out_dir])
    assert proc.returncode == EXIT_OK, proc.stderr
    assert folder_listing(out_dir) == ["model.onnx", "model.report.json", "model_1.onnx",
                                       "model_1.report.json"]
    for stem, src in (("model", first), ("model_1", second)):
        data = json.loads((out_dir / f"{stem}.report.json").read_text())
        assert (data["source"], data["output"]) == (str(src), str(out_dir / f"{stem}.onnx"))


def test_batch_report_given_a_file_name_is_a_usage_error(tmp_path):
    first, _ = write_source(tmp_path / "a", "onnx")
    second, _ = write_source(tmp_path / "b", "onnx")
    proc = run_cli_limited(["convert", first, second, "--output-dir", tmp_path / "out",
                            "--report", tmp_path / "report.json"])
    assert proc.returncode == EXIT_UNREADABLE, proc.stderr  # a usage error's code
    assert "--report takes a folder" in proc.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "report.json").exists()


def test_output_inside_a_savedmodel_source_folder_is_refused(tmp_path):
    folder = tmp_path / "saved"
    (folder / "variables").mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(b"not read: refused before loading")
    proc = run_cli_limited(["convert", folder, "-o", folder / "variables" / "m.onnx"])
    assert proc.returncode == EXIT_INVALID, proc.stderr
    assert "the output would overwrite the input" in _one_error_line(proc)
    assert folder_listing(folder) == ["saved_model.pb", "variables"]


# -- finding 2: batch planning ------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["same path", "hard link"])
def test_batch_output_that_is_a_source_stops_the_batch_before_converting(spelling, tmp_path):
    """`convert a/model.onnx d/model.onnx --output-dir d` would write d/model.onnx over the
    second source; the whole batch is refused and nothing is converted."""
    first, _ = write_source(tmp_path / "a", "onnx")
    other, _ = write_source(tmp_path / "b", "onnx")
    out_dir = tmp_path / "d"
    out_dir.mkdir()
    second = out_dir / "model.onnx"
    if spelling == "same path":
        second.write_bytes(other.read_bytes())  # a distinct source file
    else:
        os.link(other, second)  # the same inode under the planned output's name
    before = second.read_bytes()
    proc = run_cli_limited(["convert", first, second, "--output-dir", out_dir])
    assert proc.returncode == EXIT_INVALID, proc.stderr
    err = _one_error_line(proc)
    assert f"{second}: the output would overwrite the input" in err
    assert second.read_bytes() == before
    assert folder_listing(out_dir) == ["model.onnx"]  # not even the first one was written


def test_batch_report_that_is_a_source_stops_the_batch(tmp_path):
    """A source named like a planned report (<dir>/<stem>.report.json) is never overwritten."""
    first, _ = write_source(tmp_path / "a", "onnx")
    odd = tmp_path / "r" / "model.report.json"
    odd.parent.mkdir()
    odd.write_bytes(first.read_bytes())
    # first's report would be r/model.report.json: the second source
    proc = run_cli_limited(["convert", first, odd, "--framework", "onnx", "--output-dir",
                            tmp_path / "out", "--report", tmp_path / "r"])
    assert proc.returncode == EXIT_INVALID, proc.stderr
    assert "the report would overwrite the input" in _one_error_line(proc)
    assert odd.read_bytes() == first.read_bytes()
    assert not (tmp_path / "out").exists()


# -- finding 3: targets that are not regular files ----------------------------------------------


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _symlink(path: Path, target) -> Path:
    path.symlink_to(target)
    return path


def _device(path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("creating a device node needs root (CI containers run as root)")
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a private /dev/null
    return path


TARGETS = {
    "fifo": lambda d: _fifo(d / "out.onnx"),
    "symlink to /dev/null": lambda d: _symlink(d / "out.onnx", "/dev/null"),
    "symlink to a fifo": lambda d: _symlink(d / "out.onnx", _fifo(d / "pipe")),
    "character device": lambda d: _device(d / "out.onnx"),
    "dangling symlink": lambda d: _symlink(d / "out.onnx", d / "nowhere.onnx"),
}


@pytest.mark.parametrize("kind", list(TARGETS))
def test_output_that_is_not_a_regular_file_is_refused_and_left_alone(kind, tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    folder = tmp_path / "out"
    folder.mkdir()
    target = TARGETS[kind](folder)
    before = {p.name: (p.is_symlink(), os.lstat(p).st_mode) for p in folder.iterdir()}
    proc = run_cli_limited(["convert", source, "-o", target], timeout=60)
    assert proc.returncode == EXIT_INVALID, proc.stderr
    err = _one_error_line(proc)
    assert "only a regular file can be the output" in err or "does not exist" in err
    after = {p.name: (p.is_symlink(), os.lstat(p).st_mode) for p in folder.iterdir()}
    assert after == before  # nothing replaced, no temp file
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_output_symlink_to_a_regular_file_is_written_through(tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    folder = tmp_path / "out"
    folder.mkdir()
    real = folder / "v3.onnx"
    real.write_bytes(b"old")
    link = _symlink(folder / "latest.onnx", real.name)
    proc = run_cli_limited(["-q", "convert", source, "-o", link])
    assert proc.returncode == EXIT_OK, proc.stderr
    assert link.is_symlink() and os.readlink(link) == real.name
    assert _is_dialect_model(real)
    assert folder_listing(folder) == ["latest.onnx", "v3.onnx"]


# Every output the commands write, given a path of the wrong kind: a directory where a file is
# written, a file where a folder is. One rule: an unusable output (exit 1), nothing written.
_WRONG_KIND_OUTPUTS = {
    "convert -o DIR": (["convert", "SRC", "-o", "DIR"], "is a directory"),
    "convert --report DIR": (["convert", "SRC", "-o", "OUT/m.onnx", "--report", "DIR"],
                             "is a directory"),
    "convert --html DIR": (["convert", "SRC", "-o", "OUT/m.onnx", "--verify", "--html", "DIR"],
                           "is a directory"),
    "verify --html DIR": (["verify", "SRC", "MODEL", "--html", "DIR"], "is a directory"),
    "lower -o DIR": (["lower", "MODEL", "-o", "DIR"], "is a directory"),
    "run -o FILE": (["run", "MODEL", "--random", "-o", "FILE"], "is not a folder"),
    "convert --output-dir FILE": (["convert", "SRC", "SRC", "--output-dir", "FILE"],
                                  "is not a folder"),
}


@pytest.mark.parametrize("case", list(_WRONG_KIND_OUTPUTS))
def test_output_path_of_the_wrong_kind_is_an_unusable_output(case, run_cli, tmp_path):
    source, _ = write_source(tmp_path / "src", "onnx")
    model = tmp_path / "m.onnx"
    assert run_cli("convert", source, "-o", model).exit_code == EXIT_OK
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("a file")
    places = {"SRC": source, "MODEL": model, "DIR": tmp_path / "dir",
              "FILE": tmp_path / "file", "OUT": tmp_path / "out"}
    args, words = _WRONG_KIND_OUTPUTS[case]
    args = [str(places.get(a.split("/")[0], a)) + ("/m.onnx" if a == "OUT/m.onnx" else "")
            for a in args]
    before = sorted(p.name for p in tmp_path.iterdir())
    result = run_cli(*args)
    assert result.exit_code == EXIT_INVALID, result.output
    assert words in result.stderr and "internal error" not in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert list((tmp_path / "dir").iterdir()) == []
    assert (tmp_path / "file").read_text() == "a file"
