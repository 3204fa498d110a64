"""``ops``: the dialect's ops, or what a frontend's source ops convert to. The listing itself
is the library's (``nhwc_onnx.support.listing``); this command only prints it."""
from __future__ import annotations

import click

from .common import echo, framework_option


@click.command()
@click.argument("op_names", nargs=-1, help="Ops to describe in full (default: list every op).")
@framework_option(help="List this framework's source ops instead: what each converts to "
                       "(always / when / never, with the condition or the reason).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Human-readable listing or JSON (one object per op).")
def ops(op_names: tuple[str, ...], framework: str | None, fmt: str) -> None:
    """List the dialect's ops with their attributes (or details of OP_NAMES)."""
    from ..support.listing import ops_listing

    for line in ops_listing(op_names, framework, fmt):
        echo(line)
