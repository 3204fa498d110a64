"""Statistics, target checks and the markdown table of benchmark results (no I/O here)."""
from __future__ import annotations

import os
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Targets (2-core machine). Issue 16 (speed round 2): absolute seconds, ours/ovc, and for
# every model ours <= 1.5x the load+save floor and peak RSS <= 1.5x its bytes + 100 MB.
# Issue 10's absolute bounds for the Caffe models still hold and are kept.
TARGETS = {
    "keras_resnet50": {"seconds": 0.6, "ovc_x": 0.4},
    "keras_mobilenetv2": {"seconds": 0.3},
    "keras_vgg16": {"seconds": 3.5},
    "caffe_resnet50": {"seconds": 1.5},
    "caffe_vgg16": {"seconds": 6.0},
}
FLOOR_X = 1.5  # any model: ours <= 1.5x the load+save floor
RSS_X, RSS_PLUS_MB = 1.5, 100  # any model: peak RSS <= 1.5x its bytes + 100 MB

# Commands other than convert (issue 16): start-up and `check`, seconds and RSS x file size.
COMMAND_TARGETS = {
    "help": {"seconds": 0.15},
    "check_small": {"seconds": 0.15},
    "check_100mb": {"seconds": 0.3, "rss_x": 1.2},
}


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


def relative_to_root(arg: str, root: Path = ROOT) -> str:
    """A command argument with this checkout's path removed (results are committed)."""
    prefix = f"{root}{os.sep}"
    return arg.replace(prefix, "") if prefix in arg else arg


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
    if rss_kb is not None and model_bytes:
        limit = RSS_X * model_bytes + RSS_PLUS_MB * 2**20
        checks[f"RSS <= {RSS_X}x+{RSS_PLUS_MB}MB"] = rss_kb * 1024 <= limit
    floor = tools.get("floor", {}).get("seconds", {}).get("median")
    if floor:
        checks[f"<= {FLOOR_X}x floor"] = seconds <= FLOOR_X * floor
    ovc = tools.get("ovc", {})
    ovc_s = ovc.get("seconds", {}).get("median")
    if "ovc_x" in target and ovc_s and not ovc.get("error"):
        checks[f"<= {target['ovc_x']}x ovc"] = seconds <= target["ovc_x"] * ovc_s
    return checks


def command_checks(name: str, tool: dict, file_bytes: int) -> dict[str, bool]:
    """Targets of one non-convert command ({} when it did not run)."""
    seconds = tool.get("seconds", {}).get("median")
    rss_kb = tool.get("rss_kb", {}).get("max")
    if seconds is None:
        return {}
    target = COMMAND_TARGETS.get(name, {})
    checks = {}
    if "seconds" in target:
        checks[f"<= {target['seconds']} s"] = seconds <= target["seconds"]
    if "rss_x" in target and rss_kb is not None and file_bytes:
        checks[f"RSS <= {target['rss_x']}x file"] = rss_kb * 1024 <= target["rss_x"] * file_bytes
    return checks


def commands_table(commands: dict) -> str:
    """Start-up and check: one row per command."""
    lines = ["| command | file MB | s | RSS MB (x file) | targets |", "|---|---|---|---|---|"]
    for entry in commands.values():
        tool, size = entry["tool"], entry.get("bytes", 0)
        rss = tool.get("rss_kb", {}).get("max")
        rss_cell = "-" if rss is None else (
            f"{fmt_mb(rss)} ({rss * 1024 / size:.2f}x)" if size > 2**20 else fmt_mb(rss))
        checks = entry.get("targets", {})
        lines.append(f"| `{entry['label']}` | {size / 1e6:.1f} | {_cell(tool)} | {rss_cell} | "
                     + (", ".join(f"{k} {'ok' if v else 'MISSED'}" for k, v in checks.items())
                        or "-") + " |")
    return "\n".join(lines) + "\n"


def markdown_table(results: dict) -> str:
    """The table of docs/benchmarks.md: one row per model; time = median (min-max) seconds, RSS =
    peak MB."""
    m = results["machine"]
    lines = [
        (f"Measured {results['date']} on {m['cpu']} ({m['cores']} cores, "
         f"{m['ram_gb']:.0f} GB RAM), Python {m['python']}; {results['runs']} timed runs per tool"
         " after one warm-up; time = median (min-max) s of the whole process, RSS = peak"
         " resident MB."
         + (f" Source {results['revision']}." if results.get("revision") else "")
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
                else _cell(t))
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
    if results.get("commands"):
        lines += ["", ("Start-up and `check` (same rounds; `check_100mb` checks our output of "
                  "keras_resnet50):"), "", commands_table(results["commands"]).rstrip("\n")]
    errors = [(n, t, e["error"]) for n, entry in results["models"].items()
              for t, e in entry.get("tools", {}).items() if e.get("error")]
    if errors:
        lines += ["", "Failed or skipped runs:"]
        lines += [f"- {n} / {t}: {err}" for n, t, err in errors]
    return "\n".join(lines) + "\n"


def _cell(tool: dict | None) -> str:
    if not tool:
        return "-"
    if tool.get("error") and not tool.get("samples"):
        return "skipped" if tool["error"].startswith("skipped") else "failed"
    return fmt_seconds(tool.get("seconds", {}))


def _median_ratio(ours_s: float | None, tool: dict | None) -> float | None:
    if not tool or tool.get("error"):
        return None
    return ratio(ours_s, tool.get("seconds", {}).get("median"))


