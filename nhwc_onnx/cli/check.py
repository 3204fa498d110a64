"""``check``: validate dialect models, for people and for CI (JSON, JUnit XML)."""
from __future__ import annotations

import os
import sys

import click

from ..errors import EXIT_INVALID, EXIT_UNREADABLE
from .common import Settings, echo


@click.command()
@click.argument("models", nargs=-1, required=True,
          help="Dialect .onnx files, folders (their *.onnx files) or quoted globs.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "junit"]), default="text",
              show_default=True, help="Human-readable report, JSON, or JUnit XML for CI.")
@click.pass_obj
def check(settings: Settings, models: tuple[str, ...], fmt: str) -> None:
    """Validate dialect models (files, folders of *.onnx, or quoted globs) against the dialect.

    Exit 0 when all are valid, 1 when any is invalid, 2 when any cannot be read.
    """
    from ..dialect.check import check_file, expand_model_paths, no_match_result, summary, to_junit

    files, unmatched = expand_model_paths([m for m in models if not _is_pipeline(m)])
    pipelines = [m for m in models if _is_pipeline(m)] + _pipelines_in(models)
    pipelines = _each_once(pipelines + _pipelines_holding(files))
    if pipelines:  # a pipeline is checked as one (its standard segments are no dialect models)
        from ..pipeline.check import check_result

        inside = [os.path.realpath(p if os.path.isdir(p) else os.path.dirname(p))
                  for p in pipelines]
        files = [f for f in files
                 if os.path.realpath(os.path.dirname(f)) not in inside]
    results = [check_file(path) for path in files] + (
        [check_result(p) for p in pipelines] if pipelines else []) + [
        no_match_result(a) for a in unmatched]
    counts = summary(results)
    if fmt == "json":
        import json

        for r in results:
            r.pop("text", None)
        echo(json.dumps({"files": results, "summary": counts}, indent=2))
    elif fmt == "junit":
        echo(to_junit(results))
    else:
        _print_check_report(results, counts, settings)
    if counts["unreadable"]:
        sys.exit(EXIT_UNREADABLE)
    if counts["invalid"] or counts.get("error"):
        sys.exit(EXIT_INVALID)


def _is_pipeline(path: str) -> bool:
    """A pipeline's folder or its pipeline.json (told without importing the pipeline code,
    which a plain check never needs)."""
    return (os.path.isdir(path) and os.path.isfile(os.path.join(path, "pipeline.json"))) or (
        os.path.basename(path) == "pipeline.json" and os.path.isfile(path))


def _each_once(pipelines: list[str]) -> list[str]:
    """Each pipeline once, under the first name that reaches it (its folder or its json)."""
    seen: set[str] = set()
    unique = []
    for p in pipelines:
        key = os.path.realpath(p if os.path.isdir(p) else os.path.dirname(p))
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def _pipelines_holding(files: list[str]) -> list[str]:
    """The folders of pipelines that list some of ``files`` as segments (a glob such as
    'DIR/*.onnx' reaching into a pipeline): such a file is checked as its pipeline says, so
    the pipeline is checked as one."""
    found: list[str] = []
    for folder in dict.fromkeys(os.path.dirname(f) or os.curdir for f in files):
        if not _is_pipeline(folder):
            continue
        from ..errors import ModelLoadError
        from ..pipeline.manifest import read_manifest

        try:
            listed = {seg.file for seg in read_manifest(folder).segments}
        except ModelLoadError:
            listed = set()
        if any(os.path.basename(f) in listed for f in files
               if (os.path.dirname(f) or os.curdir) == folder):
            found.append(folder)
    return found


def _pipelines_in(models) -> list[str]:
    """Pipeline folders below the folders given (not themselves pipelines)."""
    found = []
    for m in models:
        if os.path.isdir(m) and not _is_pipeline(m):
            for root, dirs, names in os.walk(m, followlinks=False):
                dirs.sort()
                if "pipeline.json" in names:
                    found.append(root)
    return found


def _print_check_report(results: list[dict], counts: dict, settings: Settings) -> None:
    for r in results:
        if r["status"] in ("unreadable", "error"):
            echo(f"Error: {r['path']}: {r['error']}" if r["status"] == "error"
                 else f"Error: {r['error']}", err=True)
        elif r["status"] == "invalid":
            what = " pipeline" if r.get("kind") == "pipeline" else ""
            echo(f"{r['path']}: INVALID{what}, {len(r['issues'])} problem(s)")
            for line in r["text"]:
                echo(f"  {line}")
        elif settings.verbosity >= 0:
            what = " pipeline" if r.get("kind") == "pipeline" else ""
            echo(f"{r['path']}: valid{what} ({r['nodes']} nodes)")
    if len(results) > 1 and settings.verbosity >= 0:
        errors = f", {counts['error']} internal error(s)" if counts.get("error") else ""
        echo(f"{len(results)} files: {counts['valid']} valid, {counts['invalid']} invalid, "
             f"{counts['unreadable']} unreadable{errors}")
