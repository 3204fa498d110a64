"""TensorFlow frontend: frozen GraphDef (.pb / .pbtxt), SavedModel directories and Keras files
-> core IR. Reading a GraphDef never imports TensorFlow; SavedModel and Keras inputs import it
lazily to freeze them first (see ``savedmodel``)."""
from __future__ import annotations

import os

from ...errors import ModelLoadError
from ...files.reads import stat_regular
from ...ir import Model
from ...options import ConvertOptions
from .loader import convert_graphdef, load_file
from .registry import REGISTRY

KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")


def load(path: str | os.PathLike, options: ConvertOptions | None = None) -> Model:
    """Load a TensorFlow model as a core-op Model in TensorFlow's own layout."""
    options = options or ConvertOptions()
    text = os.fspath(path)
    if os.path.isdir(text) or text.lower().endswith(KERAS_SUFFIXES):
        from .savedmodel import check_keras_archive, load_frozen

        if not os.path.isdir(text):
            stat_regular(text, text)  # TensorFlow would block on a FIFO or read a device forever
            if text.lower().endswith(".keras"):
                check_keras_archive(text)  # before importing TensorFlow (seconds)
        elif not any(os.path.isfile(os.path.join(text, name))
                     for name in ("saved_model.pb", "saved_model.pbtxt")):
            # said before importing TensorFlow (seconds) for a folder that cannot be one
            raise ModelLoadError(f"{text}: a directory without saved_model.pb is not a "
                                 "SavedModel")

        frozen = load_frozen(text, options)
        model = convert_graphdef(frozen.graph_def, frozen.options, frozen.label, frozen.buffer)
        for value in model.graph.inputs + model.graph.outputs:  # named as users know them
            user = frozen.user_names.get(str(value.meta.get("source_name")))
            if user:
                value.meta["user_name"] = user
        return model
    return load_file(text, options)


def recognises(path: str | os.PathLike) -> bool:
    """Whether the file reads as a GraphDef (binary or text) with nodes."""
    from .reader import read_graphdef

    try:
        read_graphdef(path)
    except Exception:  # noqa: BLE001 - any failure means: not a GraphDef
        return False
    return True


__all__ = ["KERAS_SUFFIXES", "REGISTRY", "convert_graphdef", "load", "recognises"]
