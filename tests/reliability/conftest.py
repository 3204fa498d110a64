"""Shared fixture of the reliability suite (the in-process CLI runner); puts this folder on
sys.path for the helper modules (rel_*, bad_inputs, fuzz_*, crash_repro)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nhwc_onnx.cli import cli


@pytest.fixture
def run_cli():
    """Run ``nhwc-onnx ARGS`` in-process; click's Result keeps stdout and stderr apart."""
    runner = CliRunner()

    def _run(*args):
        return runner.invoke(cli, [str(a) for a in args], catch_exceptions=True)

    return _run
