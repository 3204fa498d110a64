"""The command line's log output (``-v`` / ``-vv`` / ``--debug``): imported only when a command
logs. Library modules log to the ``nhwc_onnx.*`` loggers and never configure them."""
from __future__ import annotations

import logging
import sys

from .common import printable  # names read from a model must not drive the terminal


class PrintableFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


def configure_logging(quiet: bool, verbose: int, debug: bool) -> None:
    """-q: errors only; default: warnings; -v: each stage with its time (INFO); -vv or
    --debug: per-pass detail (DEBUG). On stderr: stdout keeps the command's own output."""
    level = logging.DEBUG if debug or verbose >= 2 else logging.INFO if verbose == 1 else (
        logging.ERROR if quiet else logging.WARNING
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(PrintableFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    logging.getLogger("nhwc_onnx").setLevel(level)
