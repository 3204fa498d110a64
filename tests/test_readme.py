"""The README's promises: its make commands are the Makefile's, its CLI reference (and
docs/cli.md's) and Python example match the code."""
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


def test_install_names_exactly_the_makefile_targets():
    """The make commands the README offers (in Install; the install commands themselves are
    checked against the Makefile's recipes in test_readme_commands.py) are its user targets."""
    named = re.findall(r"`(make \w+)`", _section("Install"))
    assert sorted(set(named)) == ["make demo", "make fuzz", "make test"]
    assert {f"make {t}" for t in _makefile_user_targets()} == set(named)


def test_ci_runs_the_readme_test_command():
    ci = REPO / ".ci" / "run"
    assert os.access(ci, os.X_OK)
    lines = [ln.strip() for ln in ci.read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert "set -euo pipefail" in lines
    assert lines[-1] == "make test"


def _assert_documents_every_command_and_option(reference: str, heading: str) -> None:
    documented = set(re.findall(rf"^{heading} `nhwc-onnx (\w+)", reference, flags=re.MULTILINE))
    assert documented == set(COMMANDS)
    for name in COMMANDS:
        section = reference.split(f"{heading} `nhwc-onnx {name}", 1)[1].split(f"\n{heading} ")[0]
        for param in get_command(name).params:
            if getattr(param, "hidden", False):  # kept only for old command lines
                continue
            for opt in param.opts + param.secondary_opts:
                if opt.startswith("--") and opt != "--help":
                    assert opt in section, (name, opt)


def test_cli_reference_documents_exactly_the_existing_commands():
    """README's short reference and docs/cli.md's full one both name every command and, in its
    section, every option."""
    _assert_documents_every_command_and_option(_section("Command line"), "###")
    full = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    _assert_documents_every_command_and_option(full, "##")


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
    assert ((tmp_path / "copy.onnx").read_bytes()
            == (REPO / "examples/tiny_convnet.onnx").read_bytes())
