"""The ``nhwc-onnx`` script's entry point.

Importing the command line (click, numpy, our modules) takes tens of milliseconds, before
``nhwc_onnx.cli`` installs the handlers that end a command cleanly. A Ctrl-C in that window
printed a KeyboardInterrupt traceback; this module, imported first and importing nothing
heavy, makes it one line and exit 128 + N (``signals.install_while_starting``).
"""
from __future__ import annotations

from .files import signals


def main() -> None:
    signals.install_while_starting()
    from .cli import main as command_line

    command_line()
