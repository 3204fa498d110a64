"""`nhwc-onnx check` in CI: JUnit XML, folders and globs, the pre-commit hook."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VALID = ["tiny_convnet.onnx", "pad_pool_concat.onnx", "mlp_constants.onnx"]
BROKEN = "invalid/broken.onnx"
BROKEN_RULES = ["weight-shape", "attribute", "same-shape"]


def _tree(tmp_path, examples) -> Path:
    """models/a/tiny_convnet.onnx, models/a/deep/broken.onnx, models/b/mlp_constants.onnx,
    models/b/notes.txt"""
    root = tmp_path / "models"
    (root / "a" / "deep").mkdir(parents=True)
    (root / "b").mkdir()
    shutil.copy(examples / VALID[0], root / "a" / VALID[0])
    shutil.copy(examples / BROKEN, root / "a" / "deep" / "broken.onnx")
    shutil.copy(examples / VALID[2], root / "b" / VALID[2])
    (root / "b" / "notes.txt").write_text("not a model")
    return root


def test_junit_has_one_testcase_per_model_and_one_failure_per_issue(invoke, examples, tmp_path):
    unreadable = tmp_path / "empty.onnx"
    unreadable.write_bytes(b"")
    paths = [examples / VALID[0], examples / BROKEN, unreadable]
    result = invoke("check", "--format", "junit", *paths)
    assert result.exit_code == 2, result.output  # unreadable wins, as with text/json
    root = ET.fromstring(result.stdout)
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [str(p) for p in paths]
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    valid, broken, empty = cases
    assert list(valid) == []
    failures = broken.findall("failure")
    assert [f.get("type") for f in failures] == BROKEN_RULES
    assert all(f.get("message") and f.text == f.get("message") for f in failures)
    assert "conv_oihw" in failures[0].get("message")
    (error,) = empty.findall("error")
    assert error.get("type") == "unreadable" and "empty" in error.get("message")


def test_junit_stays_well_formed_with_control_characters_in_names(invoke, tmp_path, examples):
    import onnx

    proto = onnx.load(str(examples / BROKEN))
    proto.graph.node[0].name = "conv\x01\x1b<&>"
    odd = tmp_path / "odd.onnx"
    onnx.save(proto, str(odd))
    result = invoke("check", "--format", "junit", odd)
    assert result.exit_code == 1, result.output
    case = ET.fromstring(result.stdout).find("testsuite/testcase")
    messages = [f.get("message") for f in case.findall("failure")]
    assert any("conv\\x01\\x1b<&>" in m for m in messages), messages


def test_check_folder_recurses_to_onnx_files(invoke, examples, tmp_path):
    root = _tree(tmp_path, examples)
    result = invoke("check", "--format", "json", root)
    assert result.exit_code == 1, result.output
    import json

    data = json.loads(result.stdout)
    assert [Path(f["path"]).relative_to(root).as_posix() for f in data["files"]] == [
        "a/tiny_convnet.onnx", "a/deep/broken.onnx", "b/mlp_constants.onnx"]
    assert data["summary"]["valid"] == 2 and data["summary"]["invalid"] == 1


def test_check_glob_and_empty_matches(invoke, examples, tmp_path):
    root = _tree(tmp_path, examples)
    result = invoke("check", str(root / "**" / "*convnet*.onnx"), str(root / "b"))
    assert result.exit_code == 0, result.output + result.stderr
    assert "2 files: 2 valid" in result.stdout
    (tmp_path / "nothing").mkdir()
    missing = invoke("check", str(root / "*.tflite"), tmp_path / "nothing", examples / VALID[0])
    assert missing.exit_code == 2
    assert "no file matches" in missing.stderr and "holds no *.onnx" in missing.stderr
    assert f"{examples / VALID[0]}: valid" in missing.stdout


# -- pre-commit -----------------------------------------------------------------------------------


def _hook_definition() -> dict:
    import yaml

    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    (hook,) = [h for h in hooks if h["id"] == "nhwc-onnx-check"]
    return hook


def test_hook_entry_is_the_installed_console_script():
    import tomllib

    hook = _hook_definition()
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    command, *args = hook["entry"].split()
    assert scripts[command] == "nhwc_onnx.console:main"
    assert args == ["check"]
    assert hook["language"] == "python"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


def _local_config(hook: dict) -> str:
    """The published hook as a `repo: local` hook on this interpreter: pre-commit's `python`
    language would pip-install the package (network); the id, name, file pattern and command
    arguments are the published ones."""
    import yaml

    local = {k: v for k, v in hook.items() if k not in ("language", "entry")}
    _, *args = hook["entry"].split()
    local.update(language="system", entry=" ".join([sys.executable, "-m", "nhwc_onnx.cli", *args]))
    return yaml.safe_dump({"repos": [{"repo": "local", "hooks": [local]}]})


def test_pre_commit_hook_passes_on_valid_and_fails_on_broken_models(tmp_path, examples):
    import pre_commit  # noqa: F401 - part of the dev extra; the hook is run through it
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / ".pre-commit-config.yaml").write_text(_local_config(_hook_definition()))
    (repo / "models").mkdir()
    shutil.copy(examples / VALID[0], repo / "models" / "good.onnx")
    (repo / "README.txt").write_text("the hook must not look at this\n")
    _git(repo, "add", "-A")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"),
           "PYTHONPATH": str(REPO), "SKIP": ""}

    def run_hook():
        return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files",
                               "--color", "never"], check=False, cwd=repo, capture_output=True,
                              text=True, env=env, timeout=300)

    ok = run_hook()
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "nhwc-onnx check" in ok.stdout and "Passed" in ok.stdout

    shutil.copy(examples / BROKEN, repo / "models" / "broken.onnx")
    _git(repo, "add", "-A")
    bad = run_hook()
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "Failed" in bad.stdout
    assert "models/broken.onnx: INVALID, 3 problem(s)" in bad.stdout
    assert "README.txt" not in bad.stdout


def test_readme_hook_snippets_use_the_published_hook():
    import re

    import yaml

    hook = _hook_definition()
    # the hook from a clone in README's CI section, the local one in docs/cli.md
    section = (REPO / "README.md").read_text().split("\n## Use in CI\n", 1)[1].split("\n## ")[0]
    section += (REPO / "docs" / "cli.md").read_text().split("\n## pre-commit\n", 1)[1]
    configs = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)]
    assert len(configs) == 2
    hooks = [h for c in configs for r in c["repos"] for h in r["hooks"]]
    assert {h["id"] for h in hooks} == {hook["id"]}
    local = next(r for c in configs for r in c["repos"] if r["repo"] == "local")["hooks"][0]
    assert local["entry"] == hook["entry"] and local["files"] == hook["files"]


def test_readme_hook_rev_is_a_commit_of_this_repository_or_the_explained_placeholder():
    """README showed `rev: v0.1.0`, a tag that does not exist: pre-commit then fails
    to clone. The rev must resolve in this repository, or be the placeholder the README tells
    how to fill (`git rev-parse HEAD`)."""
    import re

    import yaml

    section = (REPO / "README.md").read_text().split("\n## Use in CI\n", 1)[1].split("\n## ")[0]
    configs = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)]
    (remote,) = [r for c in configs for r in c["repos"] if r["repo"] != "local"]
    rev = str(remote["rev"])
    if rev != "COMMIT_SHA":
        found = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                               cwd=REPO, capture_output=True, text=True, check=False)
        assert found.returncode == 0, f"README's rev {rev!r} is no commit or tag of this repository"
    else:
        assert "`git rev-parse HEAD`" in section and "`rev:`" in section
    hook = _hook_definition()
    assert [h["id"] for h in remote["hooks"]] == [hook["id"]]
    command = hook["entry"].split()[0]
    assert (Path(sys.executable).parent / command).is_file(), f"{command} is not installed"
