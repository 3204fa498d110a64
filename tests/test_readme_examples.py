"""Every ``$ nhwc-onnx ...`` example of the README, run as printed, prints what the README shows.

Each example is a fenced block whose first line is ``$ nhwc-onnx ARGS`` and whose other lines
are the output. The command runs in a fresh folder holding the repository's ``examples``, as a
real process of this checkout (``python -m nhwc_onnx.cli``). Each shown line must match the
printed line at the same place, where the README may stand in for what varies from run to run
or machine to machine: ``...`` for an elided rest, and a time (``0.37 s``) or a float in
scientific notation (``2.98e-08``) for any other such value. A new example needs its exit code
in ``EXIT_CODES``.
"""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")

EXIT_CODES = {
    "nhwc-onnx convert examples/caffe/tiny_net.prototxt --weights "
    "examples/caffe/tiny_net.caffemodel -o tiny.onnx --verify": 0,
    "nhwc-onnx check examples/invalid/broken.onnx": 1,
}


def readme_examples() -> dict[str, list[str]]:
    """{command: shown output lines} of every fenced block that starts with ``$ nhwc-onnx``."""
    found = {}
    for block in re.findall(r"```[a-z]*\n(.*?)```", README, flags=re.DOTALL):
        first, *shown = block.rstrip("\n").split("\n")
        if first.startswith("$ nhwc-onnx "):
            found[first[2:]] = shown
    return found


def line_pattern(shown: str) -> re.Pattern:
    """The README's line as a pattern: literal, but ``...`` (and a space before it) is any
    text, a time any time and a float in scientific notation any such float."""
    volatile = r"( ?\.\.\.)|(\b\d+\.\d+ s\b)|(\b\d\.\d+e[-+]\d+\b)"
    parts, at = [], 0
    for m in re.finditer(volatile, shown):
        parts.append(re.escape(shown[at:m.start()]))
        parts.append(".*" if m.group(1) else r"\d+\.\d+ s" if m.group(2) else r"\d\.\d+e[-+]\d+")
        at = m.end()
    parts.append(re.escape(shown[at:]))
    return re.compile("".join(parts))


def test_every_readme_example_has_its_exit_code_here():
    assert set(readme_examples()) == set(EXIT_CODES)


@pytest.mark.parametrize("command", sorted(EXIT_CODES))
def test_readme_example_prints_what_the_readme_shows(command, tmp_path):
    shown = readme_examples()[command]
    (tmp_path / "examples").symlink_to(REPO / "examples")
    args = shlex.split(command)[1:]
    done = subprocess.run([sys.executable, "-m", "nhwc_onnx.cli", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == EXIT_CODES[command], done.stdout + done.stderr
    printed = (done.stdout + done.stderr).rstrip("\n").split("\n")
    assert len(printed) == len(shown), printed
    for want, got in zip(shown, printed):
        assert line_pattern(want).fullmatch(got), f"README shows\n  {want}\nthe command prints\n  {got}"


def test_the_pattern_holds_only_what_varies():
    pattern = line_pattern("  ok  prob: shape (1, 10)  max abs 2.98e-08 (caffe, 0.37 s) ...")
    assert pattern.fullmatch("  ok  prob: shape (1, 10)  max abs 1.00e-07 (caffe, 12.5 s) x, y")
    assert not pattern.fullmatch("  ok  prob: shape (1, 9)  max abs 1.00e-07 (caffe, 12.5 s) x")
    assert not pattern.fullmatch("  ok  prob: shape (1, 10)  max abs 0.1 (caffe, 12.5 s) x")
