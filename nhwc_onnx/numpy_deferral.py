"""numpy imported on first use, and numpy type checks that do not import it.

A leaf every layer may use. ``check`` installs the deferral before importing the schemas and
the reader: their modules say ``import numpy as np`` but a dialect file's validation reads no
numpy attribute, so numpy (most of a small check's start-up) is never loaded.
"""
from __future__ import annotations

import sys
import types
from typing import Any


def numpy_loaded():
    """The numpy module when it has really been imported, else None (the stand-in that
    ``defer_numpy_import`` puts in its place is not numpy)."""
    module = sys.modules.get("numpy")
    return module if type(module) is types.ModuleType else None


def is_numpy(value: Any, kind: str) -> bool:
    """``isinstance(value, numpy.<kind>)``; no value can be one while numpy is not loaded."""
    np = numpy_loaded()
    return np is not None and isinstance(value, getattr(np, kind))


class _NumpyOnFirstUse(types.ModuleType):
    """Stands in ``sys.modules`` for numpy until one of its attributes is read: then numpy is
    imported for real and every later read goes to it. ``import numpy as np`` in a module
    binds this object, so the module can be imported without loading numpy."""

    def __getattr__(self, name: str):
        real = numpy_loaded()
        if real is None:
            if sys.modules.get("numpy") is self:
                del sys.modules["numpy"]
            import numpy as real
        return getattr(real, name)


def defer_numpy_import() -> None:
    """Let modules ``import numpy`` without loading it, until some code reads an attribute of
    it. (``importlib.util.LazyLoader`` cannot do this on Python 3.11: the import statement
    itself reads the module's ``__spec__``, which loads it; the stand-in's ``__spec__`` is
    its own None.) A no-op once numpy is imported."""
    if "numpy" not in sys.modules:
        sys.modules["numpy"] = _NumpyOnFirstUse("numpy")
