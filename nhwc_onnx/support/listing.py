"""What ``nhwc-onnx ops`` prints: the dialect's ops, details of some, or what a frontend's
source ops convert to (``support.claims``: always / when / never). The command line only prints
these lines."""
from __future__ import annotations

from collections.abc import Sequence

from .. import frameworks
from ..errors import UsageError
from .spelling import unknown_names


def ops_listing(op_names: Sequence[str] = (), framework: str | None = None,
                fmt: str = "text") -> list[str]:
    """The lines of the listing (``fmt`` "json": one JSON document). Unknown op names raise
    UsageError naming each with the closest known one."""
    from ..schemas import DIALECT_OPS
    from .docs import dialect_ops_json, op_summary_line, op_text_details

    if framework:
        from .claims import (
            as_json,
            as_text,
            is_source_op,
            knows_every_op,
            no_converter,
            source_op_support,
        )

        fw = frameworks.get(framework)
        entries = {e.op: e for e in source_op_support(fw.name)}
        # An op of the framework without a converter answers never; a name that is no op at
        # all is a usage error.
        entries.update({n: no_converter(fw.name, n) for n in op_names
                        if n not in entries and is_source_op(fw.name, n)})
        unknown = [n for n in op_names if n not in entries]
        if unknown:
            what = "op(s)" if knows_every_op(fw.name) else "op(s) with a converter"
            raise UsageError(unknown_names(unknown, sorted(entries), f"{fw.package} {what}"),
                             param_hint="OP_NAMES")
        chosen = [entries[n] for n in op_names] if op_names else list(entries.values())
        return [as_json(chosen) if fmt == "json" else as_text(fw.name, chosen, not op_names)]
    if op_names:
        unknown = [n for n in op_names if n not in DIALECT_OPS]
        if unknown:
            raise UsageError(unknown_names(unknown, DIALECT_OPS.names(), "dialect op(s)"),
                             param_hint="OP_NAMES")
    schemas = [DIALECT_OPS[n] for n in op_names] if op_names else DIALECT_OPS.all()
    if fmt == "json":
        return [dialect_ops_json(schemas)]
    if op_names:
        lines = []
        for i, schema in enumerate(schemas):
            if i:
                lines.append("")
            lines.append(op_text_details(schema))
        return lines
    return [f"{len(schemas)} ops in domain '{DIALECT_OPS.domain}' (details: nhwc-onnx ops NAME)",
            *(op_summary_line(schema) for schema in schemas)]
