"""A split model: an exact dialect part plus a standard-ONNX remainder, run and verified as
one pipeline (``convert --split``).

``split(source, options, convert)`` partitions a source its conversion refuses
(``partition.py``) into segments that run in order: dialect models (what ``convert`` writes
for that subgraph) and standard ONNX models (the source's own nodes). ``Pipeline`` holds them
with the manifest (``manifest.py``, docs/pipeline-schema.json); ``save`` writes the folder
(all files or none), ``load`` reads one, ``run`` runs it (``run.py``), ``verify`` compares it
with the source's runtime, ``check`` (``check.py``) validates it.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidModelError, ModelLoadError, OutputPathError, UnsupportedOpError
from ..options import ConvertOptions
from .cost import samples_per_run
from .manifest import (
    DIALECT,
    MANIFEST,
    STANDARD,
    Entry,
    Manifest,
    SegmentEntry,
    is_pipeline,
    manifest_path,
    read_manifest,
)

__all__ = ["DIALECT", "MANIFEST", "STANDARD", "Pipeline", "is_pipeline", "load", "split",
           "split_summary"]


@dataclass
class Pipeline:
    """Segments in the order they run (``models``: file -> dialect ``Model`` or standard
    ``onnx.ModelProto``) and their manifest; ``report``: how the split was made."""

    manifest: Manifest
    models: dict[str, Any]
    report: dict = field(default_factory=dict)
    domain: str = "nhwc"
    weights_as_constants: bool = False
    folder: Path | None = None  # where it was saved or loaded from
    options: ConvertOptions | None = None  # what it was converted with (split), for verify
    sessions: dict = field(default_factory=dict, repr=False, compare=False)  # run.py's

    @property
    def segments(self) -> list[SegmentEntry]:
        return self.manifest.segments

    def save(self, folder: str | os.PathLike, *, source_files=()) -> Path:
        """Write the folder: pipeline.json and one .onnx file per segment, all or none.
        An existing folder is replaced only when it is empty or a pipeline written here
        (pipeline.json and segment files alone)."""
        from ..files.writes import plan_targets
        from ..serialize import save as save_dialect

        target = Path(folder)
        plan_targets([("pipeline folder", target / MANIFEST)], list(source_files))
        _check_replaceable(target)
        parent = target.parent if str(target.parent) else Path(".")
        try:
            parent.mkdir(parents=True, exist_ok=True)
            temp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent))
        except OSError as exc:
            raise OutputPathError(f"{target}: cannot create the pipeline folder "
                                  f"({exc.strerror or exc})") from None
        old = None
        try:
            for seg in self.segments:
                model = self.models[seg.file]
                if seg.kind == DIALECT:
                    save_dialect(model, temp / seg.file, domain=self.domain,
                                 weights_as_constants=self.weights_as_constants)
                else:
                    (temp / seg.file).write_bytes(model.SerializeToString(deterministic=True))
            (temp / MANIFEST).write_text(self.manifest.to_json(), encoding="utf-8")
            os.chmod(temp, 0o777 & ~_umask())
            if target.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old",
                                            dir=parent))
                os.rmdir(old)
                os.replace(target, old)
            os.replace(temp, target)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            if old is not None and not target.exists():
                os.replace(old, target)
                old = None
            raise
        finally:
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        self.folder = target
        return target

    def run(self, feeds, extra_outputs=()) -> dict:
        """The pipeline's outputs for ``feeds`` (pipeline input name -> array, in the
        pipeline's layout); ``extra_outputs``: tensors passed between segments too."""
        from .run import run_pipeline

        return run_pipeline(self, feeds, extra_outputs)

    def verify(self, source, options: ConvertOptions | None = None, **settings):
        """Compare with ``source`` in its own runtime (see ``pipeline.verify``); ``options``
        default to those the pipeline was converted with (a Caffe source's weights ...)."""
        from .verify import verify_pipeline

        return verify_pipeline(source, self, options or self.options or ConvertOptions(),
                               **settings)

    def costs(self) -> dict:
        """MACs and parameter bytes per segment and in all, the share of MACs in dialect
        segments and the bytes passed between segments per sample."""
        return costs_of(self.manifest)

    def info(self) -> dict:
        data = {"file": str(self.folder) if self.folder else None, "format": "nhwc-onnx pipeline",
                "inputs": [e.to_dict() for e in self.manifest.inputs],
                "outputs": [e.to_dict() for e in self.manifest.outputs],
                "segments": [{"file": s.file, "kind": s.kind, "nodes": _nodes(self.models[s.file]),
                              "inputs": [e.name for e in s.inputs],
                              "outputs": [e.name for e in s.outputs],
                              "macs": s.macs, "parameter_bytes": s.parameter_bytes}
                             for s in self.segments]}
        data.update(self.costs())
        data["notes"] = list(self.manifest.extra.get("notes", []))
        return data


def _nodes(model) -> int:
    graph = model.graph
    return len(graph.node) if hasattr(graph, "node") else len(graph)


def costs_of(manifest: Manifest) -> dict:
    macs = [s.macs or 0 for s in manifest.segments]
    total = sum(macs)
    dialect = sum(m for m, s in zip(macs, manifest.segments) if s.kind == DIALECT)
    produced = {e.name: e for s in manifest.segments for e in s.outputs}
    passed = {e.name: produced[e.name] for s in manifest.segments for e in s.inputs
              if e.name in produced}
    return {"macs": total, "parameter_bytes": sum(s.parameter_bytes or 0
                                                  for s in manifest.segments),
            "dialect_mac_share": (dialect / total) if total else None,
            "bytes_between_segments_per_sample": sum(_run_bytes(e) for e in passed.values())
            // samples_per_run(manifest.inputs[0].shape if manifest.inputs else None),
            "segments_by_kind": {k: sum(1 for s in manifest.segments if s.kind == k)
                                 for k in (DIALECT, STANDARD)}}


def _run_bytes(e: Entry) -> int:
    """Bytes of one tensor in a run (a symbolic batch at 1)."""
    import numpy as np

    dims = [1 if isinstance(d, str) else int(d) for d in e.shape]
    return int(np.prod(dims, dtype=np.int64)) * np.dtype(e.dtype).itemsize


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _check_replaceable(target: Path) -> None:
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise OutputPathError(f"{target}: exists and is not a folder; --split writes a folder "
                              "(pipeline.json and its segments)")
    if not target.exists():
        return
    entries = list(target.iterdir())
    if not entries:
        return
    if not (target / MANIFEST).is_file():
        raise OutputPathError(f"{target}: a folder that holds files but no pipeline.json; "
                              "nothing is replaced there (name a new or empty folder)")
    try:
        listed = {s.file for s in read_manifest(target).segments}
    except ModelLoadError:
        listed = set()
    foreign = [p.name for p in entries if p.name != MANIFEST and p.name not in listed
               and not (p.name.endswith(".data") and p.name[:-5] in listed)]
    if foreign:
        raise OutputPathError(f"{target}: holds files that are not part of its pipeline "
                              f"({', '.join(sorted(foreign)[:3])}); nothing is replaced there")


def load(path: str | os.PathLike) -> Pipeline:
    """A pipeline from its folder or its pipeline.json; segment files are read, not checked
    (``check`` does that)."""
    from .check import load_segment

    manifest = read_manifest(path)
    folder = manifest_path(path).parent
    problems = manifest.problems()
    if problems:
        raise InvalidModelError(f"{manifest_path(path)}: not a runnable pipeline: "
                                + "; ".join(problems))
    models = {seg.file: load_segment(folder / seg.file, seg.kind) for seg in manifest.segments}
    return Pipeline(manifest, models, folder=folder)


def split(source, framework, options: ConvertOptions, convert) -> Pipeline:
    """Convert ``source`` as a pipeline. ``convert(options, path=source)`` converts it (or
    the ONNX file ``path``) with other options and returns ``(Model, report)`` (raising like
    ``api.convert``). A source that converts whole is one dialect segment, the model plain
    ``convert`` writes. A refused TF or Caffe source is split through its core ops
    (``through_core.py``)."""
    t0 = time.perf_counter()
    try:
        model, report = convert(options.replace(exact_cut=False))
    except UnsupportedOpError as refusal:
        if framework.name == "onnx":
            pipeline = _split_onnx(source, options, refusal, convert)
        else:
            from .through_core import split_through_core

            pipeline = split_through_core(source, framework, options, convert,
                                          split_onnx=_split_onnx, whole=whole)
    else:
        pipeline = whole(model, report, source)
    pipeline.domain = options.domain
    pipeline.options = options
    pipeline.weights_as_constants = options.weights_as_constants
    pipeline.report["seconds"] = time.perf_counter() - t0
    return pipeline


def whole(model, report, source) -> Pipeline:
    """The pipeline of a model that converts whole: one dialect segment, that model."""
    from .cost import dialect_costs

    macs, params = dialect_costs(model)
    file = "00_dialect.onnx"
    inputs = [_entry_of(v, model) for v in model.graph.inputs]
    outputs = [_entry_of(v, model) for v in model.graph.outputs]
    manifest = Manifest(inputs, outputs, [SegmentEntry(file, DIALECT, inputs, outputs,
                                                       macs, params)],
                        {"source": os.path.basename(str(source)), "notes": []})
    return Pipeline(manifest, {file: model}, {"conversion": report.to_dict()})


def _entry_of(value, model) -> Entry:
    perm = model.io_permutations.get(value.name)
    if perm is not None and list(perm) == list(range(len(perm))):
        perm = None
    return Entry(value.name, list(value.shape or []), value.dtype or "float32",
                 None if perm is None else [int(p) for p in perm])


def _split_onnx(source, options: ConvertOptions, refusal: UnsupportedOpError,
                convert) -> Pipeline:
    from .cost import dialect_costs, standard_costs
    from .partition import (
        check_split_options,
        entry,
        partition,
        standard_segment,
        tensor_layouts,
    )

    part = partition(str(source), options, refusal, lambda o: convert(o)[0])
    check_split_options(part.source, part, options)
    layouts = tensor_layouts(part, options)
    models, segments = {}, []
    for k, seg in enumerate(part.segments):
        file = f"{k:02d}_{seg.kind}.onnx"
        if seg.kind == DIALECT:
            model = part.converted[k]
            inputs = [entry(part.source, t, layouts[t], options) for t in seg.inputs]
            outputs = [entry(part.source, t, layouts[t], options) for t in seg.outputs]
            _, params = dialect_costs(model)
        else:
            model, inputs, outputs = standard_segment(part.source, seg, layouts, options,
                                                      f"segment_{k}")
            params = standard_costs(model)
        macs = sum(part.source.macs(i) for i in seg.nodes) // part.source.samples_per_run()
        models[file] = model
        segments.append(SegmentEntry(file, seg.kind, inputs, outputs, macs, params))
    manifest = Manifest(
        [entry(part.source, t, layouts.get(t), options) for t in part.source.inputs
         if any(t in s.inputs for s in part.segments)],
        [entry(part.source, t, layouts.get(t), options) for t in part.source.outputs],
        segments, {"source": os.path.basename(str(source)), "notes": list(part.notes),
                   **({"source_names": {new: old for old, new in options.rename.items()}}
                      if options.rename else {})})
    problems = manifest.problems()
    if problems:  # a partition that does not run is a bug here, never a model to write
        raise AssertionError("the split's manifest is inconsistent: " + "; ".join(problems))
    return Pipeline(manifest, models, {"refused": part.refused, "notes": list(part.notes)})


def split_summary(pipeline: Pipeline) -> str:
    """One line: segments by kind, the dialect share of MACs, bytes passed per sample."""
    c = pipeline.costs()
    kinds = c["segments_by_kind"]
    share = ("no multiply-accumulates" if c["dialect_mac_share"] is None
             else f"{100 * c['dialect_mac_share']:.1f}% of {c['macs']:,} MACs in dialect segments")
    return (f"{len(pipeline.segments)} segment(s) ({kinds[DIALECT]} dialect, {kinds[STANDARD]} "
            f"standard ONNX), {share}, {c['bytes_between_segments_per_sample']:,} bytes passed "
            "between segments per sample")
