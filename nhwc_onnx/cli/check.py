"""``check``: validate dialect models, for people and for CI (JSON, JUnit XML)."""
from __future__ import annotations

import sys

import click

from ..errors import EXIT_INVALID, EXIT_UNREADABLE, UsageError
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

    pipelines = [m for m in models if _is_pipeline(m)]
    if pipelines:
        from .pipeline import check_pipelines

        if len(pipelines) < len(models) or fmt == "junit":
            raise UsageError("check takes pipelines alone (text or json), not mixed with models")
        sys.exit(check_pipelines(pipelines, fmt, settings))
    files, unmatched = expand_model_paths(models)
    results = [check_file(path) for path in files] + [no_match_result(a) for a in unmatched]
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
    import os

    return (os.path.isdir(path) and os.path.isfile(os.path.join(path, "pipeline.json"))) or (
        os.path.basename(path) == "pipeline.json" and os.path.isfile(path))


def _print_check_report(results: list[dict], counts: dict, settings: Settings) -> None:
    for r in results:
        if r["status"] in ("unreadable", "error"):
            echo(f"Error: {r['path']}: {r['error']}" if r["status"] == "error"
                 else f"Error: {r['error']}", err=True)
        elif r["status"] == "invalid":
            echo(f"{r['path']}: INVALID, {len(r['issues'])} problem(s)")
            for line in r["text"]:
                echo(f"  {line}")
        elif settings.verbosity >= 0:
            echo(f"{r['path']}: valid ({r['nodes']} nodes)")
    if len(results) > 1 and settings.verbosity >= 0:
        errors = f", {counts['error']} internal error(s)" if counts.get("error") else ""
        echo(f"{len(results)} files: {counts['valid']} valid, {counts['invalid']} invalid, "
             f"{counts['unreadable']} unreadable{errors}")
