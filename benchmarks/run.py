"""Time `nhwc-onnx convert` end to end, next to the anchor converters and the load+save floor.

    .venv/bin/python benchmarks/run.py                       # every model, 5 rounds
    .venv/bin/python benchmarks/run.py --models keras_resnet50 --runs 3
    .venv/bin/python benchmarks/run.py --profile caffe_vgg16  # cProfile of one conversion

Each measurement is one fresh process: wall time from start to exit (the output file written),
peak RSS from the kernel's rusage of that process. Tools run in rounds, the order rotating every
round, so slow drift of the machine hits every tool alike. One untimed warm-up round first fills
the page cache and writes our output, which the floor (a process that only ``onnx.load``s and
``onnx.save``s that output) needs. Results: benchmarks/results/<stamp>.json and .md.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import models as bench_models

PROJECT_BIN = ROOT / ".venv" / "bin"
ANCHOR_BIN = HERE / ".venv-anchors" / "bin"
RESULTS = HERE / "results"

# Targets of issue 10 (2-core machine): seconds, peak RSS as a multiple of the model's bytes.
TARGETS = {
    "keras_resnet50": {"seconds": 1.5, "rss_x": 2.5},
    "keras_mobilenetv2": {"seconds": 0.6},
    "caffe_resnet50": {"seconds": 1.5},
    "caffe_vgg16": {"seconds": 6.0, "rss_x": 2.5},
    "onnx_big": {"rss_x": 2.5},
}
FLOOR_X = 2.0  # any model: ours <= 2x the load+save floor

# Anchor runs that endanger a shared machine; --unsafe-anchors runs them anyway.
UNSAFE_ANCHORS = {
    ("tf2onnx", "keras_vgg16"): "skipped: tf2onnx 1.17 was killed by the kernel's OOM killer "
                                "at 18 GB anonymous RSS on this 24 GB machine",
}

FLOOR_SCRIPT = (
    "import sys, onnx\n"
    "m = onnx.load(sys.argv[1])\n"
    "big = m.ByteSize() > 2**31 - 1 if hasattr(m, 'ByteSize') else False\n"
    "onnx.save(m, sys.argv[2], save_as_external_data=big)\n"
)


# -- pure helpers (unit-tested in tests/test_benchmarks_smoke.py) ---------------------------------


def summarize(values: list[float]) -> dict:
    """Median, min, max and count of the samples (empty -> Nones)."""
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def ratio(ours: float | None, other: float | None) -> float | None:
    if ours is None or not other:
        return None
    return ours / other


def schedule(tools: list[str], rounds: int) -> list[list[str]]:
    """Tool order per round, rotated by one each round (A B C, B C A, C A B, ...).

    A tool that needs another's output (the floor needs ours) is never first in the warm-up;
    the caller runs the warm-up in the given order.
    """
    if not tools:
        return [[] for _ in range(rounds)]
    return [tools[r % len(tools):] + tools[:r % len(tools)] for r in range(rounds)]


API_SCRIPT = (
    "import sys\n"
    "from nhwc_onnx.api import convert\n"
    "from nhwc_onnx.frontends.base import FrontendOptions\n"
    "convert(sys.argv[1], sys.argv[2], options=FrontendOptions(weights=sys.argv[3] or None))\n"
)


def ours_command(model: dict, out: Path, bin_dir: Path = PROJECT_BIN, via: str = "cli"
                 ) -> list[str]:
    """The CLI (what users run), or ``via="api"``: the same conversion through nhwc_onnx.api."""
    if via == "api":
        return [str(bin_dir / "python"), "-c", API_SCRIPT, model["source"], str(out),
                model.get("weights") or ""]
    cmd = [str(bin_dir / "nhwc-onnx"), "convert", model["source"], "-o", str(out)]
    if model.get("weights"):
        cmd += ["--weights", model["weights"]]
    return cmd


def ovc_command(model: dict, out_dir: Path, bin_dir: Path = ANCHOR_BIN) -> list[str] | None:
    """OpenVINO's converter with its defaults; it reads TF and ONNX here (Caffe was dropped)."""
    if model["framework"] not in ("tf", "onnx"):
        return None
    return [str(bin_dir / "ovc"), model["source"], "--output_model", str(out_dir / "model.xml")]


def tf2onnx_command(model: dict, out: Path, bin_dir: Path = ANCHOR_BIN) -> list[str] | None:
    if model["framework"] != "tf":
        return None
    return [str(bin_dir / "python"), "-m", "tf2onnx.convert", "--graphdef", model["source"],
            "--inputs", ",".join(model["inputs"]), "--outputs", ",".join(model["outputs"]),
            "--output", str(out)]


def floor_command(ours_out: Path, out: Path, bin_dir: Path = PROJECT_BIN) -> list[str]:
    return [str(bin_dir / "python"), "-c", FLOOR_SCRIPT, str(ours_out), str(out)]


def fmt_seconds(s: dict) -> str:
    if not s or s.get("median") is None:
        return "-"
    return f"{s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f})"


def fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


def fmt_mb(kb: float | None) -> str:
    return "-" if kb is None else f"{kb / 1024:.0f}"


def target_checks(name: str, tools: dict, model_bytes: int) -> dict[str, bool]:
    """Which of the issue's targets this model meets ({} when ours did not run)."""
    ours = tools.get("ours", {})
    seconds = ours.get("seconds", {}).get("median")
    rss_kb = ours.get("rss_kb", {}).get("max")
    if seconds is None:
        return {}
    checks: dict[str, bool] = {}
    target = TARGETS.get(name, {})
    if "seconds" in target:
        checks[f"<= {target['seconds']} s"] = seconds <= target["seconds"]
    if "rss_x" in target and rss_kb is not None and model_bytes:
        checks[f"RSS <= {target['rss_x']}x"] = rss_kb * 1024 <= target["rss_x"] * model_bytes
    floor = tools.get("floor", {}).get("seconds", {}).get("median")
    if floor:
        checks[f"<= {FLOOR_X}x floor"] = seconds <= FLOOR_X * floor
    return checks


def markdown_table(results: dict) -> str:
    """The README table: one row per model; time = median (min-max) seconds, RSS = peak MB."""
    m = results["machine"]
    lines = [
        (f"Measured {results['date']} on {m['cpu']} ({m['cores']} cores, "
         f"{m['ram_gb']:.0f} GB RAM), Python {m['python']}; {results['runs']} timed runs per tool"
         " after one warm-up; time = median (min-max) s of the whole process, RSS = peak"
         " resident MB."
         + (f" Ours ran from the patched tree {results['ours_pythonpath']}."
            if results.get("ours_pythonpath") else "")),
        "",
        ("| model | size MB | ours s | ours RSS MB (x size) | floor s | ours/floor"
         " | ovc s / RSS MB | ours/ovc | tf2onnx s / RSS MB | ours/tf2onnx | targets |"),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, entry in results["models"].items():
        if not entry.get("available", True):
            lines.append(f"| {name} | - | unavailable: {entry.get('reason', '')} |"
                         " | | | | | | | |")
            continue
        tools = entry["tools"]
        size = entry["bytes"]
        ours = tools.get("ours", {})
        ours_s = ours.get("seconds", {}).get("median")
        rss = ours.get("rss_kb", {}).get("max")
        rss_cell = "-" if rss is None else f"{fmt_mb(rss)} ({rss * 1024 / size:.2f}x)"
        cells = [name, f"{size / 1e6:.0f}", _cell(ours), rss_cell,
                 _cell(tools.get("floor")), fmt_ratio(_median_ratio(ours_s, tools.get("floor")))]
        for anchor in ("ovc", "tf2onnx"):
            t = tools.get(anchor)
            both = "-" if not t else (
                f"{_cell(t)} / {fmt_mb(t.get('rss_kb', {}).get('max'))}" if not t.get("error")
                else "failed")
            cells += [both, fmt_ratio(_median_ratio(ours_s, t))]
        checks = entry.get("targets", {})
        cells.append(", ".join(f"{k} {'ok' if v else 'MISSED'}" for k, v in checks.items())
                     or "-")
        lines.append("| " + " | ".join(cells) + " |")
    loads = [f"{n} {e['load_avg_before'][0]:.1f}-{e['load_avg_after'][0]:.1f}"
             for n, e in results["models"].items() if "load_avg_before" in e]
    if loads:
        lines += ["", "Machine load (1-min load average before-after each model): "
                  + ", ".join(loads) + "."]
    errors = [(n, t, e["error"]) for n, entry in results["models"].items()
              for t, e in entry.get("tools", {}).items() if e.get("error")]
    if errors:
        lines += ["", "Failures:"]
        lines += [f"- {n} / {t}: {err}" for n, t, err in errors]
    return "\n".join(lines) + "\n"


def _cell(tool: dict | None) -> str:
    if not tool:
        return "-"
    if tool.get("error") and not tool.get("samples"):
        return "failed"
    return fmt_seconds(tool.get("seconds", {}))


def _median_ratio(ours_s: float | None, tool: dict | None) -> float | None:
    if not tool or tool.get("error"):
        return None
    return ratio(ours_s, tool.get("seconds", {}).get("median"))


# -- measuring -----------------------------------------------------------------------------------


@dataclass
class Sample:
    seconds: float
    rss_kb: int
    returncode: int
    stderr_tail: str = ""


def measure(cmd: list[str], timeout: float, env: dict | None = None) -> Sample:
    """Run one fresh process; wall time to exit and its own peak RSS (kB, from wait4)."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        err.seek(0)
        tail = err.read().decode(errors="replace")[-2000:]
    if proc.returncode == -9 and seconds >= timeout:
        tail = f"timed out after {timeout:.0f} s"
    return Sample(seconds, usage.ru_maxrss, proc.returncode, tail)


def failure_text(sample: Sample) -> str:
    """One line on why a run failed: a signal (with the peak RSS it reached) or its stderr."""
    if sample.returncode < 0:
        how = {-9: "killed (SIGKILL: out of memory or timeout)", -15: "terminated (SIGTERM)"}.get(
            sample.returncode, f"killed by signal {-sample.returncode}")
        return (f"{how} after {sample.seconds:.0f} s at {sample.rss_kb / 1024:.0f} MB peak RSS; "
                f"{sample.stderr_tail.strip().splitlines()[-1][-200:] if sample.stderr_tail.strip() else ''}")
    lines = [ln for ln in sample.stderr_tail.strip().splitlines() if ln.strip()]
    return f"exit {sample.returncode}: " + " / ".join(lines[-3:])[-400:]


@dataclass
class ToolRun:
    name: str
    build: object  # (out_dir) -> list[str] | None
    samples: list[Sample] = field(default_factory=list)
    error: str = ""

    def record(self, sample: Sample) -> None:
        if sample.returncode != 0:
            self.error = failure_text(sample)
        else:
            self.samples.append(sample)

    def to_dict(self, command: list[str] | None) -> dict:
        return {
            "command": command,
            "samples": [s.__dict__ for s in self.samples],
            "seconds": summarize([s.seconds for s in self.samples]),
            "rss_kb": summarize([s.rss_kb for s in self.samples]),
            "error": self.error,
        }


def anchors_available() -> dict[str, str]:
    """Anchor name -> version, for those installed in benchmarks/.venv-anchors."""
    found = {}
    if (ANCHOR_BIN / "ovc").exists():
        found["ovc"] = _version("openvino")
    if (ANCHOR_BIN / "python").exists() and _version("tf2onnx"):
        found["tf2onnx"] = _version("tf2onnx")
    return found


def _version(package: str) -> str:
    script = f"import importlib.metadata as m; print(m.version('{package}'))"
    try:
        out = subprocess.run([str(ANCHOR_BIN / "python"), "-c", script], capture_output=True,
                             text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def bench_model(model: dict, anchors: list[str], runs: int, timeout: float,
                work: Path, via: str = "cli", skip: dict | None = None,
                ours_pythonpath: str = "") -> dict:
    """Warm-up round, then ``runs`` rotated rounds; one ToolRun dict per tool."""
    shutil.rmtree(work, ignore_errors=True)  # a stale output of ours must not feed the floor
    work.mkdir(parents=True, exist_ok=True)
    ours_out = work / "ours" / "model.onnx"
    builders = {
        "ours": lambda d: ours_command(model, ours_out, via=via),
        "floor": lambda d: floor_command(ours_out, d / "model.onnx"),
        "ovc": lambda d: ovc_command(model, d) if "ovc" in anchors else None,
        "tf2onnx": lambda d: tf2onnx_command(model, d / "model.onnx")
        if "tf2onnx" in anchors else None,
    }
    tools = {n: ToolRun(n, b) for n, b in builders.items() if b(work / n) is not None}
    for (tool, name), why in (skip or {}).items():
        if name == model["name"] and tool in tools:
            tools[tool].error = why
    commands = {n: t.build(work / n) for n, t in tools.items()}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    ours_env = dict(env, PYTHONPATH=ours_pythonpath) if ours_pythonpath else env
    for round_no, order in enumerate(schedule(list(tools), runs + 1)):
        for name in (list(tools) if round_no == 0 else order):
            tool = tools[name]
            if tool.error:
                continue
            if name == "floor" and not ours_out.exists():
                tool.error = "no output of ours to load and save"
                continue
            out_dir = work / name
            if name != "ours":
                shutil.rmtree(out_dir, ignore_errors=True)
            out_dir.mkdir(parents=True, exist_ok=True)
            sample = measure(commands[name], timeout, ours_env if name == "ours" else env)
            if round_no == 0:
                if sample.returncode != 0:
                    tool.record(sample)
            else:
                tool.record(sample)
            print(f"  {model['name']:18s} {name:8s} round {round_no}: {sample.seconds:7.2f} s "
                  f"{sample.rss_kb / 1024:7.0f} MB" + ("" if sample.returncode == 0 else
                                                        f"  FAILED ({sample.returncode})"),
                  flush=True)
    for name in tools:
        if name != "ours":
            shutil.rmtree(work / name, ignore_errors=True)
    return {n: t.to_dict(commands[n]) for n, t in tools.items()}


# -- machine, profile, main ----------------------------------------------------------------------


def machine_info() -> dict:
    cpu = platform.processor() or platform.machine()
    ram_kb = 0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram_kb = int(line.split()[1])
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gb": ram_kb / 1024 / 1024,
            "python": platform.python_version(), "os": platform.platform()}


def profile(model: dict, work: Path, tool: str = "cprofile") -> Path:
    """Profile one conversion of ours (through the API, the CLI's only work) with cProfile
    (project venv) or py-spy (anchors venv); the API script is a file so both can run it."""
    work.mkdir(parents=True, exist_ok=True)
    script = work / "convert_for_profile.py"
    script.write_text(API_SCRIPT)
    args = [str(script), model["source"], str(work / "profiled.onnx"), model.get("weights") or ""]
    python = str(PROJECT_BIN / "python")
    if tool == "py-spy":
        out = work / f"{model['name']}.speedscope.json"
        subprocess.run([str(ANCHOR_BIN / "py-spy"), "record", "--rate", "500", "--format",
                        "speedscope", "-o", str(out), "--", python, *args], check=True)
        return out
    out = work / f"{model['name']}.prof"
    subprocess.run([python, "-m", "cProfile", "-o", str(out), *args], check=True)
    import pstats

    for key in ("tottime", "cumulative"):
        print(f"--- {model['name']}: top 30 by {key}")
        pstats.Stats(str(out)).sort_stats(key).print_stats(30)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="*", default=None,
                        help=f"default: all but onnx_big ({', '.join(bench_models.MODEL_NAMES)})")
    parser.add_argument("--runs", type=int, default=5, help="timed rounds per model")
    parser.add_argument("--scale", action="store_true",
                        help="also the > 2 GB scale case (onnx_big; floor only, --scale-runs)")
    parser.add_argument("--scale-runs", type=int, default=1)
    parser.add_argument("--anchors", nargs="*", default=None,
                        help="anchors to run (default: all installed: ovc tf2onnx)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per process")
    parser.add_argument("--cache", type=Path, default=bench_models.DEFAULT_CACHE)
    parser.add_argument("--corpus", type=Path, default=bench_models.DEFAULT_CORPUS)
    parser.add_argument("--output", type=Path, default=None,
                        help="JSON path (default benchmarks/results/<stamp>.json)")
    parser.add_argument("--unsafe-anchors", action="store_true",
                        help="also run anchor/model pairs known to exhaust memory here")
    parser.add_argument("--ours-pythonpath", default="",
                        help="PYTHONPATH for ours only: time a patched copy of nhwc_onnx")
    parser.add_argument("--ours-via", choices=["cli", "api"], default="cli",
                        help="run ours as `nhwc-onnx convert` (default) or via nhwc_onnx.api")
    parser.add_argument("--profile", metavar="MODEL", help="profile one conversion of ours")
    parser.add_argument("--profiler", choices=["cprofile", "py-spy"], default="cprofile")
    args = parser.parse_args(argv)

    if args.profile:
        model = bench_models.make(args.profile, args.cache, args.corpus).to_dict()
        print(profile(model, RESULTS / "profiles", args.profiler))
        return 0
    names = args.models or [n for n in bench_models.MODEL_NAMES if n != "onnx_big"]
    if args.scale and "onnx_big" not in names:
        names.append("onnx_big")
    installed = anchors_available()
    anchors = [a for a in (args.anchors if args.anchors is not None else installed)
               if a in installed]
    print(f"anchors: {installed or 'none installed'}; running {anchors}", flush=True)
    stamp = dt.datetime.now(dt.timezone.utc)
    results = {"date": stamp.strftime("%Y-%m-%d %H:%M UTC"), "machine": machine_info(),
               "runs": args.runs, "ours_via": args.ours_via,
               "ours_pythonpath": args.ours_pythonpath, "anchors": installed, "models": {}}
    for name in names:
        model = bench_models.make(name, args.cache, args.corpus).to_dict()
        entry = {k: model[k] for k in ("framework", "bytes", "weight_bytes", "available",
                                       "reason")}
        if model["available"]:
            entry["load_avg_before"] = os.getloadavg()
            big = name == "onnx_big"
            entry["tools"] = bench_model(model, [] if big else anchors,
                                         args.scale_runs if big else args.runs, args.timeout,
                                         RESULTS / "work" / name, args.ours_via,
                                         {} if args.unsafe_anchors else UNSAFE_ANCHORS,
                                         args.ours_pythonpath)
            size = model["weight_bytes"] if big else model["bytes"]
            entry["targets"] = target_checks(name, entry["tools"], size)
            entry["load_avg_after"] = os.getloadavg()
        results["models"][name] = entry
    out = args.output or RESULTS / f"{stamp.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    table = markdown_table(results)
    out.with_suffix(".md").write_text(table)
    print(table)
    print(f"results: {out} and {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
