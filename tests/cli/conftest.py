from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nhwc_onnx.cli import cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


@pytest.fixture
def examples() -> Path:
    return EXAMPLES


@pytest.fixture
def invoke():
    """Run the CLI in-process; returns click's Result (stdout and stderr kept apart)."""
    runner = CliRunner()

    def _invoke(*args: str):
        return runner.invoke(cli, [str(a) for a in args], catch_exceptions=True)

    return _invoke
