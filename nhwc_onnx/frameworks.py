"""The source frameworks nhwc-onnx converts, in one table.

The API, the command line, verification, the docs and the exact cut read this table; no other
module lists the frameworks. Each row names its frontend package,
``nhwc_onnx.frontends.<package>``, and every frontend package provides the same parts, each
imported only when it is used:

- ``load(path, options) -> Model`` and ``REGISTRY`` (its converters), in the package itself;
- ``recognises(path) -> bool``: whether a file holds this framework's format, by its content;
- ``topology.source_graph(path, options) -> SourceGraph``: the graph as the exact cut sees it;
- ``reference.SourceReference(path, options)``: the source run in its own runtime, for
  verification (``.run(feeds, fetches)``, ``.tensor_names()``).

Importing this module imports no frontend: the command line's help reads the names.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path

from .errors import ModelLoadError, UsageError


class Framework:
    """One row: a source framework and where its frontend lives."""

    __slots__ = ("folder_files", "folder_kind", "label", "name", "other_files", "package",
                 "source_layout", "suffixes", "weights_file")

    def __init__(self, name: str, label: str, package: str, suffixes: tuple[str, ...], *,
                 source_layout: str, folder_files: tuple[str, ...] = (), folder_kind: str = "",
                 other_files: dict[str, str] | None = None, weights_file: str = ""):
        self.name = name  # what --framework takes
        self.label = label  # how prose and the docs call it
        self.package = package  # nhwc_onnx.frontends.<package>
        self.suffixes = suffixes  # file name endings that are this framework's models
        self.source_layout = source_layout  # axis order of its rank-4 tensors: NHWC or NCHW
        self.folder_files = folder_files  # a folder holding one of these is a model
        self.folder_kind = folder_kind  # what such a folder is called
        self.other_files = other_files or {}  # suffix -> why such a file is not the source
        self.weights_file = weights_file  # what --weights names, when the weights are apart

    def __repr__(self) -> str:
        return f"Framework({self.name!r})"

    @property
    def a_model(self) -> str:
        """'an ONNX', 'a TensorFlow' ...: the label with its article."""
        return f"{'an' if self.label[0] in 'AEIOU' else 'a'} {self.label}"

    def frontend(self):
        """The frontend package (imported on first use)."""
        return importlib.import_module(f"{__package__}.frontends.{self.package}")

    def _part(self, module: str):
        return importlib.import_module(f"{__package__}.frontends.{self.package}.{module}")

    def registry(self):
        """The frontend's OpRegistry: the source ops it has a converter for."""
        return self.frontend().REGISTRY

    def load(self, path: str | os.PathLike, options):
        """The source file as a core-op Model."""
        return self.frontend().load(os.fspath(path), options)

    def recognises(self, path: str | os.PathLike) -> bool:
        """Whether the file's content is this framework's format (a folder: never)."""
        return not is_folder(path) and self.frontend().recognises(os.fspath(path))

    def source_graph(self, path: str | os.PathLike, options):
        """The source's topology as the exact cut reads it (nhwc_onnx.conversion.cut)."""
        return self._part("topology").source_graph(os.fspath(path), options)

    def reference(self, path: str | os.PathLike, options):
        """The source model in its own runtime (TensorFlow, OpenCV, onnxruntime)."""
        return self._part("reference").SourceReference(os.fspath(path), options)

    def claims(self, path: Path) -> bool:
        """Whether ``path`` names this framework's model by its suffix or folder content."""
        if path.is_dir():
            return any((path / name).exists() for name in self.folder_files)
        return path.suffix.lower() in self.suffixes


FRAMEWORKS = (
    Framework("tf", "TensorFlow", "tensorflow", (".pb", ".pbtxt", ".keras", ".h5", ".hdf5"),
              source_layout="NHWC", folder_files=("saved_model.pb", "saved_model.pbtxt"),
              folder_kind="TensorFlow SavedModel"),
    Framework("caffe", "Caffe", "caffe", (".prototxt",), source_layout="NCHW",
              weights_file="the net's .caffemodel",
              other_files={".caffemodel": "a .caffemodel holds a Caffe net's weights; convert "
                                          "the net's deploy .prototxt with --weights {path}"}),
    Framework("onnx", "ONNX", "onnx", (".onnx",), source_layout="NCHW"),
)
_BY_NAME = {fw.name: fw for fw in FRAMEWORKS}


def names() -> tuple[str, ...]:
    return tuple(_BY_NAME)


def get(name: str | Framework, parameter: str = "framework") -> Framework:
    """The row of ``name``; UsageError (a ValueError) naming ``parameter`` if there is none."""
    if isinstance(name, Framework):
        return name
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise UsageError(f"unknown framework {name!r} (expected one of "
                         f"{', '.join(_BY_NAME)})", param_hint=parameter) from None


def is_folder(path: str | os.PathLike) -> bool:
    """Whether a source path is a folder; ModelLoadError when it cannot even be looked up (a
    name too long for the file system, a folder we may not search)."""
    try:
        return Path(path).is_dir()
    except OSError as exc:
        raise ModelLoadError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})"
                             ) from None


def detect(path: str | os.PathLike) -> Framework:
    """The framework of a source, from its name (suffix) or, for a folder, its content."""
    p = Path(path)
    if is_folder(p):
        for fw in FRAMEWORKS:
            if fw.claims(p):
                return fw
        kinds = " or ".join(fw.folder_kind for fw in FRAMEWORKS if fw.folder_files)
        marks = " or ".join(fw.folder_files[0] for fw in FRAMEWORKS if fw.folder_files)
        raise ModelLoadError(f"{p}: a folder, but not a {kinds} (no {marks})")
    if not p.exists():
        raise ModelLoadError(f"{p}: no such file")
    for fw in FRAMEWORKS:
        if fw.claims(p):
            return fw
    for fw in FRAMEWORKS:
        hint = fw.other_files.get(p.suffix.lower())
        if hint:
            raise ModelLoadError(f"{p}: {hint.format(path=p)}")
    raise ModelLoadError(f"{p}: cannot tell the framework from the extension '{p.suffix}'; "
                         f"pass --framework {'|'.join(_BY_NAME)}")


def of(options, path: str | os.PathLike) -> Framework:
    """The framework a conversion with ``options`` reads ``path`` as: ``options.framework``
    when given, else the one its name (or, for a folder, its content) says."""
    return get(options.framework) if options.framework else detect(path)


def unread_options(fw: Framework, path: str | os.PathLike, *, weights: bool,
                   signature: bool) -> list[str]:
    """The options given (``weights``, a ``signature`` other than the default) that a source
    of ``fw`` at ``path`` would not read, each with why: a mistake to report, not to ignore."""
    unread = []
    if weights and not fw.weights_file:
        unread.append(f"--weights: {fw.a_model} model holds its own weights (--weights takes "
                      "a Caffe net's .caffemodel, or 'random')")
    if signature and not (fw.folder_files and Path(path).is_dir()):
        kinds = " or ".join(f.folder_kind for f in FRAMEWORKS if f.folder_kind)
        unread.append(f"--signature: only a {kinds} folder has signatures")
    return unread


def load_source(path: str | os.PathLike, framework: str | Framework, options):
    """Run one frontend: the source file as a core-op Model. A file that fails to load but
    reads as another framework's format says which (a .pb that is an ONNX model ...)."""
    fw = get(framework)
    try:
        return fw.load(path, options)
    except ModelLoadError as exc:
        other = next((o for o in FRAMEWORKS if o is not fw and o.recognises(path)), None)
        if other is None:
            raise
        raise ModelLoadError(f"{exc}; it reads as {other.a_model} model: pass --framework "
                             f"{other.name}") from exc
