"""Progress output for a person at a terminal: a live bar for batch conversion, stage lines
for a single conversion. Everything goes to stderr and only when stderr is a TTY, so piped
output and CI logs stay exactly as they were.
"""
from __future__ import annotations

import sys
import time
from typing import TextIO

from .common import printable


class StageReporter:
    """``report(stage)`` prints ``[  0.52 s] passes ...`` when a stage starts; a no-op when
    disabled. Passed to ``api.convert(progress=...)``."""

    def __init__(self, label: str, enabled: bool, stream: TextIO | None = None):
        self.label = label
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.start = time.perf_counter()

    def __call__(self, stage: str) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        text = "done" if stage == "done" else f"{STAGE_TEXT.get(stage, stage)} ..."
        self.stream.write(printable(f"[{elapsed:7.2f} s] {self.label}: {text}") + "\n")
        self.stream.flush()


STAGE_TEXT = {"load": "loading the source model", "passes": "running the dialect passes",
              "write": "writing the dialect model", "cut": "computing the exact cut",
              "verify": "verifying against the source runtime"}


class BatchBar:
    """A live bar on one line, with one status line per finished model printed above it."""

    def __init__(self, total: int, enabled: bool, stream: TextIO | None = None):
        self.total = total
        self.done = 0
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.counts: dict[str, int] = {}
        self.start = time.perf_counter()
        self._draw()

    def finished(self, source: str, status: str, seconds: float, message: str = "") -> None:
        self.done += 1
        self.counts[status] = self.counts.get(status, 0) + 1
        if not self.enabled:
            return
        detail = f"  {message}" if message else ""
        self._clear()
        self.stream.write(printable(f"{status:<8} {source} ({seconds:.2f} s){detail}") + "\n")
        self._draw()

    def close(self) -> None:
        if self.enabled:
            self._clear()
            self.stream.flush()

    def _clear(self) -> None:
        self.stream.write("\r\x1b[K")

    def _draw(self) -> None:
        if not self.enabled:
            return
        width = 24
        filled = width * self.done // self.total if self.total else width
        counts = ", ".join(f"{n} {s}" for s, n in sorted(self.counts.items()))
        elapsed = time.perf_counter() - self.start
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                f"{elapsed:.0f} s" + (f"  {counts}" if counts else ""))
        import shutil  # here: shutil pulls in bz2 and lzma, a start-up cost for every conversion

        columns = shutil.get_terminal_size((80, 24)).columns
        self.stream.write("\r" + line[:max(columns - 1, 10)])
        self.stream.flush()
