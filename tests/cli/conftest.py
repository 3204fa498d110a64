from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


@pytest.fixture
def examples() -> Path:
    return EXAMPLES


@pytest.fixture
def invoke():
    """Run the CLI in-process; returns a CliResult (stdout and stderr kept apart)."""
    return run_cli
