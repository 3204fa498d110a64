"""File-system fixtures: dialect models whose external data is hostile, and non-regular files
(FIFOs, devices, symlinks) standing where a model is expected. Everything is built in code."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import onnx
from onnx import TensorProto
from rel_models import write_source

from nhwc_onnx import api

_CACHE: dict[str, bytes] = {}


def dialect_bytes() -> bytes:
    """A converted (dialect) model of the reliability ONNX fixture, serialized."""
    if "dialect" not in _CACHE:
        with tempfile.TemporaryDirectory() as tmp:
            source, _ = write_source(Path(tmp) / "src", "onnx")
            api.convert(source, Path(tmp) / "m.onnx")
            _CACHE["dialect"] = (Path(tmp) / "m.onnx").read_bytes()
    return _CACHE["dialect"]


def external_dialect(folder: Path, location: str, *, dims: list[int] | None = None,
                     length: int | None = None, offset: int | None = None,
                     data: Callable[[Path, bytes], None] | None = None) -> Path:
    """``folder/model.onnx``: the dialect model with its largest weight moved to external data
    at ``location``; ``data(folder, raw_bytes)`` creates whatever the location should name."""
    folder.mkdir(parents=True, exist_ok=True)
    model = onnx.load_from_string(dialect_bytes())
    tensor = max(model.graph.initializer, key=lambda t: len(t.raw_data))
    raw = tensor.raw_data
    if data is not None:
        data(folder, raw)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    if dims is not None:
        del tensor.dims[:]
        tensor.dims.extend(dims)
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            tensor.external_data.add(key=key, value=str(value))
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def weights_file(name: str = "w.bin") -> Callable[[Path, bytes], None]:
    def make(folder: Path, raw: bytes) -> None:
        (folder / name).write_bytes(raw)
    return make


def fifo(name: str = "w.bin") -> Callable[[Path, bytes], None]:
    def make(folder: Path, raw: bytes) -> None:
        os.mkfifo(folder / name)
    return make


def sparse(size: int, name: str = "w.bin") -> Callable[[Path, bytes], None]:
    """A file of ``size`` bytes that takes no disk space (all holes)."""
    def make(folder: Path, raw: bytes) -> None:
        with open(folder / name, "wb") as f:
            f.truncate(size)
    return make


def symlink_to(target: str, name: str = "w.bin") -> Callable[[Path, bytes], None]:
    def make(folder: Path, raw: bytes) -> None:
        (folder / name).symlink_to(target)
    return make
