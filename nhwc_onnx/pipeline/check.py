"""Check a pipeline: its manifest (every tensor produced before it is read, one name one
shape), each dialect segment against the dialect's schemas, each standard one with the ONNX
checker, and each segment's inputs and outputs against what the manifest says of them."""
from __future__ import annotations

from pathlib import Path

from ..errors import ModelLoadError
from .manifest import (
    DIALECT,
    STANDARD,
    Entry,
    manifest_path,
    read_manifest,
    same_shape,
)

MAX_SEGMENT_BYTES = 1 << 31


def load_segment(path: Path, kind: str):
    """A dialect segment as a ``Model``, a standard one as an ``onnx.ModelProto``."""
    if kind == DIALECT:
        from ..serialize import load

        return load(path)
    import onnx

    from ..files.reads import read_regular

    data = read_regular(path, str(path), max_bytes=MAX_SEGMENT_BYTES)
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:  # noqa: BLE001 - protobuf raises its own DecodeError
        raise ModelLoadError(f"{path}: not an ONNX model ({exc})") from None
    return proto


def check_pipeline(path) -> list[str]:
    """Every problem of the pipeline at ``path`` (its folder or pipeline.json); empty: valid.
    An unreadable manifest raises ModelLoadError."""
    manifest = read_manifest(path)
    folder = manifest_path(path).parent
    problems = list(manifest.problems())
    for k, seg in enumerate(manifest.segments):
        where = f"segment {k} ({seg.file}, {seg.kind})"
        file = folder / seg.file
        try:
            model = load_segment(file, seg.kind)
        except ModelLoadError as exc:
            problems.append(f"{where}: {exc}")
            continue
        problems += [f"{where}: {p}" for p in segment_problems(model, seg)]
    return problems


def segment_problems(model, seg) -> list[str]:
    """What keeps one segment from being what the manifest says it is."""
    if seg.kind == DIALECT:
        if not hasattr(model, "io_permutations"):
            return ["not a dialect model"]
        from ..schemas import validate

        found = [str(issue) for issue in validate(model)]
        declared = [(v.name, list(v.shape or []), v.dtype, model.io_permutations.get(v.name))
                    for v in model.graph.inputs], [
                   (v.name, list(v.shape or []), v.dtype, model.io_permutations.get(v.name))
                   for v in model.graph.outputs]
    else:
        import onnx

        found = []
        if any(n.domain == "nhwc" for n in model.graph.node):
            found.append("holds nhwc dialect ops: it is no standard ONNX model")
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception as exc:  # noqa: BLE001 - the checker and shape inference raise several types
            found.append(f"ONNX checker: {str(exc).splitlines()[0]}")
        declared = [_from_value_info(v) for v in model.graph.input
                    if v.name not in {t.name for t in model.graph.initializer}], [
                   _from_value_info(v) for v in model.graph.output]
    for what, listed, actual in (("inputs", seg.inputs, declared[0]),
                                 ("outputs", seg.outputs, declared[1])):
        names = [n for n, *_ in actual]
        if [e.name for e in listed] != names:
            found.append(f"{what} are {names} in the file, {[e.name for e in listed]} in "
                         "pipeline.json")
            continue
        for e, (_name, shape, dtype, perm) in zip(listed, actual):
            found += _entry_problems(e, shape, dtype, perm, seg.kind)
    return found


def _entry_problems(e: Entry, shape, dtype, perm, kind: str) -> list[str]:
    found = []
    if not same_shape(e.shape, shape):
        found.append(f"'{e.name}': shape {shape} in the file, {e.shape} in pipeline.json")
    if dtype != e.dtype:
        found.append(f"'{e.name}': dtype {dtype} in the file, {e.dtype} in pipeline.json")
    if kind == DIALECT:
        perm = None if perm is None or list(perm) == list(range(len(perm))) else list(perm)
        if perm != (e.permutation or None):
            found.append(f"'{e.name}': permutation {perm} in the file, {e.permutation} in "
                         "pipeline.json")
    return found


def _from_value_info(v) -> tuple:
    from ..serialize.tensors import dtype_from_onnx

    tt = v.type.tensor_type
    shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
             for d in tt.shape.dim]
    return v.name, shape, dtype_from_onnx(tt.elem_type), None


__all__ = ["DIALECT", "STANDARD", "check_pipeline", "check_result", "load_segment",
           "segment_problems"]


def check_result(path: str) -> dict:
    """``check``'s result for a pipeline, in the form ``check_report.check_file`` gives a
    model (so text, JSON and JUnit output take it alike): never raises."""
    from ..errors import ModelLoadError, NhwcOnnxError

    result = {"path": path, "kind": "pipeline", "status": "valid", "error": "", "nodes": 0,
              "issues": []}
    nodes = 0
    try:
        problems = check_pipeline(path)
        manifest = read_manifest(path)
        folder = manifest_path(path).parent
        for seg in manifest.segments:
            try:
                model = load_segment(folder / seg.file, seg.kind)
            except ModelLoadError:
                continue
            graph = model.graph
            nodes += len(graph.node) if hasattr(graph, "node") else len(graph)
        result["nodes"] = nodes
    except ModelLoadError as exc:
        result.update(status="unreadable", error=str(exc))
        return result
    except NhwcOnnxError as exc:
        result.update(status="error", error=str(exc))
        return result
    except Exception as exc:  # noqa: BLE001 - one pipeline's bug must not hide the others
        result.update(status="error", error=f"internal error in nhwc-onnx ({type(exc).__name__}"
                                            f": {exc}); rerun with --debug for the traceback")
        return result
    result.update(status="invalid" if problems else "valid", text=list(problems),
                  issues=[{"node": "", "op": "", "rule": "pipeline", "message": p,
                           "expected": None, "found": None} for p in problems])
    return result

