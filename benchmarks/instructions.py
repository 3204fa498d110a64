"""Count the user-space instructions of each process (valgrind's callgrind): ours, the floor,
and the start-up commands.

    .venv/bin/python benchmarks/instructions.py
    .venv/bin/python benchmarks/instructions.py --models keras_mobilenetv2 --ours-pythonpath /tmp/b

Wall time on this shared VM moves by 1.5x within minutes, and run.py's seconds then hide
changes of a few percent. The instruction count of a command does not move: the same tree gives
the same count to within ~100 instructions of ~10^9 (one OpenBLAS thread, hash seed fixed).
It leaves out what the kernel does for the process (page faults, reads, writes, fsync: 20-30%
of a conversion's time here) and memory stalls, so it judges a change of Python work; run.py
stays the measure of the targets. A process under callgrind runs ~50x slower: the default
models are the small ones.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import models as bench_models
from run import (
    PROJECT_BIN,
    RESULTS,
    add_model_options,
    byte_compile,
    command_cases,
    floor_command,
    ours_command,
    source_revision,
    write_results,
)

DEFAULT_MODELS = ("keras_mobilenetv2", "keras_resnet50", "caffe_resnet50", "onnx_resnet50")
# One OpenBLAS thread: a worker spinning at numpy's import would add a count that varies run to
# run (the CLI sets this itself; the floor's `import onnx` would not). A fixed hash seed keeps
# set and dict orders, and so the work, the same in every run.
STEADY_ENV = {"OPENBLAS_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
REFERENCES = {
    "python -c pass": ["-c", "pass"],
    "python -c 'import numpy'": ["-c", "import numpy"],
}
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def under_callgrind(cmd: list[str]) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd]


def collected(stderr: str) -> int | None:
    """The instruction count callgrind prints at exit ("==123== Collected : 1017457628")."""
    found = _COLLECTED.findall(stderr)
    return int(found[-1]) if found else None


def count(cmd: list[str], env: dict, timeout: float) -> int | None:
    """Instructions of one run of ``cmd``; None when it fails (its stderr's end is printed)."""
    proc = subprocess.run(under_callgrind(cmd), env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        print(f"  failed (exit {proc.returncode}): {proc.stderr.strip()[-400:]}", flush=True)
        return None
    return collected(proc.stderr)


def count_model(model: dict, work: Path, env: dict, ours_env: dict, timeout: float) -> dict:
    """Ours, then the floor on our output (written by a plain run first)."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ours_out = work / "ours.onnx"
    subprocess.run(ours_command(model, ours_out), env=ours_env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout)
    counted_out = work / "ours_counted.onnx"
    result = {"ours": count(ours_command(model, counted_out), ours_env, timeout),
              "floor": count(floor_command(ours_out, work / "floor.onnx"), env, timeout)}
    shutil.rmtree(work, ignore_errors=True)
    return result


def millions(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e6:,.0f} M"


def table(results: dict) -> str:
    lines = [f"Instructions (callgrind), {results['date']}, source {results['revision']}"
             + (f", ours from {results['ours_pythonpath']}" if results["ours_pythonpath"] else ""),
             "", "| model | ours | floor | ours/floor |", "|---|---|---|---|"]
    for name, r in results["models"].items():
        share = f"{r['ours'] / r['floor']:.2f}x" if r["ours"] and r["floor"] else "-"
        lines.append(f"| {name} | {millions(r['ours'])} | {millions(r['floor'])} | {share} |")
    lines += ["", "| command | instructions |", "|---|---|"]
    lines += [f"| `{label}` | {millions(n)} |" for label, n in results["commands"].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="*", default=list(DEFAULT_MODELS),
                        help=f"default: {' '.join(DEFAULT_MODELS)}")
    parser.add_argument("--ours-pythonpath", default="",
                        help="PYTHONPATH for ours only: count a patched copy of nhwc_onnx")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per process")
    add_model_options(parser)
    parser.add_argument("--output", type=Path, default=None,
                        help="JSON path (default benchmarks/results/instructions-<stamp>.json)")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt install valgrind)", file=sys.stderr)
        return 2
    byte_compile()
    env = {**os.environ, **STEADY_ENV}
    ours_env = dict(env, PYTHONPATH=args.ours_pythonpath) if args.ours_pythonpath else env
    stamp = dt.datetime.now(dt.timezone.utc)
    results = {"date": stamp.strftime("%Y-%m-%d %H:%M UTC"), "revision": source_revision(),
               "ours_pythonpath": args.ours_pythonpath, "models": {}, "commands": {}}
    for name in args.models:
        model = bench_models.make(name, args.cache, args.corpus).to_dict()
        if not model["available"]:
            print(f"{name}: not available ({model['reason']})", flush=True)
            continue
        print(f"{name} ...", flush=True)
        results["models"][name] = count_model(model, RESULTS / "work" / f"instructions_{name}",
                                              env, ours_env, args.timeout)
    for label, extra in REFERENCES.items():
        results["commands"][label] = count([str(PROJECT_BIN / "python"), *extra], env,
                                           args.timeout)
    for case in command_cases(None).values():
        results["commands"][case["label"]] = count(case["cmd"], ours_env, args.timeout)
    write_results(results, args.output
                  or RESULTS / f"instructions-{stamp.strftime('%Y%m%d-%H%M%S')}.json",
                  table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
