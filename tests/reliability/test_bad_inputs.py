"""Every broken or hostile input ends in one 'Error:' line and its documented exit code: no
traceback, no output file, no temp file left in the output or the source folder."""
from __future__ import annotations

import pytest
from bad_inputs import all_cases
from rel_checks import assert_clean_failure, folder_listing

from nhwc_onnx.errors import EXIT_OK, EXIT_UNREADABLE

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_fails_cleanly(case, tmp_path, run_cli):
    src_dir, out_dir = tmp_path / "src", tmp_path / "out"
    src_dir.mkdir()
    out_dir.mkdir()
    source, extra = case.build(src_dir)
    before = folder_listing(src_dir)
    result = run_cli("convert", source, "-o", out_dir / "model.nhwc.onnx", *extra)
    assert_clean_failure(result, case.code, case.fragment, out_dir)
    assert folder_listing(src_dir) == before, "the source folder changed"


def test_every_format_has_the_required_kinds_of_bad_input():
    kinds = {}
    for case in CASES:
        kinds.setdefault(case.fmt, set()).add(case.kind.split(" at ")[0])
    common = {"empty", "random bytes", "truncated", "cycle", "without producer",
              "2^40", "negative", "Reshape count mismatch"}
    for fmt, names in kinds.items():
        text = " | ".join(sorted(names))
        missing = [k for k in common if k not in text]
        assert not missing, f"{fmt}: no case for {missing}"
    assert sum(c.kind.startswith("truncated") for c in CASES if c.fmt == "onnx") >= 10
    assert sum(c.kind.startswith("truncated") for c in CASES if c.fmt == "tf") >= 10
    assert sum("caffemodel truncated" in c.kind for c in CASES) >= 10


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_info_describes_every_bad_input_that_decodes(case, tmp_path, run_cli):
    """``info`` answers as ``convert`` does about the bytes: a file that does not decode into
    a model (exit 2 for convert) exits 2; any model it decodes, however broken (a cycle, a
    tensor produced twice, a net without layers), is described with exit 0 and a last line
    saying how its conversion ends."""
    source, extra = case.build(tmp_path)
    result = run_cli("info", source, *extra)
    if case.code == EXIT_UNREADABLE:
        assert result.exit_code == EXIT_UNREADABLE, result.output
        assert case.fragment.lower() in result.stderr.lower()
    else:
        assert result.exit_code == EXIT_OK, result.output
        last = result.stdout.strip().splitlines()[-1].strip()
        assert last.startswith("conversion: ") or result.stdout.count("conversion: refused") \
            == 1, result.stdout
        assert "conversion: converts" not in result.stdout
