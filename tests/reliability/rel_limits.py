"""Run the converter in a child process under a memory bound and a time limit.

The child gets RLIMIT_AS (address space) of MEMORY_LIMIT before it starts Python, so an input
that makes the converter allocate without bound fails inside the child (MemoryError, or a
crash that the test sees) instead of swapping the CI machine to death.
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

MEMORY_LIMIT = 3 << 30  # bytes of address space; the converter needs a few hundred MB
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def limit_memory() -> None:
    """preexec_fn of the children: cap the address space (and signals as a terminal has them)."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    default_signals()


def default_signals() -> None:
    """preexec_fn: SIGINT, SIGHUP and SIGTERM with their default action, as a user's terminal
    starts a command; a suite started in the background (``nohup``, ``&``) would otherwise
    pass them on ignored and the child would never see the signal a test sends."""
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def child_env(**extra: str | None) -> dict[str, str]:
    """This process's environment plus ``extra`` (a None value removes the variable)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run_limited(args: list[str], timeout: float, cwd: Path | None = None,
                **env: str | None) -> subprocess.CompletedProcess:
    """``python ARGS`` in a child with the memory bound; raises TimeoutExpired on a hang."""
    return subprocess.run([sys.executable, *args], check=False, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=limit_memory, env=child_env(**env),
                          cwd=cwd)


def run_cli_limited(args: list[str], timeout: float = 120, **env: str | None
                    ) -> subprocess.CompletedProcess:
    """The real ``nhwc-onnx`` command line (python -m nhwc_onnx.cli) under the bound."""
    return run_limited(["-m", "nhwc_onnx.cli", *[str(a) for a in args]], timeout, **env)


# Runs the command given after it in a grandchild and prints that one child's peak resident
# set (ru_maxrss of its own children) on the last line of stderr: the test process's own
# RUSAGE_CHILDREN mixes every child it ever waited for.
_MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], check=False)
print(f"peak-rss-kib {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}", file=sys.stderr)
sys.exit(done.returncode)
"""


def run_measured(args: list, timeout: float, address_space: int = MEMORY_LIMIT,
                 cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, int]:
    """``python ARGS`` under RLIMIT_AS ``address_space``: (the completed process with the
    measurement line removed from its stderr, its peak resident set in bytes)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    proc = subprocess.run([sys.executable, "-c", _MEASURE, sys.executable, *map(str, args)],
                          check=False, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limit, env=child_env(), cwd=cwd)
    lines = proc.stderr.splitlines()
    assert lines and lines[-1].startswith("peak-rss-kib "), proc.stderr
    proc.stderr = "\n".join(lines[:-1]) + ("\n" if len(lines) > 1 else "")
    return proc, int(lines[-1].split()[1]) * 1024
