"""Time `nhwc-onnx convert` end to end, next to the anchor converters and the load+save floor.

    .venv/bin/python benchmarks/run.py                       # every model, 5 rounds
    .venv/bin/python benchmarks/run.py --models keras_resnet50 --runs 3
    .venv/bin/python benchmarks/run.py --profile caffe_vgg16  # cProfile of one conversion

Each measurement is one fresh process: wall time from start to exit (the output file written),
peak RSS from the kernel's rusage of that process. Tools run in rounds, the order rotating and
reversing from round to round, so drift of the machine and the after-effects of one tool hit
every tool alike, with a short pause before each process. One untimed warm-up round first
fills the page cache and writes our output, which the floor (a process that only
``onnx.load``s and ``onnx.save``s that output) needs. Results: benchmarks/results/<stamp>.json
and .md.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
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
from report import (  # noqa: F401  (re-exported for the smoke test)
    COMMAND_TARGETS,
    FLOOR_X,
    TARGETS,
    command_checks,
    fmt_mb,
    fmt_ratio,
    fmt_seconds,
    markdown_table,
    ratio,
    relative_to_root,
    summarize,
    target_checks,
)

PROJECT_BIN = ROOT / ".venv" / "bin"
ANCHOR_BIN = HERE / ".venv-anchors" / "bin"
RESULTS = HERE / "results"

# Anchor runs that endanger a shared machine; --unsafe-anchors runs them anyway.
UNSAFE_ANCHORS = {
    ("tf2onnx", "keras_vgg16"): "skipped: tf2onnx 1.17 was killed by the kernel's OOM killer "
                                "at 18 GB anonymous RSS on this 24 GB machine",
}

# Load + save of our output. Over 2 GB (no single protobuf can hold it) the weights go to
# external data, as ours does; the size is summed per tensor since the whole cannot be measured.
FLOOR_SCRIPT = (
    "import sys, onnx\n"
    "m = onnx.load(sys.argv[1])\n"
    "big = sum(t.ByteSize() for t in m.graph.initializer) > 2**31 - 2**26\n"
    "onnx.save(m, sys.argv[2], save_as_external_data=big)\n"
)


# -- pure helpers (unit-tested in tests/test_benchmarks_smoke.py) ---------------------------------


def schedule(tools: list[str], rounds: int) -> list[list[str]]:
    """Tool order per round: rotated by one every two rounds, reversed on odd rounds
    (A B C D, D C B A, B C D A, A D C B, ...).

    Rotation alone keeps cyclic neighbours: ours would always run right after the same tool
    (after tf2onnx's 5 GB exit, measurably slower). Reversal varies the predecessor too. The
    caller runs round 0 (the warm-up) in the given order, so ours precedes the floor there.
    """
    if not tools:
        return [[] for _ in range(rounds)]
    out = []
    for r in range(rounds):
        k = (r // 2) % len(tools)
        order = tools[k:] + tools[:k]
        out.append(order[::-1] if r % 2 else order)
    return out


API_SCRIPT = (
    "import sys\n"
    "from nhwc_onnx.api import convert\n"
    "from nhwc_onnx.options import ConvertOptions\n"
    "convert(sys.argv[1], sys.argv[2], options=ConvertOptions(weights=sys.argv[3] or None))\n"
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


# -- measuring -----------------------------------------------------------------------------------


@dataclass
class Sample:
    seconds: float
    rss_kb: int
    returncode: int
    stderr_tail: str = ""


GNU_TIME = "/usr/bin/time"


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended on its own just now
        os.killpg(pid, signal.SIGKILL)


def measure(cmd: list[str], timeout: float, env: dict | None = None) -> Sample:
    """Run one fresh process; wall time to exit and its own peak RSS (kB).

    Linux carries a forking parent's resident size into the child's ru_maxrss (the copied
    address space counts until exec), so a large parent inflates wait4's number; GNU time
    forks the command from its own small process and reports the command's real peak.
    """
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as rss_file:
        use_time = os.path.exists(GNU_TIME)
        if use_time:
            cmd = [GNU_TIME, "-f", "%M", "-o", rss_file.name, *cmd]
        start = time.perf_counter()
        # Own process group: a timeout kills the command too, not only GNU time around it.
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env,
                                start_new_session=True)
        timer = threading.Timer(timeout, _kill_group, (proc.pid,))
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        err.seek(0)
        tail = err.read().decode(errors="replace")[-2000:]
        rss_kb = usage.ru_maxrss
        if use_time:
            text = rss_file.read().strip().splitlines()
            if text and text[-1].isdigit():
                rss_kb = int(text[-1])
            if proc.returncode != 0 and text and text[0].startswith("Command exited"):
                proc.returncode = int(text[0].rsplit(" ", 1)[-1])
    if proc.returncode == -9 and seconds >= timeout:
        tail = f"timed out after {timeout:.0f} s"
    return Sample(seconds, rss_kb, proc.returncode, tail)


def failure_text(sample: Sample) -> str:
    """One line on why a run failed: a signal (with the peak RSS it reached) or its stderr."""
    if sample.returncode < 0:
        how = {-9: "killed (SIGKILL: out of memory or timeout)", -15: "terminated (SIGTERM)"}.get(
            sample.returncode, f"killed by signal {-sample.returncode}")
        tail = sample.stderr_tail.strip()
        last = tail.splitlines()[-1][-200:] if tail else ""
        return (f"{how} after {sample.seconds:.0f} s at {sample.rss_kb / 1024:.0f} MB peak RSS; "
                f"{last}")
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
            "command": [relative_to_root(c) for c in command or []],
            "samples": [{"seconds": s.seconds, "rss_kb": s.rss_kb} for s in self.samples],
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


def clear_output(out_dir: Path, ours_out: Path | None) -> None:
    """Every tool writes into an empty place, outside the timed process. Ours keeps its folder
    (the floor reads our output) and loses only the output itself: replacing a 100 MB file
    frees the old one inside the rename, 25-30 ms on this machine's ext4, which no other tool
    paid."""
    if ours_out is None:
        shutil.rmtree(out_dir, ignore_errors=True)
    elif ours_out.is_file():
        ours_out.unlink()
    out_dir.mkdir(parents=True, exist_ok=True)


def bench_model(model: dict, anchors: list[str], runs: int, timeout: float,
                work: Path, via: str = "cli", skip: dict | None = None,
                ours_pythonpath: str = "", pause: float = 1.0) -> dict:
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
            clear_output(work / name, ours_out if name == "ours" else None)
            time.sleep(pause)  # let the kernel reclaim the previous process's memory
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


SMALL_DIALECT_MODEL = ROOT / "examples" / "tiny_convnet.onnx"


def command_cases(big_model: Path | None, bin_dir: Path = PROJECT_BIN) -> dict[str, dict]:
    """Start-up and ``check`` (issue 16): what CI runs on every commit."""
    exe = str(bin_dir / "nhwc-onnx")
    cases = {
        "help": {"label": "nhwc-onnx --help", "cmd": [exe, "--help"], "bytes": 0},
        "check_small": {"label": f"nhwc-onnx check {SMALL_DIALECT_MODEL.name}",
                        "cmd": [exe, "check", str(SMALL_DIALECT_MODEL)],
                        "bytes": SMALL_DIALECT_MODEL.stat().st_size},
    }
    if big_model is not None and big_model.exists():
        cases["check_100mb"] = {"label": "nhwc-onnx check keras_resnet50.onnx",
                                "cmd": [exe, "check", str(big_model)],
                                "bytes": big_model.stat().st_size}
    return cases


def bench_commands(cases: dict[str, dict], runs: int, timeout: float, pause: float) -> dict:
    """Warm-up, then ``runs`` rotated rounds of every command; targets per command."""
    tools = {name: ToolRun(name, None) for name in cases}
    for round_no, order in enumerate(schedule(list(cases), runs + 1)):
        for name in order:
            time.sleep(pause)
            sample = measure(cases[name]["cmd"], timeout)
            if round_no or sample.returncode != 0:
                tools[name].record(sample)
            print(f"  {name:18s} round {round_no}: {sample.seconds:7.3f} s "
                  f"{sample.rss_kb / 1024:7.0f} MB", flush=True)
    out = {}
    for name, case in cases.items():
        tool = tools[name].to_dict(case["cmd"])
        out[name] = {"label": case["label"], "bytes": case["bytes"], "tool": tool,
                     "targets": command_checks(name, tool, case["bytes"])}
    return out


def byte_compile(bin_dir: Path = PROJECT_BIN) -> None:
    """Byte-compile the measured package first, as ``pip install`` does. Without .pyc files
    (an editable install under PYTHONDONTWRITEBYTECODE=1, as on the measuring machine) every
    process recompiles ~80 modules: 0.15 s that no installed copy pays."""
    subprocess.run([str(bin_dir / "python"), "-m", "compileall", "-q", str(ROOT / "nhwc_onnx")],
                   check=True, stdout=subprocess.DEVNULL)


# -- machine, profile, main ----------------------------------------------------------------------


def source_revision() -> str:
    """The measured checkout's commit (``-dirty`` with uncommitted changes), or ''."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip()


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


def cli_env() -> dict:
    """The environment the command line gives itself (nhwc_onnx.cli._numpy_settings): the API
    script profiled must run the conversion the way `nhwc-onnx convert` does."""
    from nhwc_onnx.cli import NUMPY_ENVIRONMENT

    return {**NUMPY_ENVIRONMENT, **os.environ}


def profile(model: dict, work: Path, tool: str = "cprofile",
            save_dir: Path | None = None) -> Path:
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
                        "speedscope", "-o", str(out), "--", python, *args], check=True,
                       env=cli_env())
        return out
    out = work / f"{model['name']}.prof"
    subprocess.run([python, "-m", "cProfile", "-o", str(out), *args], check=True, env=cli_env())
    text = profile_text(out, model["name"])
    print(text)
    if save_dir is not None:
        save_dir.mkdir(parents=True, exist_ok=True)
        (save_dir / f"{model['name']}.txt").write_text(text)
    return out


def profile_text(prof: Path, name: str, top: int = 35) -> str:
    """The top functions by own time and by cumulative time, paths relative to the checkout
    and to site-packages (the text is committed)."""
    import io
    import pstats

    buf = io.StringIO()
    for key in ("tottime", "cumulative"):
        buf.write(f"--- {name}: top {top} by {key}\n")
        pstats.Stats(str(prof), stream=buf).sort_stats(key).print_stats(top)
    text = buf.getvalue().replace(f"{ROOT}{os.sep}", "")
    return re.sub(r"\S*/site-packages/", "", re.sub(r"\S*/lib/python3\.\d+/", "", text))


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """Where the benchmark models are cached and the corpus they are made from."""
    parser.add_argument("--cache", type=Path, default=bench_models.DEFAULT_CACHE)
    parser.add_argument("--corpus", type=Path, default=bench_models.DEFAULT_CORPUS)


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
    parser.add_argument("--pause", type=float, default=1.0,
                        help="seconds of idle before each measured process")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per process")
    add_model_options(parser)
    parser.add_argument("--output", type=Path, default=None,
                        help="JSON path (default benchmarks/results/<stamp>.json)")
    parser.add_argument("--unsafe-anchors", action="store_true",
                        help="also run anchor/model pairs known to exhaust memory here")
    parser.add_argument("--ours-pythonpath", default="",
                        help="PYTHONPATH for ours only: time a patched copy of nhwc_onnx")
    parser.add_argument("--ours-via", choices=["cli", "api"], default="cli",
                        help="run ours as `nhwc-onnx convert` (default) or via nhwc_onnx.api")
    parser.add_argument("--table", type=Path, metavar="JSON",
                        help="only print the markdown table of an earlier results file")
    parser.add_argument("--profile", metavar="MODEL", nargs="+",
                        help="profile conversions of ours (model names, or 'all' but onnx_big)")
    parser.add_argument("--profile-dir", type=Path, default=None,
                        help="also write each profile as text there (e.g. benchmarks/profiles)")
    parser.add_argument("--no-commands", action="store_true",
                        help="skip the start-up and check measurements")
    parser.add_argument("--profiler", choices=["cprofile", "py-spy"], default="cprofile")
    args = parser.parse_args(argv)

    if args.table:
        print(markdown_table(json.loads(args.table.read_text())))
        return 0
    if args.profile:
        byte_compile()
        names = bench_models.MODEL_NAMES[:-1] if args.profile == ["all"] else args.profile
        for name in names:
            model = bench_models.make(name, args.cache, args.corpus).to_dict()
            print(profile(model, RESULTS / "profiles", args.profiler, args.profile_dir))
        return 0
    names = args.models or [n for n in bench_models.MODEL_NAMES if n != "onnx_big"]
    if args.scale and "onnx_big" not in names:
        names.append("onnx_big")
    byte_compile()
    installed = anchors_available()
    anchors = [a for a in (args.anchors if args.anchors is not None else installed)
               if a in installed]
    print(f"anchors: {installed or 'none installed'}; running {anchors}", flush=True)
    stamp = dt.datetime.now(dt.timezone.utc)
    results = {"date": stamp.strftime("%Y-%m-%d %H:%M UTC"), "machine": machine_info(),
               "runs": args.runs, "ours_via": args.ours_via,
               "ours_pythonpath": args.ours_pythonpath, "revision": source_revision(),
               "anchors": installed, "models": {}}
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
                                         args.ours_pythonpath, args.pause)
            size = model["weight_bytes"] if big else model["bytes"]
            entry["targets"] = target_checks(name, entry["tools"], size)
            entry["load_avg_after"] = os.getloadavg()
        results["models"][name] = entry
    if not args.no_commands:
        cases = command_cases(RESULTS / "work" / "keras_resnet50" / "ours" / "model.onnx")
        load_before = os.getloadavg()
        results["commands"] = bench_commands(cases, args.runs, args.timeout, args.pause)
        results["commands_load_avg"] = [load_before, os.getloadavg()]
    write_results(results, args.output or RESULTS / f"{stamp.strftime('%Y%m%d-%H%M%S')}.json",
                  markdown_table(results))
    return 0


def write_results(results: dict, out: Path, table: str) -> None:
    """The results as JSON at ``out`` and their table beside it (.md), printed too."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    out.with_suffix(".md").write_text(table)
    print(table)
    print(f"results: {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    raise SystemExit(main())
