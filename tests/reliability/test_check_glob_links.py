"""``check 'dir/**/*.onnx'`` (the glob form README recommends) walked into
directory symlinks: one ``a -> .`` link checked the same file 41 times, two (``a -> .``,
``b -> .``) made the walk exponential (killed at 120 s). ``**`` now visits each real folder
once, as the folder form does. Real processes, real symlinks, a hang guard."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rel_limits import child_env, limit_memory

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HANG_GUARD = 60  # seconds; the whole check takes about one


def _tree(root: Path, links: list[tuple[str, str]], hidden: bool = False) -> Path:
    """root/d/x.onnx, root/d/sub/y.onnx (and root/d/.hidden/h.onnx), plus the given
    symlinks (path under d -> target)."""
    d = root / "d"
    (d / "sub").mkdir(parents=True)
    (d / ".hidden").mkdir()
    for path in ("x.onnx", "sub/y.onnx", ".hidden/h.onnx")[:3 if hidden else 2]:
        shutil.copy(EXAMPLES / "tiny_convnet.onnx", d / path)
    for name, target in links:
        os.symlink(target, d / name)
    return d


def _check(cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    proc = subprocess.run([sys.executable, "-m", "nhwc_onnx.cli", "check", "--format", "json",
                           *args], cwd=cwd, capture_output=True, text=True, timeout=HANG_GUARD,
                          preexec_fn=limit_memory, env=child_env(), check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc, json.loads(proc.stdout)


LINKS = {
    "one link to the folder itself": [("a", ".")],
    "two links to the folder itself": [("a", "."), ("b", ".")],
    "a link in a subfolder back up": [("sub/up", "..")],
    "a link to a sibling folder": [("s", "sub")],
}


@pytest.mark.parametrize("case", LINKS)
def test_recursive_glob_checks_each_real_file_once(case, tmp_path):
    _tree(tmp_path, LINKS[case])
    proc, report = _check(tmp_path, "d/**/*.onnx")
    assert proc.returncode == 0, proc.stderr
    assert [f["path"] for f in report["files"]] == ["d/sub/y.onnx", "d/x.onnx"]
    assert report["summary"] == {"valid": 2, "invalid": 0, "unreadable": 0}
    # the same real files as the folder form
    _, folder = _check(tmp_path, "d")
    real = {os.path.realpath(tmp_path / f["path"]) for f in folder["files"]}
    assert real == {os.path.realpath(tmp_path / f["path"]) for f in report["files"]}


def test_glob_still_follows_a_link_it_names(tmp_path):
    """A literal or wildcard segment follows a link, as a shell does: only ``**`` does not
    descend into linked folders."""
    d = _tree(tmp_path, [("s", "sub")])
    proc, report = _check(tmp_path, "d/s/*.onnx")
    assert proc.returncode == 0, proc.stderr
    assert [f["path"] for f in report["files"]] == ["d/s/y.onnx"]
    proc, report = _check(tmp_path, str(d / "*" / "*.onnx"))
    # d/s/y.onnx and d/sub/y.onnx are one file: listed once, under the first name
    assert [Path(f["path"]).relative_to(d).as_posix() for f in report["files"]] == ["s/y.onnx"]


def test_glob_matches_what_python_glob_matches_without_links(tmp_path):
    """Without links the result is glob.glob's: hidden names, a trailing ``**``, absolute and
    relative patterns, character classes."""
    import glob

    from nhwc_onnx.dialect.check import glob_paths

    _tree(tmp_path, [], hidden=True)
    (tmp_path / "d" / "sub" / "notes.txt").write_text("not a model")
    (tmp_path / "d" / ".h.onnx").write_bytes(b"")
    patterns = ["d/**/*.onnx", "d/**", "d/**/", "**/*.onnx", "d/*", "d/[xy].onnx", "d/.h*",
                "d/**/sub", "d/sub/**/*.onnx", "d/.hidden/*.onnx", "d/nothing/**/*.onnx"]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for pattern in patterns + [str(tmp_path / p) for p in patterns]:
            assert sorted(glob_paths(pattern)) == sorted(glob.glob(pattern, recursive=True)), \
                pattern
    finally:
        os.chdir(cwd)
