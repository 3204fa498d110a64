"""The verification as one self-contained HTML page (``--html FILE``): what a user attaches
to a bug report or keeps as a CI artifact.

The page holds the verdict, the conversion summary (source ops, dialect ops, decisions,
layout), a plot of each shared tensor's error along the graph (inline SVG, log scale, the
tolerance of each tensor as a dashed line, the first tensor out of tolerance ringed and named)
and the per-tensor table. It loads nothing: no script, stylesheet, font or image from anywhere;
every name taken from a model is escaped.
"""
from __future__ import annotations

import math
import os
from html import escape
from pathlib import Path

from .. import __version__

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1100px;
       color: #1d2126; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; }
.verdict { display: inline-block; padding: 2px 10px; border-radius: 4px; color: #fff;
           font-weight: 600; }
.match { background: #1f7a3d; } .mismatch { background: #b3261e; }
.meta { color: #555; } .warn { background: #fff4d6; border-left: 4px solid #d29b00;
        padding: 6px 10px; margin: 6px 0; }
table { border-collapse: collapse; font-size: 13px; margin-top: 8px; max-width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left;
         overflow-wrap: anywhere; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.bad td { color: #b3261e; } tr.first td { background: #fde7e4; font-weight: 600; }
code { font-size: 13px; } svg { max-width: 100%; height: auto; }
"""


def write_html(path: str | os.PathLike, report, conversion=None) -> Path:
    """Write the page atomically under the project's output rules (see ``outputs``)."""
    from ..files.writes import atomic_write_text

    return atomic_write_text(path, render_html(report, conversion), role="HTML page")


def render_html(report, conversion=None) -> str:
    """The page of a VerificationReport (and the ConversionReport of ``convert --verify``)."""
    verdict = "MATCH" if report.ok else "MISMATCH"
    first = report.first_failing_layer
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>nhwc-onnx verification: {verdict} - {escape(report.source)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        (f"<h1>Verification of <code>{escape(report.source)}</code> "
         f'<span class="verdict {verdict.lower()}">{verdict}</span></h1>'),
        (f'<p class="meta">{escape(report.framework)} source; tolerance atol '
         f"{report.atol:g} + rtol {report.rtol:g} &times; max|reference|; seed {report.seed}; "
         f"{report.samples} sample{'s' if report.samples != 1 else ''}.</p>"),
    ]
    if first is not None:
        parts.append(f'<p>First tensor out of tolerance: <a href="#first-failing"><code>'
                     f"{escape(first.tensor.source)}</code></a> (node <code>"
                     f"{escape(first.tensor.node)}</code>, {escape(first.tensor.op)}).</p>")
    parts += [f'<div class="warn">{escape(w)}</div>' for w in report.warnings]
    parts += _outputs(report)
    parts += _summary(report, conversion)
    parts += _layers(report)
    parts.append(f'<p class="meta">Written by nhwc-onnx {escape(__version__)}.</p>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _outputs(report) -> list[str]:
    rows = ["<h2>Outputs</h2>", ("<table><tr><th></th><th>output</th><th>shape</th>"
                                 "<th>max abs</th><th>max rel</th><th>cosine</th>"
                                 "<th>tolerance</th><th>worst sample</th></tr>")]
    for c in report.outputs:
        rows.append(f'<tr class="{"ok" if c.within else "bad"}">'
                    f"<td>{'ok' if c.within else 'BAD'}</td><td><code>{escape(c.name)}"
                    f"</code></td><td>{_shape(c.source_shape)}</td>{_num(c.max_abs_error)}"
                    f"{_num(c.max_rel_error)}{_num(c.cosine, '.6f')}{_num(c.tolerance)}"
                    f'<td class="num">{int(c.sample)}</td></tr>')
    rows.append("</table>")
    return rows


def _summary(report, conversion) -> list[str]:
    if conversion is not None:
        kinds: dict[str, int] = {}
        for d in conversion.decisions:
            kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
        summary = {"source_ops": conversion.source_ops, "dialect_ops": conversion.target_ops,
                   "decisions": dict(sorted(kinds.items())),
                   "layout": conversion.io_permutations,
                   "rounding": [f"{d['node']}: {d['detail']}" for d in conversion.decisions
                                if d["kind"] == "rounding"]}
    else:
        summary = dict(report.summary)
    rows = ["<h2>Conversion</h2>", "<table>"]
    for key, label in (("source_ops", "source ops"), ("dialect_ops", "dialect ops"),
                       ("decisions", "decisions")):
        counts = summary.get(key)
        text = (", ".join(f"{escape(str(k))} &times;{escape(str(v))}"
                          for k, v in counts.items())
                if counts else "not recorded in the converted file (convert --verify "
                               "--html shows them)" if key == "decisions" else "-")
        rows.append(f"<tr><th>{label}</th><td>{text}</td></tr>")
    layout = summary.get("layout") or {}
    text = "<br>".join(f"<code>{escape(str(name))}</code> permuted {escape(str(list(perm)))} "
                       "(feed/read it as NHWC)" for name, perm in sorted(layout.items())
                       ) or "no permutation"
    rows.append(f"<tr><th>layout</th><td>{text}</td></tr>")
    for line in summary.get("rounding", []):
        rows.append(f"<tr><th>rounding</th><td>{escape(line)}</td></tr>")
    rows.append("</table>")
    return rows


def _layers(report) -> list[str]:
    layers = report.layers
    if layers is None:
        return ["<h2>Tensors</h2>", "<p>No per-tensor comparison was made.</p>"]
    first = report.first_failing_layer
    parts = ["<h2>Error along the graph</h2>"]
    if not layers:
        parts.append("<p>No tensor of the converted model is also computed by the source "
                     "(no shared names), so there is nothing to plot.</p>")
        return parts
    parts.append(plot_svg(layers, first))
    parts.append('<p class="meta">Max abs error of every tensor both models compute, in the '
                 "converted model's execution order (log scale; an error of 0 sits on the "
                 "bottom line). Dashed: each tensor's tolerance, atol + rtol &times; "
                 "max|reference|; red: out of tolerance.</p>")
    parts += ["<h2>Tensors</h2>", ("<table><tr><th></th><th>#</th><th>tensor (source)</th>"
                                   "<th>converted</th><th>node (op)</th><th>source op</th>"
                                   "<th>shape</th><th>max abs</th><th>max rel</th>"
                                   "<th>cosine</th><th>tolerance</th></tr>")]
    for i, layer in enumerate(layers, 1):
        t, c = layer.tensor, layer.comparison
        cls = "first bad" if layer is first else ("ok" if layer.ok else "bad")
        anchor = ' id="first-failing"' if layer is first else ""
        parts.append(
            f'<tr class="{cls}"{anchor}><td>{"ok" if layer.ok else "BAD"}</td>'
            f'<td class="num">{i}</td><td><code>{escape(t.source)}</code></td>'
            f"<td><code>{escape(t.converted)}</code></td><td>{escape(t.node)} "
            f"({escape(t.op)})</td><td>{escape(t.source_op or '')}</td>"
            f"<td>{_shape(c.source_shape)}</td>{_num(c.max_abs_error)}"
            f"{_num(c.max_rel_error)}{_num(c.cosine, '.6f')}{_num(c.tolerance)}</tr>")
    parts.append("</table>")
    if report.skipped_layers:
        parts.append("<p>Not compared (the same name, another shape): " + ", ".join(
            f"<code>{escape(n)}</code> ({escape(why)})"
            for n, why in sorted(report.skipped_layers.items())) + "</p>")
    return parts


def plot_svg(layers, first=None, width: int = 960, height: int = 340) -> str:
    """Inline SVG: max abs error per tensor (log10 axis), each tensor's tolerance dashed."""
    left, right, top, bottom = 72, 16, 28, 44
    w, h = width - left - right, height - top - bottom
    errors = [layer.comparison.max_abs_error for layer in layers]
    tolerances = [layer.comparison.tolerance for layer in layers]
    positive = [v for v in errors + tolerances if v > 0 and math.isfinite(v)]
    lo = math.floor(math.log10(min(positive))) - 1 if positive else -9
    hi = math.ceil(math.log10(max(positive))) if positive else 0
    hi = max(hi, lo + 1)
    n = len(layers)

    def x(i: int) -> float:
        return left + (w / 2 if n == 1 else w * i / (n - 1))

    def y(v: float) -> float:
        if not math.isfinite(v):
            return top
        exponent = math.log10(v) if v > 0 else lo
        return top + h * (hi - max(exponent, lo)) / (hi - lo)

    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="error per tensor">'),
           (f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="#fafafa" '
            'stroke="#bbb"/>')]
    step = max(1, math.ceil((hi - lo) / 10))
    for e in range(lo, hi + 1, step):
        yy = y(10.0 ** e)
        label = "0" if e == lo else f"1e{e}"
        out.append(f'<line x1="{left}" x2="{left + w}" y1="{yy:.1f}" y2="{yy:.1f}" '
                   'stroke="#e3e3e3"/>')
        out.append(f'<text x="{left - 6}" y="{yy + 4:.1f}" font-size="11" '
                   f'text-anchor="end" fill="#555">{label}</text>')
    ticks = sorted({0, n - 1, *range(0, n, max(1, math.ceil(n / 10)))})
    for i in ticks:
        out.append(f'<text x="{x(i):.1f}" y="{top + h + 16}" font-size="11" '
                   f'text-anchor="middle" fill="#555">{i + 1}</text>')
    out.append(f'<text x="{left + w / 2}" y="{height - 6}" font-size="12" '
               'text-anchor="middle" fill="#333">tensor, in execution order</text>')
    out.append(f'<text x="14" y="{top + h / 2}" font-size="12" text-anchor="middle" '
               f'fill="#333" transform="rotate(-90 14 {top + h / 2})">max abs error</text>')
    tol = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(tolerances))
    out.append(f'<polyline points="{tol}" fill="none" stroke="#d29b00" stroke-width="1.5" '
               'stroke-dasharray="5,4"><title>tolerance</title></polyline>')
    err = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(errors))
    out.append(f'<polyline points="{err}" fill="none" stroke="#7a8794" stroke-width="1"/>')
    for i, layer in enumerate(layers):
        c = layer.comparison
        colour = "#2b6cb0" if layer.ok else "#b3261e"
        tip = (f"{i + 1}. {layer.tensor.source} ({layer.tensor.op}): max abs "
               f"{c.max_abs_error:.3g}, tolerance {c.tolerance:.3g}")
        out.append(f'<circle cx="{x(i):.1f}" cy="{y(c.max_abs_error):.1f}" r="3" '
                   f'fill="{colour}"><title>{escape(tip)}</title></circle>')
    if first is not None:
        i = layers.index(first)
        cx, cy = x(i), y(first.comparison.max_abs_error)
        anchor = "end" if cx > left + w * 0.6 else "start"
        dx = -10 if anchor == "end" else 10
        out.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{top}" y2="{top + h}" '
                   'stroke="#b3261e" stroke-dasharray="2,3"/>')
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="8" fill="none" '
                   'stroke="#b3261e" stroke-width="2"/>')
        out.append(f'<text x="{cx + dx:.1f}" y="{top + 14}" font-size="12" '
                   f'text-anchor="{anchor}" fill="#b3261e">first out of tolerance: '
                   f"{escape(first.tensor.source)}</text>")
    out.append("</svg>")
    return "\n".join(out)


def _shape(shape) -> str:
    return "&times;".join(escape(str(d)) for d in shape) or "scalar"


def _num(value: float, fmt: str = ".3g") -> str:
    return f'<td class="num">{value:{fmt}}</td>'
