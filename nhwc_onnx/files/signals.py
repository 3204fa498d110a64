"""SIGINT, SIGTERM and SIGHUP end the command line the same way: as an exception.

The exception unwinds through the writers' cleanup (every temp file is removed, an existing
output stays as it was) and the command exits with 128 + the signal number.

A batch's worker processes (``install_in_worker``) do the same while they convert a model
(``job``), and then exit at once instead of taking the next model; between models they exit
at once (there is nothing to clean up). A worker never prints a traceback for a signal.

An exception raised by a signal handler is lost when the handler happens to run inside a
finalizer or ``__del__`` (Python would print "Exception ignored in ..." and go on; that print is
left out), so the signal is also remembered: ``raise_if_stopped`` raises it again at the points
that must not be passed after a signal (the rename that publishes a file, the next model of a
batch, the end of the command).
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_installed_by = 0  # the process that installed the handlers (a forked child inherits them)
_job_running = False  # in a batch worker: whether a model is being converted
_stopped_by: int | None = None  # the first handled signal that arrived


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


def _ignore(signum, frame) -> None:
    """A handler that does nothing. Not SIG_IGN: a signal that arrived before the handlers were
    switched still runs the Python handler then, and with SIG_IGN Python raises
    ``OSError: Signal N ignored due to race condition`` in the middle of the cleanup."""


def _raise(signum, frame) -> None:
    global _stopped_by
    if os.getpid() != _installed_by:
        # A process forked before it installed its own handlers (a batch worker starting up):
        # it has written nothing, so it leaves without a traceback.
        os._exit(128 + signum)
    if _stopped_by is None:
        _stopped_by = signum
    # Further signals do nothing, so that they cannot interrupt the cleanup this one starts.
    ignore()
    raise StoppedBySignal(signum)


def raise_if_stopped() -> None:
    """Raise StoppedBySignal if a handled signal has arrived (again: its first raise may have
    been swallowed by a finalizer)."""
    if _stopped_by is not None:
        raise StoppedBySignal(_stopped_by)


def _in_worker(signum, frame) -> None:
    if not _job_running:
        os._exit(128 + signum)  # between models: nothing to clean up, take no further model
    _raise(signum, frame)


def _quiet_when_swallowed(unraisable) -> None:
    """sys.unraisablehook: a StoppedBySignal lost in a finalizer is not printed (it is
    remembered, ``raise_if_stopped``); anything else is shown as Python shows it."""
    if not isinstance(unraisable.exc_value, StoppedBySignal):
        sys.__unraisablehook__(unraisable)


def _set(handler) -> None:
    global _installed_by
    _installed_by = os.getpid()
    sys.unraisablehook = _quiet_when_swallowed
    for signum in HANDLED:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, handler)


def _stopped_while_starting(signum, frame) -> None:
    with contextlib.suppress(OSError):  # stderr closed
        os.write(2, f"Error: stopped by {signal.Signals(signum).name}\n".encode())
    os._exit(128 + signum)


def install_while_starting() -> None:
    """Until ``install``: a handled signal ends the process at once with one line and
    128 + N (the command line is still being imported; nothing has been read or written)."""
    for signum in HANDLED:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _stopped_while_starting)


def install() -> None:
    """Turn the handled signals into StoppedBySignal (main thread only); a signal the parent
    ignores (``nohup`` ignores SIGHUP) stays ignored."""
    _set(_raise)


def ignore() -> None:
    """From now on the handled signals do nothing (the work is over: only exiting is left)."""
    for signum in HANDLED:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _ignore)


def install_in_worker() -> None:
    """The handlers of a batch worker process (its pool's initializer); the signals the parent
    blocked while forking it (``blocked``) are let through, a pending one at once."""
    _set(_in_worker)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED)


@contextlib.contextmanager
def blocked():
    """Block the handled signals in this thread meanwhile: the threads and processes it starts
    inherit the mask (a signal arriving meanwhile waits, and arrives when it ends)."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextlib.contextmanager
def job():
    """One model in a batch worker: a signal unwinds it (removing its temp files), then the
    worker exits with 128 + the signal number, so that no queued model starts after it."""
    global _job_running
    _job_running = True
    try:
        yield
        raise_if_stopped()  # a signal whose exception a finalizer swallowed
    except StoppedBySignal as exc:
        os._exit(exc.exit_code)
    finally:
        _job_running = False
