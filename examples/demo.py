"""`make demo`: convert the example source models, check every dialect model, print a summary.

The source models in examples/tf, examples/caffe and examples/onnx are converted with
`--verify` (each must match its own framework's runtime) and the results checked. Dialect
models directly in examples/ must be valid and run; models in examples/invalid/ are broken on
purpose and must be reported invalid. The demo exits 0 when every model behaved as expected.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _command() -> list[str]:
    """The installed console script, or the module when running from a bare checkout."""
    script = Path(sys.executable).parent / "nhwc-onnx"
    if script.exists():
        return [str(script)]
    found = shutil.which("nhwc-onnx")
    return [found] if found else [sys.executable, "-m", "nhwc_onnx.cli"]


def _run(args: list[str]) -> int:
    shown = " ".join(["nhwc-onnx", *args])
    print(f"\n$ {shown}", flush=True)
    return subprocess.run([*_command(), *args], cwd=REPO, check=False).returncode


# (source, extra convert arguments) for each bundled source model.
SOURCES = [
    ("examples/tf/small_cnn.pb", []),
    ("examples/caffe/tiny_net.prototxt", ["--weights", "examples/caffe/tiny_net.caffemodel"]),
    ("examples/onnx/small_nchw.onnx", []),
]


def _convert_sources(out_root: Path) -> list[tuple[str, bool, str]]:
    rows = []
    for rel, extra in SOURCES:
        out = out_root / (Path(rel).stem + ".nhwc.onnx")
        code = _run(["convert", rel, "-o", str(out), "--verify", *extra])
        checked = _run(["check", str(out)]) if code == 0 else None
        ok = code == 0 and checked == 0
        verdict = ("converted, matches the source runtime, passes check" if ok
                   else f"UNEXPECTED (convert exit {code}, check exit {checked})")
        rows.append((rel, ok, verdict))
    return rows


def main(argv: list[str]) -> int:
    out_root = Path(argv[1]) if len(argv) > 1 else REPO / "out" / "demo"
    converted = _convert_sources(out_root)
    valid = sorted(HERE.glob("*.onnx"))
    invalid = sorted((HERE / "invalid").glob("*.onnx"))
    rows = []
    for path in valid + invalid:
        rel = path.relative_to(REPO).as_posix()
        expect_valid = path in valid
        check = _run(["check", rel])
        run = None
        if expect_valid and check == 0:
            out_dir = out_root / path.stem
            run = _run(["run", rel, "--random", "--output-dir", str(out_dir)])
        rows.append((rel, expect_valid, check, run))

    print("\nSummary")
    failures = 0
    for rel, ok, verdict in converted:
        failures += not ok
        print(f"  {'ok ' if ok else 'BAD'} {rel:<34} {verdict}")
    for rel, expect_valid, check, run in rows:
        if expect_valid:
            ok = check == 0 and run == 0
            verdict = "valid, ran" if ok else f"UNEXPECTED (check exit {check}, run exit {run})"
        else:
            ok = check == 1
            verdict = ("invalid, as intended (broken on purpose to show check's report)" if ok
                       else f"UNEXPECTED (check exit {check}, expected 1)")
        failures += not ok
        print(f"  {'ok ' if ok else 'BAD'} {rel:<34} {verdict}")
    print(f"{len(rows) + len(converted)} example model(s), {failures} unexpected result(s); "
          f"outputs in {out_root}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
