"""Generate ``docs/ops.md`` from the dialect schemas and what each source op converts to
(``support.claims``: the frontends' declarations and ``passes/to_dialect/op_table``).

Run ``python -m nhwc_onnx.support.docs`` after changing a schema or adding a converter; a test fails
while the committed file differs from what this module generates.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .. import frameworks
from ..schemas.base import Attr, OpSchema, Port

DOCS_PATH = Path(__file__).resolve().parents[2] / "docs" / "ops.md"

_LAYOUT_NOTES = {
    "implicit": "the layout is in the weights / spatial semantics",
    "transparent": "elementwise, works unchanged in any layout",
    "attribute": "an axis attribute refers to NHWC axes",
    "terminate": "changes what the axes mean",
}


# -- plain text (for ``nhwc-onnx ops``) --------------------------------------------------------


def format_value(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    return repr(value)


def port_label(port: Port) -> str:
    suffix = "..." if port.variadic else "?" if port.optional else ""
    return f"{port.name}{suffix}"


def attr_label(name: str, attr: Attr) -> str:
    text = f"{name}: {attr.kind.value}"
    if attr.required:
        text += " (required)"
    elif attr.default is not None:
        text += f" = {format_value(attr.default)}"
    if attr.allowed is not None:
        text += " in {" + ", ".join(format_value(a) for a in attr.allowed) + "}"
    return text


def op_summary_line(schema: OpSchema) -> str:
    ins = ", ".join(port_label(p) for p in schema.inputs)
    outs = ", ".join(port_label(p) for p in schema.outputs)
    attrs = "; ".join(attr_label(n, a) for n, a in schema.attrs.items())
    line = f"  {schema.name:<19} ({ins}) -> ({outs})"
    return f"{line}  [{attrs}]" if attrs else line


def _layout_class(schema: OpSchema) -> str:
    """The layout class a dialect op declares (only core schemas leave it None)."""
    assert schema.layout is not None, f"dialect op {schema.name} declares no layout class"
    return schema.layout.value


def op_text_details(schema: OpSchema) -> str:
    lines = [f"{schema.name}  (domain {schema.domain}, layout class {_layout_class(schema)})",
             f"  {schema.doc}"]
    lines.append("  inputs:")
    for p in schema.inputs:
        lines.append(f"    {port_label(p):<12} {_port_notes(p)}")
    lines.append("  outputs:")
    for p in schema.outputs:
        lines.append(f"    {port_label(p):<12} {_port_notes(p)}")
    if schema.attrs:
        lines.append("  attributes:")
        for name, attr in schema.attrs.items():
            doc = f"  {attr.doc}" if attr.doc else ""
            lines.append(f"    {attr_label(name, attr)}{doc}")
    return "\n".join(lines)


def dialect_ops_json(schemas: list[OpSchema]) -> str:
    """The dialect ops as JSON: ports, attributes and layout class of each."""
    return json.dumps([{
        "op": s.name, "domain": s.domain, "layout": _layout_class(s),
        "inputs": [port_label(p) for p in s.inputs], "outputs": [port_label(p) for p in s.outputs],
        "attributes": {n: attr_label(n, a) for n, a in s.attrs.items()}, "doc": s.doc,
    } for s in schemas], indent=2)


def _port_notes(port: Port) -> str:
    notes = ["/".join(port.dtypes)]
    if port.constant:
        notes.append("constant")
    if port.doc:
        notes.append(port.doc)
    return ", ".join(notes)


# -- markdown -----------------------------------------------------------------------------------


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def _op_markdown(schema: OpSchema) -> list[str]:
    layout = _layout_class(schema)
    out = [f"## {schema.name}", "", schema.doc, "",
           f"Layout class: **{layout}** ({_LAYOUT_NOTES.get(layout, '')}).", ""]
    for title, ports in (("Inputs", schema.inputs), ("Outputs", schema.outputs)):
        if not ports:
            out += [f"{title}: none.", ""]
            continue
        out += [f"{title}:", "", "| name | element type | kind | description |",
                "|---|---|---|---|"]
        for p in ports:
            kind = ", ".join(k for k, on in (("optional", p.optional), ("variadic", p.variadic),
                                             ("constant", p.constant)) if on) or "required"
            out.append(f"| `{p.name}` | {'/'.join(p.dtypes)} | {kind} | {_cell(p.doc)} |")
        out.append("")
    if schema.attrs:
        out += ["Attributes:", "", "| name | kind | required | default | allowed | description |",
                "|---|---|---|---|---|---|"]
        for name, a in schema.attrs.items():
            default = "" if a.default is None else f"`{format_value(a.default)}`"
            allowed = "" if a.allowed is None else ", ".join(f"`{format_value(v)}`"
                                                             for v in a.allowed)
            required = "yes" if a.required else "no"
            out.append(f"| `{name}` | {a.kind.value} | {required} | {default} | {allowed} | "
                       f"{_cell(a.doc)} |")
        out.append("")
    else:
        out += ["Attributes: none.", ""]
    return out


def generate_markdown() -> str:
    from ..schemas import DIALECT_OPS
    from ..serialize import DIALECT_OPSET_VERSION, IR_VERSION

    schemas = DIALECT_OPS.all()
    out = [
        "# Operators of the NHWC dialect",
        "",
        ("<!-- Generated by `python -m nhwc_onnx.support.docs` from nhwc_onnx/schemas and the "
         "frontend registries. Do not edit by hand. -->"),
        "",
        (f"{len(schemas)} ops in the operator-set domain `{DIALECT_OPS.domain}` (version "
         f"{DIALECT_OPSET_VERSION}), written in ONNX files of IR version {IR_VERSION}. Every "
         "activation of rank 4 is NHWC; `pads` on Conv, DepthwiseConv2d, ConvTranspose and the "
         "pools is the string `\"SAME\"` or `\"VALID\"` with TensorFlow's semantics."),
        "",
        ("In the tables below, *constant* marks inputs that must be initializers (weights, "
         "shapes), *variadic* inputs take one or more tensors, and `?` marks optional inputs."),
        "",
        "| op | inputs | outputs | attributes | layout class |",
        "|---|---|---|---|---|",
    ]
    for s in schemas:
        ins = ", ".join(port_label(p) for p in s.inputs) or "-"
        outs = ", ".join(port_label(p) for p in s.outputs)
        attrs = ", ".join(s.attrs) or "-"
        anchor = s.name.lower()
        out.append(f"| [{s.name}](#{anchor}) | {ins} | {outs} | {attrs} | {_layout_class(s)} |")
    out.append("")
    for s in schemas:
        out += _op_markdown(s)
    out += _frontends_markdown()
    return "\n".join(out).rstrip("\n") + "\n"


def _frontends_markdown() -> list[str]:
    # Imported here: listing the dialect's ops (nhwc-onnx ops) needs neither the passes nor
    # the frontends.
    from ..passes.to_dialect.op_table import NEVER, WHEN
    from .claims import GROUPS, NOTES, grouped, source_op_support

    sections = ["# Source ops per framework", "",
                ("What each source op converts to, derived from its converter's declaration "
                 "and the core-op table (nhwc_onnx/passes/to_dialect/op_table.py): **always**, "
                 "**when** (the condition holds) or **never** (the reason)."), ""]
    sections += [f"- {note}" for note in NOTES]
    sections.append("")
    for fw in frameworks.FRAMEWORKS:
        label, groups = fw.label, grouped(source_op_support(fw.name))
        counts = ", ".join(f"{len(groups[g])} {g}" for g in GROUPS)
        sections += [f"## {label} ops", "",
                     f"{sum(len(v) for v in groups.values())} source ops: {counts}.", ""]
        for group in GROUPS:
            if not groups[group]:
                continue
            third = {WHEN: " condition |", NEVER: " reason |"}.get(group, "")
            sections += [f"### {label}: {group}", "",
                         f"| source op | dialect ops |{third}",
                         "|---|---|" + ("---|" if third else "")]
            for e in groups[group]:
                dialect = ", ".join(e.dialect_ops) or ("-" if group == NEVER
                                                       else "(removed or folded)")
                row = f"| `{e.op}` | {_cell(dialect)} |"
                sections.append(row + (f" {_cell(e.condition)} |" if third else ""))
            sections.append("")
    return sections


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate docs/ops.md from the schemas.")
    parser.add_argument("--output", type=Path, default=DOCS_PATH)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the file differs instead of writing it")
    args = parser.parse_args(argv)
    text = generate_markdown()
    current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
    if args.check:
        if current != text:
            print(f"{args.output} is stale: run python -m nhwc_onnx.support.docs")
            return 1
        return 0
    if current != text:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
