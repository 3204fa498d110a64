"""docs/ops.md is generated from the schemas and registries; the committed copy must be current."""
from __future__ import annotations

from nhwc_onnx.schemas import DIALECT_OPS
from nhwc_onnx.support.docs import DOCS_PATH, generate_markdown, main


def test_committed_ops_md_is_current():
    assert DOCS_PATH.read_text(encoding="utf-8") == generate_markdown(), (
        "docs/ops.md is stale: run python -m nhwc_onnx.support.docs")


def test_every_op_and_attribute_is_documented():
    text = generate_markdown()
    for schema in DIALECT_OPS.all():
        assert f"\n## {schema.name}\n" in text
        section = text.split(f"\n## {schema.name}\n", 1)[1].split("\n## ", 1)[0]
        assert f"Layout class: **{schema.layout.value}**" in section
        for name in schema.attrs:
            assert f"| `{name}` |" in section, (schema.name, name)
        for port in schema.inputs:
            assert f"| `{port.name}` |" in section, (schema.name, port.name)


def test_check_mode_detects_a_stale_file(tmp_path, capsys):
    target = tmp_path / "ops.md"
    assert main(["--output", str(target), "--check"]) == 1
    assert main(["--output", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == generate_markdown()
    assert main(["--output", str(target), "--check"]) == 0
    target.write_text(target.read_text(encoding="utf-8") + "hand edit\n", encoding="utf-8")
    assert main(["--output", str(target), "--check"]) == 1
    assert "stale" in capsys.readouterr().out
