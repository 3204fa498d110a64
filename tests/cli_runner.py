"""Run ``nhwc-onnx ARGS`` in this process, as a test sees it: the exit code, stdout, stderr and
both interleaved as printed. Only the command runs: none of the process set-up of
``cli.command_line`` (signal handlers, garbage-collection thresholds) touches the test run."""
from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str
    output: str  # stdout and stderr interleaved, as a terminal shows them
    exception: BaseException | None = None


class _Stream(io.StringIO):
    """One of the two streams; every write also goes to the shared interleaved copy."""

    def __init__(self, both: io.StringIO):
        super().__init__()
        self.both = both

    def write(self, text: str) -> int:
        self.both.write(text)
        return super().write(text)


def run_cli(*args, catch_exceptions: bool = True) -> CliResult:
    from nhwc_onnx.cli import run_command

    both = io.StringIO()
    out, err = _Stream(both), _Stream(both)
    exception = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = run_command([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code
        except Exception as exc:  # the test asked for it to be caught (catch_exceptions)
            if not catch_exceptions:
                raise
            exception, code = exc, 1
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message") prints it and exits 1
        err.write(f"{code}\n")
        code = 1
    return CliResult(code, out.getvalue(), err.getvalue(), both.getvalue(), exception)
