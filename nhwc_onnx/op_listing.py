"""What ``nhwc-onnx ops`` prints: the dialect's ops, details of some, or the source ops a
frontend converts. The command line only prints these lines."""
from __future__ import annotations

from collections.abc import Sequence

from . import frameworks
from .errors import UsageError
from .spelling import unknown_names


def ops_listing(op_names: Sequence[str] = (), framework: str | None = None) -> list[str]:
    """The lines of the listing. Unknown op names raise UsageError naming each with the
    closest known one."""
    from .docs import op_summary_line, op_text_details
    from .schemas import DIALECT_OPS

    if framework:
        fw = frameworks.get(framework)
        entries = dict(fw.registry().describe())
        unknown = [n for n in op_names if n not in entries]
        if unknown:
            raise UsageError(unknown_names(unknown, entries, f"{fw.package} op(s) with a "
                                           "converter"), param_hint="OP_NAMES")
        lines = [] if op_names else [f"{len(entries)} {fw.package} op(s) supported:"]
        return lines + [f"  {name:<28} {entries[name]}".rstrip() for name in op_names or entries]
    if op_names:
        unknown = [n for n in op_names if n not in DIALECT_OPS]
        if unknown:
            raise UsageError(unknown_names(unknown, DIALECT_OPS.names(), "dialect op(s)"),
                             param_hint="OP_NAMES")
        lines = []
        for i, name in enumerate(op_names):
            if i:
                lines.append("")
            lines.append(op_text_details(DIALECT_OPS[name]))
        return lines
    schemas = DIALECT_OPS.all()
    return [f"{len(schemas)} ops in domain '{DIALECT_OPS.domain}' (details: nhwc-onnx ops NAME)",
            *(op_summary_line(schema) for schema in schemas)]
