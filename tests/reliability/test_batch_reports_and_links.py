"""Several sources at once, through the real command line with real symlinks.

A batch's `--report DIR` writes a report for a refused model too (as single mode does), the
table gives the whole reason (every refused node and the exact cut), and a `--report` or
`--output-dir` folder that is a dangling symlink is refused before anything is converted.

The names of a batch are derived, so a symlink planted at one of them in a shared folder
(`R/<model>.report.json -> /etc/passwd`, `O/<model>.onnx -> victim`) must not redirect the
write: the link is replaced by the new file and its target is left as it was. A path the user
names (`-o`, `--report` of one source) keeps the documented rule: a symlink to a regular file
is written through (tests/reliability/test_output_targets.py).
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from rel_checks import folder_listing
from rel_limits import run_cli_limited
from rel_models import write_source

from nhwc_onnx.errors import EXIT_INVALID, EXIT_OK

VICTIM_TEXT = "root:x:0:0:root:/root:/bin/sh\n"


def _refused_source(folder: Path) -> Path:
    """Relu, then Sin and Cos side by side (no converter for either): refused naming both,
    with the cut --outputs r."""
    folder.mkdir(parents=True, exist_ok=True)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Sin", ["r"], ["y1"], name="odd_sin"),
             helper.make_node("Cos", ["r"], ["y2"], name="odd_cos")]
    graph = helper.make_graph(
        nodes, "refused", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 7, 5])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, None) for y in ("y1", "y2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = folder / "refused.onnx"
    onnx.save(model, str(path))
    return path


def _is_dialect_model(path: Path) -> bool:
    return any(n.domain == "nhwc" for n in onnx.load(str(path)).graph.node)


# -- #5: reports of refused models, the whole reason in the table ---------------------------


def test_batch_writes_the_refusal_report_and_the_table_keeps_every_line(tmp_path):
    good, _ = write_source(tmp_path / "good", "onnx")
    refused = _refused_source(tmp_path / "bad")
    out_dir, reports = tmp_path / "out", tmp_path / "reports"
    proc = run_cli_limited(["convert", good, refused, "--output-dir", out_dir,
                            "--report", reports])
    assert proc.returncode == EXIT_INVALID, proc.stderr
    assert folder_listing(out_dir) == ["model.onnx"]
    assert folder_listing(reports) == ["model.report.json", "refused.report.json"]
    data = json.loads((reports / "refused.report.json").read_text())
    assert data["status"] == "refused" and data["source"] == str(refused)
    assert sorted(p["node"] for p in data["refused"]) == ["odd_cos", "odd_sin"]
    assert data["exact_cut"]["outputs"] == ["r"]
    # the table: the row, then every line of the refusal below it
    table = proc.stdout.splitlines()
    row = next(i for i, line in enumerate(table) if line.startswith(str(refused)))
    assert "cannot convert 2 onnx node(s) exactly (Cos x1, Sin x1):" in table[row]
    below = table[row + 1:row + 4]
    assert any("node 'odd_sin' (Sin)" in line for line in below), proc.stdout
    assert any("node 'odd_cos' (Cos)" in line for line in below), proc.stdout
    assert below[-1].strip() == "to convert the part that is exact (1 of 3 source nodes): " \
                                "--outputs r", proc.stdout
    assert table[-1] == "1 of 2 converted"


@pytest.mark.parametrize("flag", ["--report", "--output-dir"])
def test_a_dangling_symlink_as_the_batch_folder_is_refused_before_converting(flag, tmp_path):
    first, _ = write_source(tmp_path / "a", "onnx")
    second, _ = write_source(tmp_path / "b", "onnx")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    out_dir = tmp_path / "out"
    args = ["convert", first, second, "--output-dir", dangling if flag == "--output-dir"
            else out_dir] + (["--report", dangling] if flag == "--report" else [])
    proc = run_cli_limited(args)
    assert proc.returncode == EXIT_INVALID, proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("Error: ")
    assert f"'{dangling}' is a symlink to '{tmp_path / 'nowhere'}', which is not an existing " \
           "folder" in proc.stderr
    assert not out_dir.exists()  # planned first: nothing converted
    assert dangling.is_symlink() and not (tmp_path / "nowhere").exists()


# -- #9: derived names never write through a planted symlink --------------------------------


def _plant(link: Path, victim: Path) -> None:
    victim.write_text(VICTIM_TEXT)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim)


def test_a_symlink_planted_at_a_batch_output_or_report_is_replaced_not_followed(tmp_path):
    good, _ = write_source(tmp_path / "good", "onnx")
    refused = _refused_source(tmp_path / "bad")
    shared = tmp_path / "shared"
    victims = {name: tmp_path / f"victim_{name}" for name in
               ("model.onnx", "model.report.json", "refused.report.json")}
    for name, victim in victims.items():
        _plant(shared / name, victim)
    proc = run_cli_limited(["-q", "convert", good, refused, "--output-dir", shared,
                            "--report", shared])
    assert proc.returncode == EXIT_INVALID, proc.stderr  # the refused one
    for victim in victims.values():
        assert victim.read_text() == VICTIM_TEXT, victim  # untouched
    for name in victims:
        assert not (shared / name).is_symlink(), name  # the link was replaced by our file
    assert _is_dialect_model(shared / "model.onnx")
    assert json.loads((shared / "model.report.json").read_text())["source"] == str(good)
    assert json.loads((shared / "refused.report.json").read_text())["status"] == "refused"
    assert folder_listing(shared) == sorted(victims)  # no temp file


def test_a_symlink_to_a_source_at_a_batch_output_is_still_refused(tmp_path):
    """Replacing a link never overwrites its target, but a link that names a source is
    refused all the same (the user may have meant to convert it in place)."""
    first, _ = write_source(tmp_path / "a", "onnx")
    second, _ = write_source(tmp_path / "b", "onnx")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "model.onnx").symlink_to(first)
    before = first.read_bytes()
    proc = run_cli_limited(["convert", first, second, "--output-dir", out_dir])
    assert proc.returncode == EXIT_INVALID, proc.stderr
    assert "would overwrite the input" in proc.stderr
    assert first.read_bytes() == before and (out_dir / "model.onnx").is_symlink()


def test_the_writers_replace_a_link_planted_after_the_plan(tmp_path):
    """The plan checks a derived path, but a link may be planted after it: the write itself
    does not follow the path (follow_symlinks=False), so it replaces the link whenever it
    appeared; the .data file beside a large model is a derived name too."""
    from nhwc_onnx.api import convert, write_refusal_report
    from nhwc_onnx.errors import UnsupportedOpError
    from nhwc_onnx.files.writes import write_json
    from nhwc_onnx.serialize import save

    source, _ = write_source(tmp_path / "src", "onnx")
    model = convert(source).model
    out = tmp_path / "out"
    _plant(out / "m.onnx", tmp_path / "victim_model")
    _plant(out / "m.onnx.data", tmp_path / "victim_data")
    save(model, out / "m.onnx", external_threshold=0, follow_symlinks=False)
    # what a planted link points to does not matter: not even a FIFO blocks the write
    (out / "m.onnx.data").unlink()
    os.mkfifo(tmp_path / "fifo")
    (out / "m.onnx.data").symlink_to(tmp_path / "fifo")
    save(model, out / "m.onnx", external_threshold=0)
    _plant(out / "r.json", tmp_path / "victim_report")
    write_json(out / "r.json", {"a": 1}, follow_symlinks=False)
    _plant(out / "refusal.json", tmp_path / "victim_refusal")
    with pytest.raises(UnsupportedOpError) as refusal:
        convert(_refused_source(tmp_path / "bad"))
    write_refusal_report(out / "refusal.json", "bad.onnx", refusal.value, follow_symlinks=False)
    for name in ("model", "data", "report", "refusal"):
        assert (tmp_path / f"victim_{name}").read_text() == VICTIM_TEXT, name
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)
    assert not any(p.is_symlink() for p in out.iterdir())
    from nhwc_onnx.serialize import load

    assert load(out / "m.onnx").graph.nodes  # the external data beside it is ours
    assert folder_listing(out) == ["m.onnx", "m.onnx.data", "r.json", "refusal.json"]


def test_an_explicit_output_symlink_is_still_written_through(tmp_path):
    """-o keeps the documented rule (the link stays, its target is replaced); only its .data
    file, a derived name, is never followed."""
    source, _ = write_source(tmp_path / "src", "onnx")
    target = tmp_path / "real.onnx"
    target.write_bytes(b"previous")
    link = tmp_path / "link.onnx"
    link.symlink_to(target)
    proc = run_cli_limited(["-q", "convert", source, "-o", link])
    assert proc.returncode == EXIT_OK, proc.stderr
    assert link.is_symlink() and _is_dialect_model(target)
    assert os.readlink(link) == str(target)
