"""The Python API: ``convert``, ``check``, ``verify`` and ``info`` (``run`` and ``lower``:
``nhwc_onnx.dialect.run_lower``). The command line is a thin shell over these; ``convert``'s
stages are in ``nhwc_onnx.conversion``."""
from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from . import frameworks
from .conversion.convert import (
    DEFAULT_SIGNATURE,
    VerifyBeforeWrite,
    check_options_apply,
    convert,
    is_dialect_file,
    source_files,
)
from .conversion.convert import checked_options as _checked
from .conversion.report import (
    ConversionReport,
    ConversionResult,
    refusal_report,
    write_refusal_report,
    write_report,
)
from .conversion.source_info import describe_source
from .conversion.source_info import describe_value as _describe_value
from .errors import ValidationIssue
from .ir import Model
from .options import ConvertOptions, path_argument

__all__ = ["DEFAULT_SIGNATURE", "ConversionReport", "ConversionResult", "VerifyBeforeWrite",
           "check", "check_options_apply", "convert", "info", "is_dialect_file",
           "refusal_report", "source_files", "verify", "write_refusal_report", "write_report"]


def check(paths: str | os.PathLike | Sequence[str | os.PathLike]
          ) -> dict[str, list[ValidationIssue]]:
    """Validate dialect model files (one path or several): path -> issues (empty: valid).

    Like ``nhwc-onnx check``, a folder means every ``*.onnx`` below it and a quoted glob
    (``'models/**/*.onnx'``) what it matches (``dialect.check.expand_model_paths``); each file
    is checked once. Unreadable files, and a folder or glob that holds no model, raise
    ModelLoadError.
    """
    from .dialect.check import expand_model_paths
    from .errors import ModelLoadError
    from .schemas import validate
    from .serialize import load

    if isinstance(paths, (str, os.PathLike)):  # one path, not a sequence of its characters
        paths = [paths]
    elif isinstance(paths, bytes) or not isinstance(paths, Iterable):
        raise TypeError(f"paths: expected a path or a list of paths, got "
                        f"{type(paths).__name__}")
    names = [path_argument(p, "paths", "model paths") for p in paths]
    files, unmatched = expand_model_paths(names)
    if unmatched:
        raise ModelLoadError(f"{', '.join(unmatched)}: no .onnx model there")
    return {f: validate(load(f)) for f in files}


def verify(source: str | os.PathLike, converted: str | os.PathLike | Model,
           options: ConvertOptions | None = None, *, feeds=None, seed: int | None = None,
           atol: float = 1e-4, rtol: float = 1e-4, bisect: bool = False, layers: bool = False,
           samples: int = 1, raise_on_failure: bool = False):
    """Run source and converted model side by side on the same inputs (``samples`` of them,
    random ones seeded by ``seed``, default ``options.seed``); ``layers`` compares every tensor
    both compute; a VerificationReport (see nhwc_onnx.verification)."""
    from .verification import verify as _verify

    source = path_argument(source, "source", "the path of the source model")
    if not isinstance(converted, Model):
        converted = path_argument(converted, "converted", "a dialect model's path or a Model")
    options = _checked(options)
    fw = frameworks.of(options, source)
    check_options_apply(fw, Path(source), options)
    return _verify(source, converted, options, feeds=feeds, seed=seed, atol=atol,
                   rtol=rtol, bisect=bisect, layers=layers, samples=samples,
                   raise_on_failure=raise_on_failure)


def info(path: str | os.PathLike, options: ConvertOptions | None = None, *,
         dialect: bool | None = None) -> dict[str, Any]:
    """Inputs, outputs, op histogram, parameter count and size of any supported file.

    ``dialect``: True reads ``path`` as a dialect model, False as a source (of
    ``options.framework``, or the one its name says); None: a dialect model when it is an
    .onnx file written by nhwc-onnx, else a source. A source is also taken through the
    conversion (nothing written) and ``conversion`` says how that ends: ``status`` "converts",
    "refused" (``refused``: every node, op and reason) or "fails" (``reason``); a source that
    its frontend refuses is still described (``parameters`` None then).
    """
    options = _checked(options)
    p = Path(path_argument(path, "path", "the path of a model"))
    if dialect is None:
        dialect = options.framework is None and p.suffix.lower() == ".onnx" \
            and is_dialect_file(p)
    if not dialect:
        fw = frameworks.of(options, p)
        described = describe_source(p, fw, options)  # the file is read (checked) first
        return {"file": str(p), "format": fw.name, "bytes": _size(p, options), **described,
                **_source_costs(p, fw, options)}
    from .serialize import load

    model = load(p)
    consts = model.graph.constants()
    return {
        "file": str(p),
        "format": "nhwc dialect",
        "bytes": _size(p, options),
        "inputs": [_describe_value(v) for v in model.graph.inputs],
        "outputs": [_describe_value(v) for v in model.graph.outputs],
        "nodes": len(model.graph),
        "ops": model.graph.op_counts(),
        "parameters": int(sum(int(v.const.size) for v in consts
                                if v.const is not None and v.const.dtype.kind == "f")),
        "metadata": dict(sorted(model.metadata.items())),
        **_dialect_costs(model),
    }


def _dialect_costs(model: Model) -> dict[str, Any]:
    """``macs`` (multiply-accumulates per sample) and ``parameter_bytes`` of a dialect model."""
    from .pipeline.cost import dialect_costs

    macs, params = dialect_costs(model)
    return {"macs": macs, "parameter_bytes": params}


def _source_costs(path: Path, fw: frameworks.Framework, options: ConvertOptions
                  ) -> dict[str, Any]:
    """The same of a source (its Conv, ConvTranspose, Gemm, MatMul, LSTM, GRU and RNN nodes;
    of a TF/Caffe source's core ops); nothing when the shapes cannot be read, or the
    frontend refuses nodes."""
    from .pipeline import through_core
    from .pipeline.source import read_source

    try:
        if fw.name != "onnx":
            macs, params = through_core.source_costs(path, fw, options)
            return {"macs": macs, "parameter_bytes": params}
        source = read_source(str(path), options)
    except Exception:  # noqa: BLE001 - info describes the model without its costs then
        return {}
    return {"macs": sum(source.macs(i) for i in range(len(source.order)))
            // source.samples_per_run(),
            "parameter_bytes": int(sum(a.nbytes for a in source.consts.values()))}


def _size(path: Path, options: ConvertOptions) -> int:
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else (
        path.stat().st_size)
    if options.weights not in (None, "random"):
        size += Path(options.weights).stat().st_size
    return size
