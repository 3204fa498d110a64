"""--html FILE: one self-contained page (verdict, conversion summary, a plot of
the per-tensor error, the table) written under the output rules."""
from __future__ import annotations

from html.parser import HTMLParser

import numpy as np
import onnx

from tests.verification.verify_models import ONNX_SHARED, onnx_net, scale_conv_weight


class Page(HTMLParser):
    """The tags, attributes and text of a page (the standard library's parser)."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []
        self.svg_texts: list[str] = []
        self._in_svg_text = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs
        self._in_svg_text = tag == "text"

    def handle_endtag(self, tag):
        self._in_svg_text = False if tag == "text" else self._in_svg_text

    def handle_data(self, data):
        self.text.append(data)
        if self._in_svg_text:
            self.svg_texts.append(data)

    @property
    def body(self) -> str:
        return " ".join(self.text)


def _no_outside_resources(page: Page) -> None:
    assert not {"script", "link", "img", "iframe", "object", "embed"} & set(page.tags)
    for name, value in page.attrs:
        if name == "xmlns":
            continue  # the SVG namespace is a name, not a resource
        assert "://" not in (value or ""), (name, value)
        assert name not in ("src", "srcset") and not name.startswith("on"), name


def test_page_of_a_mismatch_plots_and_names_the_failing_tensor(run_cli, tmp_path):
    src = onnx_net(tmp_path / "net.onnx")
    out = tmp_path / "net.nhwc.onnx"
    assert run_cli("convert", src, "-o", out).exit_code == 0
    bad = scale_conv_weight(out, "conv_b", tmp_path / "bad.onnx")
    html = tmp_path / "page.html"
    result = run_cli("verify", src, bad, "--html", html)
    assert result.exit_code == 3, result.output
    page = Page(html.read_text(encoding="utf-8"))
    _no_outside_resources(page)
    assert page.tags.count("svg") == 1
    assert page.tags.count("circle") == len(ONNX_SHARED) + 1  # a dot per tensor, a ring
    assert any(t.strip() == "first out of tolerance: c2" for t in page.svg_texts)
    assert "MISMATCH" in page.body
    assert ('id', 'first-failing') in page.attrs
    rows = page.tags.count("tr")
    assert rows >= len(ONNX_SHARED) + 1 + 2  # the tensor table + its header, the outputs
    assert "source ops" in page.body and "dialect ops" in page.body and "layout" in page.body
    assert "Conv ×2" in page.body  # the source's op counts, read by verify from the source


def test_page_of_convert_verify_has_the_decisions_and_no_failing_tensor(run_cli, tmp_path):
    src = onnx_net(tmp_path / "net.onnx")
    html = tmp_path / "page.html"
    result = run_cli("convert", src, "-o", tmp_path / "out.onnx", "--verify", "--html", html)
    assert result.exit_code == 0, result.output
    page = Page(html.read_text(encoding="utf-8"))
    _no_outside_resources(page)
    assert "MATCH" in page.body and "MISMATCH" not in page.body
    assert "decisions" in page.body
    assert "padding ×" in page.body  # the conversion report's decisions, by kind
    assert not any("first out of tolerance" in t for t in page.svg_texts)
    assert "'x' permuted" not in page.body and "permuted [0, 2, 3, 1]" in page.body


def test_html_escapes_model_names(run_cli, tmp_path):
    """Tensor names come from the model: a name holding markup is shown, never run."""
    src = onnx_net(tmp_path / "net.onnx")
    model = onnx.load(src)
    evil = "<script>alert(1)</script>"
    for node in model.graph.node:
        node.output[:] = [evil if o == "r1" else o for o in node.output]
        node.input[:] = [evil if i == "r1" else i for i in node.input]
    onnx.save(model, src)
    html = tmp_path / "page.html"
    result = run_cli("convert", src, "-o", tmp_path / "out.onnx", "--verify", "--html", html)
    assert result.exit_code == 0, result.output
    text = html.read_text(encoding="utf-8")
    page = Page(text)
    assert "script" not in page.tags and evil not in text
    assert evil in page.body  # shown as text


def test_html_never_replaces_a_source_and_is_planned_before_running(run_cli, tmp_path):
    src = onnx_net(tmp_path / "net.onnx")
    out = tmp_path / "net.nhwc.onnx"
    assert run_cli("convert", src, "-o", out).exit_code == 0
    before = src.read_bytes(), out.read_bytes()
    for target in (src, out):
        result = run_cli("verify", src, out, "--html", target)
        assert result.exit_code == 1, result.output
        assert "would overwrite the input" in result.stderr
        assert "verification:" not in result.stdout  # refused before running anything
    assert (src.read_bytes(), out.read_bytes()) == before
    result = run_cli("convert", src, "-o", tmp_path / "new.onnx", "--verify", "--html", src)
    assert result.exit_code == 1 and not (tmp_path / "new.onnx").exists()
    assert src.read_bytes() == before[0]
    np.save(tmp_path / "x.npy", np.zeros((2, 3, 11, 7), np.float32))
    x_before = (tmp_path / "x.npy").read_bytes()
    result = run_cli("verify", src, out, "--input", f"x={tmp_path / 'x.npy'}", "--html",
                     tmp_path / "x.npy")
    assert result.exit_code == 1 and "would overwrite the input" in result.stderr
    assert (tmp_path / "x.npy").read_bytes() == x_before
    (tmp_path / "folder.html").mkdir()
    result = run_cli("verify", src, out, "--html", tmp_path / "folder.html")
    assert result.exit_code == 2  # a directory where a file is expected: the usage check
    assert not list(tmp_path.glob(".*.tmp"))


def test_html_and_layers_need_verify_and_one_source(run_cli, tmp_path):
    src = onnx_net(tmp_path / "net.onnx")
    for extra in (("--layers",), ("--samples", "2"), ("--html", tmp_path / "p.html")):
        result = run_cli("convert", src, "-o", tmp_path / "o.onnx", *extra)
        assert result.exit_code == 2 and "add --verify" in result.stderr, result.output
        assert not (tmp_path / "o.onnx").exists()
    other = onnx_net(tmp_path / "other.onnx")
    result = run_cli("convert", src, other, "--output-dir", tmp_path / "d", "--verify",
                     "--html", tmp_path / "p.html")
    assert result.exit_code == 2 and "one conversion" in result.stderr
    assert not (tmp_path / "p.html").exists() and not (tmp_path / "d").exists()


def test_readme_and_docs_layers_example_is_what_verify_prints(run_cli, tmp_path):
    """The example of README.md and docs/verification.md: the converted examples/onnx model
    with its largest conv1 weight scaled by 1.5. Numbers are compared to 2 significant digits
    (they come from onnxruntime's kernels on both sides)."""
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    src = repo / "examples" / "onnx" / "small_nchw.onnx"
    out = tmp_path / "small.onnx"
    assert run_cli("convert", src, "-o", out).exit_code == 0
    scale_conv_weight(out, "conv1", tmp_path / "small_bad.onnx")
    result = run_cli("verify", src, tmp_path / "small_bad.onnx", "--layers")
    assert result.exit_code == 3
    printed = result.stdout.splitlines()

    def rough(line: str) -> str:
        return re.sub(r"\d\.\d+(e-?\d+)?", lambda m: f"{float(m.group()):.2g}", line)

    for doc in ("README.md", "docs/verification.md"):
        text = (repo / doc).read_text(encoding="utf-8")
        block = text.split("$ nhwc-onnx verify examples/onnx/small_nchw.onnx small_bad.onnx "
                           "--layers\n", 1)[1].split("```", 1)[0]
        shown = [line for line in block.splitlines()
                 if line.strip() and line.strip() != "..." and not line.startswith("$")]
        assert len(shown) >= 5
        for line in shown:
            assert rough(line) in [rough(p) for p in printed], (doc, line)


def test_tables_fit_the_page_width_however_long_a_name():
    """A long unbroken tensor name may wrap anywhere inside its cell, so no table is wider
    than the page (real models have names of 100+ characters)."""
    import re

    from nhwc_onnx.verification import VerificationReport
    from nhwc_onnx.verification.compare import compare
    from nhwc_onnx.verification.html import render_html

    long_name = "backbone/" * 40 + "conv"
    report = VerificationReport("model.onnx", "onnx", 1e-4, 1e-4, 0)
    report.outputs = [compare(long_name, np.ones(3), np.ones(3))]
    text = render_html(report)
    style = text[text.index("<style>"):text.index("</style>")]
    cells = re.search(r"th, td \{([^}]*)\}", style)
    assert cells and "overflow-wrap: anywhere" in cells.group(1)
    assert re.search(r"table \{[^}]*max-width: 100%", style)
    assert long_name in Page(text).body
