"""The commands on a pipeline (``convert --split`` and a pipeline folder given to ``run``,
``check``, ``info``, ``verify`` and ``lower``): parse, call ``nhwc_onnx.pipeline``, print."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import EXIT_OK, EXIT_VERIFY_FAILED, UsageError
from .common import Settings, echo


def convert_split(settings: Settings, source: str, output: str, options, *, do_verify: bool,
                  atol: float, rtol: float, layers: bool, samples: int,
                  report_path: str | None, format_verification) -> int:
    """``convert SOURCE --split -o FOLDER``: the exit code."""
    from ..api import convert as api_convert
    from ..api import source_files
    from ..files.writes import plan_targets, write_json
    from ..pipeline import MANIFEST, Pipeline, split_summary

    targets = [("pipeline folder", Path(output) / MANIFEST)]
    if report_path:
        targets.append(("report", Path(report_path)))
    plan_targets(targets, source_files(source, options))
    verdict = {}

    def verify_first(pipeline) -> bool:
        verdict["report"] = pipeline.verify(source, options, atol=atol, rtol=rtol,
                                            layers=layers, samples=samples)
        return verdict["report"].ok

    pipeline = api_convert(source, output, options, split=True,
                           before_write=verify_first if do_verify else None)
    assert isinstance(pipeline, Pipeline)  # what convert(split=True) returns
    verification = verdict.get("report")
    written = verification is None or verification.ok
    if report_path:
        data = {"source": source, "output": output if written else None,
                "status": "split", "pipeline": pipeline.manifest.to_dict(),
                **pipeline.report, **pipeline.costs()}
        if verification is not None:
            data["verification"] = verification.to_dict()
        write_json(Path(report_path), data, role="report")
    if settings.verbosity >= 0:
        echo(f"{source} -> {output if written else 'nothing written'} (pipeline, "
             f"{pipeline.report.get('seconds', 0.0):.2f} s)")
        echo(f"  split: {split_summary(pipeline)}")
        echo(format_segments(pipeline.info()))
        for note in pipeline.manifest.extra.get("notes", []):
            echo(f"  note: {note}")
        if verification is not None:
            echo(format_verification(verification))
    if verification is not None and not verification.ok:
        echo(f"Error: verification failed, so {output} was not written", err=True)
        return EXIT_VERIFY_FAILED
    return EXIT_OK


def format_segments(data: dict) -> str:
    lines = []
    for k, seg in enumerate(data["segments"]):
        kind = "dialect " if seg["kind"] == "dialect" else "standard"
        macs = f"{seg['macs']:,} MACs" if seg.get("macs") is not None else "MACs ?"
        params = (f"{seg['parameter_bytes']:,} parameter bytes"
                  if seg.get("parameter_bytes") is not None else "")
        lines.append(f"  segment {k} {kind} {seg['file']}: {seg['nodes']} nodes, {macs}, "
                     f"{params}; {', '.join(seg['inputs'])} -> {', '.join(seg['outputs'])}")
    return "\n".join(lines)


def info_pipeline(path: str, fmt: str) -> None:
    from ..pipeline import load, split_summary

    pipeline = load(path)
    data = pipeline.info()
    if fmt == "json":
        echo(json.dumps(data, indent=2))
        return
    lines = [f"{data['file']}: nhwc-onnx pipeline, {split_summary(pipeline)}"]
    for kind in ("inputs", "outputs"):
        for e in data[kind]:
            shape = " x ".join(str(d) for d in e["shape"]) or "scalar"
            perm = f" (permuted {e['permutation']})" if e["permutation"] else ""
            lines.append(f"  {kind[:-1]:6} {e['name']}: {e['dtype']} {shape}{perm}")
    lines.append(format_segments(data))
    lines += [f"  note: {n}" for n in data["notes"]]
    echo("\n".join(lines))


def run_pipeline(settings: Settings, path: str, files: dict, random_inputs: bool, seed: int,
                 batch: int | None, output_dir: str | None, intermediate, summary_line) -> None:
    import numpy as np

    from ..dialect.run_lower import plan_arrays, write_arrays
    from ..files.npy import load_npy
    from ..pipeline import load
    from ..runtime import at_batch

    pipeline = load(path)
    feeds = {name: load_npy(file) for name, file in files.items()}
    rng = np.random.default_rng(seed)
    for e in pipeline.manifest.inputs:
        if e.name in feeds:
            continue
        if not random_inputs:
            raise UsageError(f"no array for input {e.name!r}: give --input {e.name}=FILE.npy "
                             "or --random", param_hint="--input")
        size = batch or next((np.shape(a)[0] for n, a in feeds.items() if np.ndim(a)), 1)
        feeds[e.name] = rng.standard_normal(at_batch(e.shape, size)).astype(e.dtype)
    folder = pipeline.folder
    if output_dir:
        out_dir = Path(output_dir)
    else:
        assert folder is not None  # a pipeline read from its folder knows it
        out_dir = Path(f"{folder.name}_outputs")
    names = [e.name for e in pipeline.manifest.outputs] + list(intermediate)
    paths = plan_arrays(list(dict.fromkeys(names)), out_dir,
                        inputs=[Path(f) for f in files.values()])
    outputs = pipeline.run(feeds, [t for t in intermediate
                                   if t not in {e.name for e in pipeline.manifest.outputs}])
    written = write_arrays(outputs, paths)
    if settings.verbosity >= 0:
        for name, array in feeds.items():
            echo(f"input  {summary_line(name, array)}")
        for name, array in outputs.items():
            echo(f"output {summary_line(name, array)} -> {written[name]}")


def verify_pipeline(source: str, path: str, options, feeds, atol: float, rtol: float,
                    layers: bool, samples: int, fmt: str, format_verification,
                    html_path: str | None = None) -> int:
    from ..pipeline import load

    pipeline = load(path)
    report = pipeline.verify(source, options, feeds=feeds, atol=atol, rtol=rtol,
                             layers=layers, samples=samples)
    if html_path:
        from ..verification.html import write_html

        write_html(Path(html_path), report)
    if fmt == "json":
        echo(json.dumps(report.to_dict(), indent=2))
    else:
        echo(format_verification(report))
    return EXIT_OK if report.ok else EXIT_VERIFY_FAILED


def lower_pipeline(settings: Settings, path: str, output: str) -> None:
    from ..pipeline import load
    from ..pipeline.lower import save_lowered_pipeline

    pipeline = load(path)
    proto = save_lowered_pipeline(pipeline, output, [pipeline.folder])
    if settings.verbosity >= 0:
        echo(f"{path} -> {output}: standard ONNX opset {proto.opset_import[0].version}, "
             f"{len(proto.graph.node)} nodes, from {len(pipeline.segments)} segments")
