"""Shared fixture of the reliability suite (the in-process CLI runner); puts this folder on
sys.path for the helper modules (rel_*, bad_inputs, fuzz_*, crash_repro)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tests.cli_runner import run_cli as _run_cli


@pytest.fixture
def run_cli():
    """Run ``nhwc-onnx ARGS`` in-process; the result keeps stdout and stderr apart."""
    return _run_cli
