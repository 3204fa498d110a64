"""pipeline.json: the segments of a split model, in the order they run, and the tensors that
pass between them (docs/pipeline-schema.json).

A tensor passes between segments by name and unchanged; each entry says its shape (a string
for a symbolic batch), element type and permutation (the axes of the source's tensor as the
pipeline holds it, as ``io_permutations`` records it; None: as in the source)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ModelLoadError

FORMAT = "nhwc-onnx-pipeline"
VERSION = 1
MANIFEST = "pipeline.json"
DIALECT, STANDARD = "dialect", "onnx"
KINDS = (DIALECT, STANDARD)
MAX_MANIFEST_BYTES = 1 << 24


@dataclass
class Entry:
    name: str
    shape: list  # int, or str for a symbolic dimension
    dtype: str
    permutation: list[int] | None = None

    def to_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype,
                "permutation": None if self.permutation is None else list(self.permutation)}

    def value_info(self):
        from onnx import helper

        from ..serialize.tensors import dtype_to_onnx

        return helper.make_tensor_value_info(self.name, dtype_to_onnx(self.dtype),
                                             list(self.shape))


@dataclass
class SegmentEntry:
    file: str
    kind: str
    inputs: list[Entry]
    outputs: list[Entry]
    macs: int | None = None  # multiply-accumulates per run (when computed)
    parameter_bytes: int | None = None

    def to_dict(self) -> dict:
        data: dict[str, Any] = {"file": self.file, "kind": self.kind,
                "inputs": [e.to_dict() for e in self.inputs],
                "outputs": [e.to_dict() for e in self.outputs]}
        if self.macs is not None:
            data["macs"] = self.macs
        if self.parameter_bytes is not None:
            data["parameter_bytes"] = self.parameter_bytes
        return data


@dataclass
class Manifest:
    inputs: list[Entry]
    outputs: list[Entry]
    segments: list[SegmentEntry]
    extra: dict = field(default_factory=dict)  # source, notes (kept as read)

    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": VERSION,
                "inputs": [e.to_dict() for e in self.inputs],
                "outputs": [e.to_dict() for e in self.outputs],
                "segments": [s.to_dict() for s in self.segments], **self.extra}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def problems(self) -> list[str]:
        """What makes the manifest not a runnable pipeline: a tensor read before any segment
        produces it (a missing tensor, or segments out of order: a cycle), one produced
        twice, entries of one tensor that disagree, an output nothing produces."""
        found = []
        known = {e.name: e for e in self.inputs}
        produced_by: dict[str, str] = {e.name: "the pipeline's inputs" for e in self.inputs}
        later: dict[str, int] = {}
        for k, seg in enumerate(self.segments):
            for e in seg.outputs:
                later.setdefault(e.name, k)
        files = set()
        for k, seg in enumerate(self.segments):
            if seg.file in files:
                found.append(f"segment {k} ({seg.file}): file listed twice")
            files.add(seg.file)
            if k and self.segments[k - 1].kind == seg.kind:
                found.append(f"segment {k} ({seg.file}): two {seg.kind} segments in a row "
                             "(they would be one)")
            for e in seg.inputs:
                if e.name not in known:
                    if later.get(e.name, -1) >= k:
                        found.append(f"segment {k} ({seg.file}) reads '{e.name}', which "
                                     f"segment {later[e.name]} produces only later (a cycle "
                                     "or the wrong order)")
                    else:
                        found.append(f"segment {k} ({seg.file}) reads '{e.name}', which no "
                                     "segment produces and is no pipeline input")
                    continue
                found += _disagree(known[e.name], e, f"segment {k} ({seg.file}) input")
            for e in seg.outputs:
                if e.name in produced_by:
                    found.append(f"segment {k} ({seg.file}) produces '{e.name}', which "
                                 f"{produced_by[e.name]} produce(s) already")
                    continue
                produced_by[e.name] = f"segment {k}"
                known[e.name] = e
        for e in self.outputs:
            if e.name not in known or produced_by.get(e.name) == "the pipeline's inputs":
                found.append(f"pipeline output '{e.name}' is produced by no segment")
            else:
                found += _disagree(known[e.name], e, "pipeline output")
        return found


def _disagree(first: Entry, other: Entry, where: str) -> list[str]:
    found = []
    if not _same_shape(first.shape, other.shape):
        found.append(f"{where} '{other.name}': shape {other.shape}, but it is {first.shape} "
                     "where it is produced")
    if first.dtype != other.dtype:
        found.append(f"{where} '{other.name}': dtype {other.dtype}, but it is {first.dtype} "
                     "where it is produced")
    if (first.permutation or None) != (other.permutation or None):
        found.append(f"{where} '{other.name}': permutation {other.permutation}, but it is "
                     f"{first.permutation} where it is produced")
    return found


def _same_shape(a, b) -> bool:
    """Equal shapes; a symbolic dimension matches any symbolic one (segments name their
    batch their own way)."""
    return len(a) == len(b) and all(x == y or (isinstance(x, str) and isinstance(y, str))
                                    for x, y in zip(a, b))


def same_shape(a, b) -> bool:
    return _same_shape(list(a), list(b))


def from_dict(data, label: str) -> Manifest:
    """A manifest from its JSON; ModelLoadError naming what is malformed."""
    def fail(what: str):
        raise ModelLoadError(f"{label}: {what}")

    if not isinstance(data, dict):
        fail("not a JSON object")
    if data.get("format") != FORMAT:
        fail(f"not an nhwc-onnx pipeline (format {data.get('format')!r}, expected {FORMAT!r})")
    if data.get("version") != VERSION:
        fail(f"pipeline version {data.get('version')!r} is not {VERSION}")

    def entries(items, where: str) -> list[Entry]:
        if not isinstance(items, list):
            fail(f"{where} must be a list")
        found = []
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str) or \
                    not isinstance(item.get("shape"), list) or \
                    not isinstance(item.get("dtype"), str):
                fail(f"{where}: each entry needs name, shape (a list) and dtype")
            perm = item.get("permutation")
            if perm is not None and (not isinstance(perm, list) or sorted(perm) != list(
                    range(len(item["shape"])))):
                fail(f"{where} '{item['name']}': permutation {perm!r} is no permutation of "
                     "its axes")
            if any(not isinstance(d, (int, str)) or isinstance(d, bool) for d in item["shape"]):
                fail(f"{where} '{item['name']}': a dimension is an int or a string")
            found.append(Entry(item["name"], list(item["shape"]), item["dtype"], perm))
        return found

    segments = []
    raw_segments = data.get("segments")
    if not isinstance(raw_segments, list) or not raw_segments:
        fail("segments must be a non-empty list")
    for k, seg in enumerate(raw_segments):
        if not isinstance(seg, dict):
            fail(f"segment {k} is not an object")
        file, kind = seg.get("file"), seg.get("kind")
        if not isinstance(file, str) or not file or Path(file).name != file or \
                file in (".", ".."):
            fail(f"segment {k}: file must be a file name in the pipeline's folder")
        if kind not in KINDS:
            fail(f"segment {k}: kind {kind!r} is not one of {', '.join(KINDS)}")
        segments.append(SegmentEntry(file, kind, entries(seg.get("inputs"), f"segment {k} inputs"),
                                     entries(seg.get("outputs"), f"segment {k} outputs"),
                                     seg.get("macs"), seg.get("parameter_bytes")))
    extra = {k: v for k, v in data.items()
             if k not in ("format", "version", "inputs", "outputs", "segments")}
    return Manifest(entries(data.get("inputs"), "inputs"), entries(data.get("outputs"), "outputs"),
                    segments, extra)


def manifest_path(path: str | os.PathLike) -> Path:
    """pipeline.json of a pipeline given by its folder or the file itself."""
    p = Path(path)
    return p / MANIFEST if p.is_dir() else p


def is_pipeline(path: str | Path) -> bool:
    p = Path(path)
    try:
        return (p.is_dir() and (p / MANIFEST).is_file()) or (p.name == MANIFEST and p.is_file())
    except OSError:  # a name too long, a loop of links: not a pipeline (its reader says why)
        return False


def read_manifest(path: str | os.PathLike) -> Manifest:
    from ..files.reads import read_regular

    file = manifest_path(path)
    data = read_regular(file, str(file), max_bytes=MAX_MANIFEST_BYTES)
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"{file}: not valid JSON ({exc})") from None
    return from_dict(parsed, str(file))
