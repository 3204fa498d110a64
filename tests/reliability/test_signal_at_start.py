"""A Ctrl-C while the command line is still being
imported (before its own handlers exist) printed a KeyboardInterrupt traceback. Real processes
and real signals; the signal is sent from inside the import of click, so it always lands in
that window."""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from rel_limits import child_env, default_signals

REPO = Path(__file__).resolve().parents[2]

# Send ``signum`` to this process while ``click`` is being imported, then start the command
# line through ``entry`` ("console": the script's entry point; "cli": the package's main).
_CHILD = """
import builtins, os, sys
signum, entry = int(sys.argv[1]), sys.argv[2]
real_import = builtins.__import__

def importing(name, *args, **kwargs):
    if name == "click":
        os.kill(os.getpid(), signum)
    return real_import(name, *args, **kwargs)

builtins.__import__ = importing
sys.argv = ["nhwc-onnx", "--help"]
if entry == "console":
    from nhwc_onnx.console import main
else:
    from nhwc_onnx.cli import main
main()
"""


def _run(signum: int, entry: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _CHILD, str(signum), entry],
                          capture_output=True, text=True, env=child_env(), timeout=120, check=False,
                          preexec_fn=default_signals)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_the_command_line_is_imported_is_one_line_and_128_plus_n(signum):
    result = _run(signum, "console")
    assert result.returncode == 128 + signum, result.stderr
    assert result.stderr == f"Error: stopped by {signal.Signals(signum).name}\n"
    assert result.stdout == ""  # stopped before the help was printed


def test_the_package_main_alone_shows_the_traceback_the_entry_point_prevents():
    """The same signal without the entry point's early handler: what users saw."""
    result = _run(signal.SIGINT, "cli")
    assert "KeyboardInterrupt" in result.stderr and "Traceback" in result.stderr


def test_the_script_runs_the_entry_point():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"nhwc-onnx": "nhwc_onnx.console:main"}
