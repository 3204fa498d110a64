"""``ops``: the dialect's ops, or the source ops a frontend converts. The listing itself is
the library's (``nhwc_onnx.op_listing``); this command only prints it."""
from __future__ import annotations

import click

from .common import echo, framework_option


@click.command()
@click.argument("op_names", nargs=-1, help="Ops to describe in full (default: list every op).")
@framework_option(help="List the source ops this framework's frontend converts instead.")
def ops(op_names: tuple[str, ...], framework: str | None) -> None:
    """List the dialect's ops with their attributes (or details of OP_NAMES)."""
    from ..op_listing import ops_listing

    for line in ops_listing(op_names, framework):
        echo(line)
