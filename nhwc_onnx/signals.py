"""SIGINT, SIGTERM and SIGHUP end the command line the same way: as an exception.

The exception unwinds through the writers' cleanup (every temp file is removed, an existing
output stays as it was) and the command exits with 128 + the signal number.
"""
from __future__ import annotations

import signal

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StoppedBySignal(BaseException):
    """Raised in the main thread when a handled signal arrives.

    A BaseException (like KeyboardInterrupt) so that ``except Exception`` blocks, such as the
    batch's per-model error handling, do not swallow it.
    """

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise(signum, frame) -> None:
    # Further signals are ignored so that they cannot interrupt the cleanup this one starts.
    for other in HANDLED:
        signal.signal(other, signal.SIG_IGN)
    raise StoppedBySignal(signum)


def install() -> None:
    """Turn the handled signals into StoppedBySignal (main thread only); a signal the parent
    ignores (``nohup`` ignores SIGHUP) stays ignored."""
    for signum in HANDLED:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _raise)
