"""Every command example of README.md runs as shown.

A command example is a line of a ```console, ```sh or ```bash block that starts with
``$ nhwc-onnx`` or ``nhwc-onnx``; in a console block the lines under it, up to the next ``$``,
are what it prints. Each example runs in a fresh folder holding the models it names (built
here, or the repository's ``examples/``) and must exit with the code listed in CASES, and
every line the README shows must be a line it printed. In a shown line ``...`` stands for any
text and a decimal number (a time, an error, a statistic) for any number; integers (shapes,
counts, node names) must be exact. The listed exit code must agree with what the README shows:
a line starting ``Error:``, ``MISMATCH`` or ``INVALID`` for a failing example, none of them for
a passing one. An example missing from CASES, or a case no longer in the README, fails
``test_every_readme_command_is_covered``.
"""
from __future__ import annotations

import re
import shlex
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SHELL_BLOCKS = ("console", "sh", "bash")


@dataclass
class Example:
    command: str  # as written, without the "$ " prompt
    shown: list[str]  # the lines the README shows under it (console blocks)


def readme_examples(text: str | None = None) -> list[Example]:
    text = README.read_text(encoding="utf-8") if text is None else text
    examples: list[Example] = []
    for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE):
        if lang not in SHELL_BLOCKS:
            continue
        current = None
        for line in body.splitlines():
            command = line.removeprefix("$ ")
            if command.startswith("nhwc-onnx"):
                current = Example(command.strip(), [])
                examples.append(current)
            elif line.startswith("$"):
                current = None  # another program's command: its output is not ours to check
            elif current is not None and lang == "console" and line.strip():
                current.shown.append(line.rstrip())
    return examples


# --- the models the examples name ----------------------------------------------------------

def _small(folder: Path) -> None:
    import nhwc_onnx

    nhwc_onnx.convert(folder / "examples/onnx/small_nchw.onnx", folder / "small.onnx")


def _small_bad(folder: Path) -> None:
    """small.onnx with the largest weight of its first conv scaled by 1.5 (the README's
    --layers example)."""
    from tests.verification.verify_models import scale_conv_weight

    scale_conv_weight(folder / "small.onnx", "conv1", folder / "small_bad.onnx")


def _dynamic(folder: Path) -> None:
    """A TorchScript export with dynamic_axes {0: "batch"} (conv, pool, conv, view, Linear)."""
    from tests.conversion.symbolic_batch import exporters

    onnx.save(exporters.torchscript(17), folder / "dynamic.onnx")


def _dynamic_nhwc(folder: Path) -> None:
    import nhwc_onnx

    nhwc_onnx.convert(folder / "dynamic.onnx", folder / "dynamic_nhwc.onnx")


def _stacked(folder: Path) -> None:
    """Relu(x) concatenated with x along axis 0, the symbolic batch: it mixes the samples."""
    from tests.conversion.symbolic_batch import exporters

    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Concat", ["r", "x"], ["y"], name="batch_concat", axis=0)]
    onnx.save(exporters.single(nodes, (3, 5, 7)), folder / "stacked.onnx")


def _classifier_keras(folder: Path) -> None:
    """Input(name="img") 7x5x3 -> Conv2D -> GlobalAveragePooling -> Dense "probs"."""
    from tests.conversion.deployment.models import keras_classifier

    keras_classifier(folder / "classifier.keras")


def _classifier_onnx(folder: Path) -> None:
    import nhwc_onnx

    nhwc_onnx.convert(folder / "classifier.keras", folder / "classifier.onnx",
                      nhwc_onnx.ConvertOptions(rename={"probs": "scores"}))


def _embedder(folder: Path) -> None:
    """Convs, a linear head and F.normalize (ReduceL2, Div: refused), as PyTorch exports it."""
    from tests.pipeline.models import l2_embedder

    l2_embedder(folder / "embedder.onnx")


def _embedder_split(folder: Path) -> None:
    import nhwc_onnx

    nhwc_onnx.convert(folder / "embedder.onnx", folder / "embedder", split=True)


def _models_folder(folder: Path) -> None:
    (folder / "models").mkdir()
    shutil.copy(folder / "small.onnx", folder / "models" / "small.onnx")


# name -> (builder, the names it needs first)
BUILDERS: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "small.onnx": (_small, ()),
    "small_bad.onnx": (_small_bad, ("small.onnx",)),
    "dynamic.onnx": (_dynamic, ()),
    "dynamic_nhwc.onnx": (_dynamic_nhwc, ("dynamic.onnx",)),
    "stacked.onnx": (_stacked, ()),
    "classifier.keras": (_classifier_keras, ()),
    "classifier.onnx": (_classifier_onnx, ("classifier.keras",)),
    "models": (_models_folder, ("small.onnx",)),
    "embedder.onnx": (_embedder, ()),
    "embedder": (_embedder_split, ("embedder.onnx",)),
}


def _build(folder: Path, name: str) -> None:
    builder, needs = BUILDERS[name]
    for need in needs:
        if not (folder / need).exists():
            _build(folder, need)
    builder(folder)


# --- what each example must do beyond its exit code and shown lines ------------------------

def _written(*names: str) -> Callable[[Path, str], None]:
    def check(folder: Path, stdout: str) -> None:
        for name in names:
            assert (folder / name).is_file(), name
    return check


def _nothing_written(*names: str) -> Callable[[Path, str], None]:
    def check(folder: Path, stdout: str) -> None:
        for name in names:
            assert not (folder / name).exists(), name
    return check


def _html_page(folder: Path, stdout: str) -> None:
    page = (folder / "small.html").read_text(encoding="utf-8")
    assert "<svg" in page and "MATCH" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # loads nothing


def _run_outputs(folder: Path, stdout: str) -> None:
    prob = np.load(folder / "small_outputs" / "prob.npy")
    assert prob.shape == (1, 10)
    np.testing.assert_allclose(prob.sum(), 1.0, rtol=1e-5)


def _junit_report(folder: Path, stdout: str) -> None:
    root = ET.fromstring((folder / "nhwc-onnx-check.xml").read_text(encoding="utf-8"))
    assert root.get("tests") == "1" and root.get("failures") == "0"


def _preprocessing_recorded(folder: Path, stdout: str) -> None:
    import json

    from nhwc_onnx.serialize import load

    recorded = json.loads(load(folder / "tiny.onnx").metadata["preprocessing"])
    assert recorded == {"data": {"mean": [104.0, 117.0, 123.0], "std": [58.0, 57.0, 57.0],
                                 "reverse_channels": True}}


@dataclass
class Case:
    exit_code: int
    needs: tuple[str, ...] = ()
    slow: bool = False  # TensorFlow
    check: Callable[[Path, str], None] | None = None


TINY = ("convert examples/caffe/tiny_net.prototxt --weights examples/caffe/tiny_net.caffemodel "
        "-o tiny.onnx")
CASES: dict[str, Case] = {
    # Quick start
    "nhwc-onnx convert examples/onnx/small_nchw.onnx -o small.onnx --verify":
        Case(0, check=_written("small.onnx")),
    "nhwc-onnx check small.onnx": Case(0, ("small.onnx",)),
    "nhwc-onnx info small.onnx": Case(0, ("small.onnx",)),
    "nhwc-onnx run small.onnx --random": Case(0, ("small.onnx",), check=_run_outputs),
    # the batch rule
    "nhwc-onnx convert dynamic.onnx -o dynamic_nhwc.onnx":
        Case(0, ("dynamic.onnx",), check=_written("dynamic_nhwc.onnx")),
    "nhwc-onnx info dynamic_nhwc.onnx": Case(0, ("dynamic_nhwc.onnx",)),
    "nhwc-onnx convert stacked.onnx -o stacked_nhwc.onnx":
        Case(1, ("stacked.onnx",), check=_nothing_written("stacked_nhwc.onnx")),
    "nhwc-onnx convert stacked.onnx -o stacked_nhwc.onnx --batch 2":
        Case(0, ("stacked.onnx",), check=_written("stacked_nhwc.onnx")),
    # the naming rule
    "nhwc-onnx convert classifier.keras -o classifier.onnx --rename probs=scores":
        Case(0, ("classifier.keras",), slow=True, check=_written("classifier.onnx")),
    "nhwc-onnx info classifier.onnx": Case(0, ("classifier.onnx",), slow=True),
    # preprocessing
    f"nhwc-onnx {TINY} --reverse-channels --mean 104,117,123 --std 58,57,57 --verify":
        Case(0, check=_preprocessing_recorded),
    f"nhwc-onnx {TINY} --mean 104,117,123 --std 58,57,57 --strict":
        Case(1, check=_nothing_written("tiny.onnx")),
    # verify
    "nhwc-onnx verify examples/onnx/small_nchw.onnx small_bad.onnx --layers":
        Case(3, ("small_bad.onnx",)),
    "nhwc-onnx convert examples/onnx/small_nchw.onnx -o small.onnx --verify --samples 3 "
    "--html small.html": Case(0, check=_html_page),
    "nhwc-onnx convert examples/caffe/tiny_net.prototxt --weights random -o tiny_random.onnx "
    "--verify": Case(0, check=_written("tiny_random.onnx")),
    # the other commands
    # split
    "nhwc-onnx convert embedder.onnx --split -o embedder --verify":
        Case(0, ("embedder.onnx",), check=_written("embedder/pipeline.json")),
    "nhwc-onnx info embedder": Case(0, ("embedder",)),
    "nhwc-onnx run embedder --random": Case(0, ("embedder",),
                                            check=_written("embedder_outputs/embedding.npy")),
    "nhwc-onnx verify embedder.onnx embedder": Case(0, ("embedder",)),
    "nhwc-onnx check examples/invalid/broken.onnx": Case(1),
    "nhwc-onnx info examples/onnx/small_nchw.onnx": Case(0),
    "nhwc-onnx lower small.onnx --output small_standard.onnx":
        Case(0, ("small.onnx",), check=_written("small_standard.onnx")),
    "nhwc-onnx ops --framework onnx Exp": Case(0),
    # Use in CI
    "nhwc-onnx check --format junit models/ > nhwc-onnx-check.xml":
        Case(0, ("models",), check=_junit_report),
}

FAILING_MARKS = ("Error:", "verification: MISMATCH")


def _pattern(shown: str) -> re.Pattern:
    """A shown line as a regular expression: '...' is any text, a decimal number any number."""
    number = r"-?\d+\.\d+(?:e[-+]?\d+)?|-?\d+e[-+]?\d+"
    parts = []
    for chunk in shown.split("..."):
        pieces = re.split(f"({number})", chunk)
        parts.append("".join(
            rf"(?:{number})" if i % 2 else re.escape(piece) for i, piece in enumerate(pieces)))
    return re.compile(".*".join(parts))


def _examples_by_command() -> dict[str, Example]:
    return {example.command: example for example in readme_examples()}


def _params():
    params = []
    for command, case in CASES.items():
        marks = [pytest.mark.slow] if case.slow else []
        params.append(pytest.param(command, case, id=command[len("nhwc-onnx "):][:60],
                                   marks=marks))
    return params


@pytest.mark.parametrize(("command", "case"), _params())
def test_readme_command_runs_as_shown(command, case, tmp_path, monkeypatch):
    example = _examples_by_command()[command]
    (tmp_path / "examples").symlink_to(REPO / "examples")
    for name in case.needs:
        _build(tmp_path, name)
    monkeypatch.chdir(tmp_path)
    args = shlex.split(command, comments=True)[1:]
    redirect = None
    if ">" in args:
        args, redirect = args[: args.index(">")], args[args.index(">") + 1]
    result = run_cli(*args)
    assert result.exception is None, result.exception
    assert result.exit_code == case.exit_code, result.output
    if redirect:
        (tmp_path / redirect).write_text(result.stdout, encoding="utf-8")
    printed = [line.rstrip() for line in result.output.splitlines()]
    for shown in example.shown:
        if shown.strip() == "...":
            continue
        pattern = _pattern(shown)
        assert any(pattern.fullmatch(line) for line in printed), (shown, result.output)
    if case.check:
        case.check(tmp_path, result.stdout)


@pytest.mark.parametrize(("command", "case"), CASES.items(), ids=list(range(len(CASES))))
def test_the_exit_code_agrees_with_what_the_readme_shows(command, case):
    shown = _examples_by_command()[command].shown
    fails = any(line.lstrip().startswith(FAILING_MARKS) or " INVALID, " in line
                for line in shown)
    assert fails == (case.exit_code != 0), (command, shown)


def test_every_readme_command_is_covered():
    written = [example.command for example in readme_examples()]
    assert len(written) == len(set(written)), "the same command twice: give each a case"
    assert set(written) == set(CASES), (set(written) - set(CASES), set(CASES) - set(written))
    assert len(written) >= 15


def test_the_parser_finds_prompts_output_and_plain_shell_lines():
    text = ("```console\n$ nhwc-onnx a x\nprinted\n  ...\n$ ls\nnot ours\n```\n"
            "```sh\nnhwc-onnx b > f.xml\npip install .\n```\n"
            "```python\nnhwc-onnx c\n```\n")
    examples = readme_examples(text)
    assert [(e.command, e.shown) for e in examples] == [
        ("nhwc-onnx a x", ["printed", "  ..."]), ("nhwc-onnx b > f.xml", [])]


def test_the_shown_line_pattern():
    pattern = _pattern("a -> b (onnx, 0.46 s) x 12 nodes, ... end")
    assert pattern.fullmatch("a -> b (onnx, 1.5e-07 s) x 12 nodes, 3 ops, end")
    assert not pattern.fullmatch("a -> b (onnx, 0.46 s) x 13 nodes, 3 ops, end")  # integers exact
    assert not pattern.fullmatch("a -> c (onnx, 0.46 s) x 12 nodes, end")


def test_install_commands_are_what_the_makefile_runs():
    """README's install commands are the Makefile's (its --quiet aside), and `make demo` /
    `make test` are exactly the Makefile's user targets."""
    text = README.read_text(encoding="utf-8")
    install = text.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    first_block = re.search(r"```sh\n(.*?)```", install, flags=re.DOTALL).group(1)
    commands = [line.strip() for line in first_block.splitlines() if line.strip()]
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    variables = dict(re.findall(r"^(\w+) \??:?= (.*)$", makefile, flags=re.MULTILINE))
    recipes = [line.strip() for line in makefile.splitlines() if line.startswith("\t")]

    def expand(line: str) -> str:
        while "$(" in line:
            line = re.sub(r"\$\((\w+)\)", lambda m: variables[m.group(1)], line)
        return line.replace(" --quiet", "")

    expanded = [expand(r) for r in recipes]
    assert commands == ["python3 -m venv .venv", ".venv/bin/python -m pip install -e '.[dev]'"]
    assert all(command in expanded for command in commands), expanded
    phony = re.search(r"^\.PHONY:(.*)$", makefile, flags=re.MULTILINE).group(1).split()
    assert set(re.findall(r"`make (\w+)`", install)) == set(phony) == {"demo", "test"}
    assert "pip install nhwc-onnx" not in text  # there is no published package
    assert "python -m build" in install
