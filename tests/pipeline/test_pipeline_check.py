"""check (and every other command) on a pipeline whose manifest or segments are wrong: a
tensor no segment produces, segments out of order (a cycle), a segment that is not the kind
it claims, entries that disagree with the files."""
from __future__ import annotations

import json
import re

import pytest

from tests.cli_runner import run_cli
from tests.pipeline import models


@pytest.fixture
def split(tmp_path):
    source = models.lrn_net(tmp_path / "m.onnx")
    out = tmp_path / "out"
    assert run_cli("convert", source, "--split", "-o", out).exit_code == 0
    return out


def edit(folder, change) -> None:
    path = folder / "pipeline.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def check(folder):
    result = run_cli("check", folder)
    return result.exit_code, result.stdout + result.stderr


def test_valid_pipeline_passes_check(split):
    code, text = check(split)
    assert code == 0
    assert re.fullmatch(rf"{re.escape(str(split))}: valid pipeline \(\d+ nodes\)\n", text)


def test_glob_reaching_into_a_pipeline_checks_its_segments_as_the_pipeline_says(split):
    """CI's `check 'out/*.onnx'` (a quoted glob, or the shell's expansion): a standard
    segment is no dialect model, so the files of a pipeline are checked with it, as one."""
    for args in ([f"{split}/*.onnx"], sorted(str(p) for p in split.glob("*.onnx")),
                 [str(split / "01_onnx.onnx")]):
        result = run_cli("check", *args)
        assert result.exit_code == 0, result.output
        assert result.stdout == f"{split}: valid pipeline (13 nodes)\n"

    def relabel(data):
        data["segments"][1]["kind"] = "dialect"

    edit(split, relabel)
    result = run_cli("check", f"{split}/*.onnx")
    assert result.exit_code == 1
    assert "INVALID pipeline" in result.stdout


def test_folder_holding_a_pipeline_and_a_model_checks_the_pipeline_as_one(split, tmp_path):
    """CI's `check models/`: the pipeline's standard segments are no dialect models."""
    import shutil

    models_dir = tmp_path / "models"
    models_dir.mkdir()
    shutil.copytree(split, models_dir / "lrn")
    shutil.copy(split / "00_dialect.onnx", models_dir / "alone.onnx")
    result = run_cli("check", models_dir)
    assert result.exit_code == 0, result.output
    assert f"{models_dir / 'alone.onnx'}: valid (" in result.stdout
    assert f"{models_dir / 'lrn'}: valid pipeline (" in result.stdout
    assert "2 files: 2 valid, 0 invalid, 0 unreadable" in result.stdout
    junit = run_cli("check", "--format", "junit", models_dir)
    assert junit.exit_code == 0 and 'tests="2"' in junit.stdout

    def relabel(data):
        data["segments"][0]["kind"] = "onnx"

    edit(models_dir / "lrn", relabel)
    junit = run_cli("check", "--format", "junit", models_dir)
    assert junit.exit_code == 1
    assert 'failures="1"' in junit.stdout and "holds nhwc dialect ops" in junit.stdout


def test_missing_tensor_is_named(split):
    def rename(data):
        data["segments"][2]["inputs"][0]["name"] = "ghost"

    edit(split, rename)
    code, text = check(split)
    assert code == 1
    assert "reads 'ghost', which no segment produces and is no pipeline input" in text
    ran = run_cli("run", split, "--random")  # nothing runs a broken pipeline
    assert ran.exit_code == 1 and "not a runnable pipeline" in ran.stderr


def test_segments_out_of_order_are_a_cycle(split):
    def swap(data):
        s = data["segments"]
        s[1], s[3] = s[3], s[1]

    edit(split, swap)
    code, text = check(split)
    assert code == 1
    assert "which segment 3 produces only later (a cycle or the wrong order)" in text


def test_standard_segment_claiming_to_be_dialect_is_invalid(split):
    def relabel(data):
        data["segments"][1]["kind"] = "dialect"

    edit(split, relabel)
    code, text = check(split)
    assert code == 1
    assert "two dialect segments in a row" in text
    assert "segment 1 (01_onnx.onnx, dialect): " in text  # its ops break dialect rules


def test_dialect_segment_claiming_to_be_standard_is_invalid(split):
    def relabel(data):
        data["segments"][0]["kind"] = "onnx"

    edit(split, relabel)
    code, text = check(split)
    assert code == 1
    assert "segment 0 (00_dialect.onnx, onnx): holds nhwc dialect ops" in text


def test_swapped_segment_file_is_found_by_its_inputs(split):
    (split / "02_dialect.onnx").write_bytes((split / "04_dialect.onnx").read_bytes())
    code, text = check(split)
    assert code == 1
    assert "segment 2 (02_dialect.onnx, dialect): inputs are ['norm2_out'] in the file, " \
           "['norm1_out'] in pipeline.json" in text


def test_shape_that_disagrees_with_the_producer_is_named(split):
    def reshape(data):
        data["segments"][1]["inputs"][0]["shape"][1] = 99

    edit(split, reshape)
    code, text = check(split)
    assert code == 1
    assert "segment 1 (01_onnx.onnx) input 'relu1_out': shape" in text
    assert "in the file" in text  # and the file itself disagrees too


def test_unreadable_manifest_exits_2(split):
    (split / "pipeline.json").write_text('{"format": "something else"}')
    code, text = check(split)
    assert code == 2
    assert "not an nhwc-onnx pipeline" in text


def test_segment_file_outside_the_folder_is_refused(split, tmp_path):
    (tmp_path / "elsewhere.onnx").write_bytes((split / "00_dialect.onnx").read_bytes())

    def escape(data):
        data["segments"][0]["file"] = "../elsewhere.onnx"

    edit(split, escape)
    code, text = check(split)
    assert code == 2
    assert "segment 0: file must be a file name in the pipeline's folder" in text
    assert run_cli("run", split, "--random").exit_code == 2


def test_missing_segment_file_is_named(split):
    (split / "03_onnx.onnx").unlink()
    code, text = check(split)
    assert code == 1
    assert "segment 3 (03_onnx.onnx, onnx): " in text
