"""The README's promises: its two commands are the Makefile's, its CLI reference and Python
example match the code."""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from nhwc_onnx.cli import COMMANDS, get_command

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.DOTALL)


def _makefile_user_targets() -> set[str]:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    phony = re.search(r"^\.PHONY:(.*)$", makefile, flags=re.MULTILINE).group(1).split()
    defined = set(re.findall(r"^([a-z][\w-]*):", makefile, flags=re.MULTILINE))
    assert set(phony) <= defined
    return set(phony)


def test_quick_start_commands_are_exactly_the_makefile_targets():
    blocks = _code_blocks(_section("Quick start"), "sh")
    assert len(blocks) == 1
    commands = [line.strip() for line in blocks[0].splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    assert {f"make {t}" for t in _makefile_user_targets()} == set(commands)


def test_ci_runs_the_readme_test_command():
    ci = REPO / ".ci" / "run"
    assert os.access(ci, os.X_OK)
    lines = [ln.strip() for ln in ci.read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert "set -euo pipefail" in lines
    assert lines[-1] == "make test"


def test_cli_reference_documents_exactly_the_existing_commands():
    reference = _section("Command line")
    documented = set(re.findall(r"^### `nhwc-onnx (\w+)", reference, flags=re.MULTILINE))
    assert documented == set(COMMANDS)
    for name in COMMANDS:
        section = _section("Command line").split(f"### `nhwc-onnx {name}", 1)[1].split("###")[0]
        for param in get_command(name).params:
            if getattr(param, "hidden", False):  # kept only for old command lines
                continue
            for opt in param.opts + param.secondary_opts:
                if opt.startswith("--") and opt != "--help":
                    assert opt in section, (name, opt)


def test_every_argument_of_every_command_has_help():
    params = [(name, param) for name in COMMANDS for param in get_command(name).params]
    missing = [(name, param.name) for name, param in params if not param.help]
    assert missing == []
    assert len(COMMANDS) == 7
    assert len(params) > 40  # the options and the positional arguments alike


def test_python_api_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(REPO / "examples")
    (code,) = _code_blocks(_section("Python API"), "python")
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102  (the README's own code)
    assert namespace["outputs"]["probabilities"].shape == (1, 5)
    np.testing.assert_allclose(namespace["outputs"]["probabilities"].sum(), 1.0, rtol=1e-5)
    assert (tmp_path / "copy.onnx").read_bytes() == (REPO / "examples/tiny_convnet.onnx").read_bytes()
