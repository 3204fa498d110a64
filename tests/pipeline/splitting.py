"""What the split tests share: convert a source with --split through the command line, check
the folder it wrote, and read its manifest."""
from __future__ import annotations

import json

from tests.cli_runner import run_cli


def split_and_check(source_args, out, *extra):
    """``convert SOURCE_ARGS --split -o OUT EXTRA``, which must succeed, then ``check OUT``,
    which must find a valid pipeline; returns (manifest, the convert's result)."""
    result = run_cli("convert", *source_args, "--split", "-o", out, *extra)
    assert result.exit_code == 0, result.output
    checked = run_cli("check", out)
    assert checked.exit_code == 0, checked.output
    assert "valid pipeline" in checked.stdout
    return json.loads((out / "pipeline.json").read_text()), result


def built_and_split(tmp_path, build, file_name: str, *extra):
    """``build(tmp_path / file_name)`` split into ``tmp_path / model_split``; returns
    (source, folder, manifest, result)."""
    tmp_path.mkdir(exist_ok=True)
    source = build(tmp_path / file_name)
    out = tmp_path / "model_split"
    manifest, result = split_and_check([source], out, *extra)
    return source, out, manifest, result


def kinds(manifest) -> list[str]:
    return [s["kind"] for s in manifest["segments"]]
