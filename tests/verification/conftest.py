"""The in-process CLI runner for the verification tests."""
from __future__ import annotations

import pytest

from tests.cli_runner import run_cli as _run_cli


@pytest.fixture
def run_cli():
    """Run ``nhwc-onnx ARGS`` in-process; the result keeps stdout and stderr apart."""
    return _run_cli
