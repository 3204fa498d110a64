"""Test-wide settings that must be in place before TensorFlow is first imported, and the
check that every conversion report a test writes follows docs/report-schema.json."""
import functools
import json
import os
import stat
from pathlib import Path

import pytest

# TF 2.21's oneDNN CPU kernels return wrong numbers for some strided convolutions (e.g. a
# 1x2 kernel, stride 2, SAME, on a width-1 input gives zeros); the reference kernels are exact.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# CI runs the property tests on a fixed example sequence, so a run is reproducible; local runs
# keep exploring new examples.
from hypothesis import settings

settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


# -- every conversion report a test writes follows docs/report-schema.json --------------------

REPORT_SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "report-schema.json"


@functools.cache
def _report_validator():
    import jsonschema

    schema = json.loads(REPORT_SCHEMA.read_text())
    return jsonschema.Draft202012Validator(schema)


def assert_report_follows_schema(data, where: str = "") -> None:
    """Fail when ``data`` (a parsed --report file) is not one of the shapes the schema gives."""
    errors = sorted(_report_validator().iter_errors(data), key=lambda e: list(e.path))
    assert not errors, f"{where}: the report does not follow docs/report-schema.json: " + \
        "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


def _looks_like_a_report(data) -> bool:
    """A conversion's report has its converter's version, a refusal's its status."""
    return isinstance(data, dict) and ("converter_version" in data or "status" in data)


@pytest.fixture(autouse=True)
def _reports_follow_the_schema(request, monkeypatch):
    """Every report written in this process (``outputs.write_json`` with the role "report") is
    checked before it is written; after the test, every report file left in its ``tmp_path``
    (written by a child process too) is checked."""
    from nhwc_onnx import outputs

    write_json = outputs.write_json

    def checked_write_json(path, data, role="report", **kwargs):
        if role == "report" and _looks_like_a_report(data):
            assert_report_follows_schema(json.loads(json.dumps(data, default=str)), str(path))
        return write_json(path, data, role, **kwargs)

    monkeypatch.setattr(outputs, "write_json", checked_write_json)
    yield
    tmp = request.node.funcargs.get("tmp_path") if hasattr(request.node, "funcargs") else None
    for path in Path(tmp).rglob("*.json") if tmp is not None else ():
        try:
            if not stat.S_ISREG(path.lstat().st_mode) or path.lstat().st_size > 1 << 24:
                continue  # a FIFO, a link or a device a test planted: never opened
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if _looks_like_a_report(data):
            assert_report_follows_schema(data, str(path))
