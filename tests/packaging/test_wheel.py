"""The wheel ``python -m build`` makes installs and runs on its own.

The source is copied to a temporary folder (the build leaves ``build/`` and ``*.egg-info``
behind), built offline (``--no-isolation``: the test environment's setuptools), installed with
``--no-deps --no-index`` into a fresh venv that sees this environment's dependencies through a
``.pth`` line (their own ``.pth`` files, such as the editable install of this checkout, are not
run that way), and its console script is run from an empty folder, so nothing comes from the
source tree.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "onnx" / "small_nchw.onnx"


def _run(args, cwd, timeout=300):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "nhwc_onnx", src / "nhwc_onnx",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    built = _run([sys.executable, "-m", "build", "--wheel", "--no-isolation",
                  "--outdir", tmp / "dist", src], cwd=tmp)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (found,) = (tmp / "dist").glob("nhwc_onnx-*-py3-none-any.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv holding the wheel alone; returns its bin folder."""
    env_dir = tmp_path_factory.mktemp("venv") / "env"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                cwd=env_dir).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "test_dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    pip = _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
                "--no-index", "--quiet", wheel], cwd=env_dir)
    assert pip.returncode == 0, pip.stderr[-3000:]
    return env_dir / "bin"


@pytest.mark.slow
def test_wheel_holds_every_module_and_the_console_script(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        entry_points = next(zf.read(n).decode() for n in names
                            if n.endswith(".dist-info/entry_points.txt"))
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "nhwc_onnx").rglob("*")
               if p.suffix in (".py", ".proto")}
    assert sources - names == set(), sorted(sources - names)
    assert "nhwc-onnx = nhwc_onnx.console:main" in entry_points, entry_points
    assert not [n for n in names if n.startswith(("tests/", "examples/", "benchmarks/"))]


@pytest.mark.slow
def test_installed_wheel_runs_from_an_empty_folder(installed, tmp_path):
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    where = _run([installed / "python", "-c", "import nhwc_onnx; print(nhwc_onnx.__file__)"], cwd)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.parent), where.stdout  # not ROOT

    helped = _run([installed / "nhwc-onnx", "--help"], cwd)
    assert helped.returncode == 0 and "convert" in helped.stdout, helped.stdout + helped.stderr

    shutil.copy2(EXAMPLE, cwd / "model.onnx")
    converted = _run([installed / "nhwc-onnx", "convert", "model.onnx", "-o", "out.onnx"], cwd)
    assert converted.returncode == 0, converted.stdout + converted.stderr
    checked = _run([installed / "nhwc-onnx", "check", "out.onnx"], cwd)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "out.onnx" in checked.stdout and "valid" in checked.stdout.lower(), checked.stdout
    broken = _run([installed / "nhwc-onnx", "check", "model.onnx"], cwd)  # NCHW source
    assert broken.returncode == 1, broken.stdout + broken.stderr
