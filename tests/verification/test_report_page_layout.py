"""The --html page fits the width of the window: a table wider than the page (long tensor
names, many columns) scrolls inside its own box instead of widening the page, and a long name
in a cell may break anywhere."""
from __future__ import annotations

import re

from tests.verification.verify_models import onnx_net


def _rules(page: str) -> dict[str, str]:
    style = re.search(r"<style>(.*?)</style>", page, re.DOTALL).group(1)
    return {selector.strip(): body for selector, body in re.findall(r"([^{}]+)\{([^}]*)\}", style)}


def test_report_tables_scroll_inside_the_page(run_cli, tmp_path):
    src = onnx_net(tmp_path / "net.onnx")
    out = tmp_path / "net.nhwc.onnx"
    html = tmp_path / "page.html"
    result = run_cli("convert", src, "-o", out, "--verify", "--html", html)
    assert result.exit_code == 0, result.output
    page = html.read_text(encoding="utf-8")
    rules = _rules(page)
    table = rules["table"]
    assert "display: block" in table and "overflow-x: auto" in table, table
    assert "max-width: 100%" in table, table
    assert "overflow-wrap: anywhere" in rules["td code"]
    assert page.count("<table") >= 2  # the rules apply to the page's tables
