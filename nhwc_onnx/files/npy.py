"""Reading a user's ``.npy`` input (``run --input``, ``verify --input``) with a bounded read.

The header is checked against the file's size before any array is allocated: a header that
claims 2^40 elements in a 100-byte file is refused, not trusted.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np

from ..errors import ModelLoadError


def load_npy(path: str | os.PathLike) -> np.ndarray:
    """The array stored in ``path``; ModelLoadError (exit 2) for anything else."""
    path = Path(path)
    try:
        info = path.stat()
    except OSError as exc:
        raise ModelLoadError(f"{path}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ModelLoadError(f"{path}: not a regular file; expected a .npy array")
    if info.st_size == 0:
        raise ModelLoadError(f"{path}: the file is empty, not a .npy array")
    try:
        with open(path, "rb") as handle:
            version = np.lib.format.read_magic(handle)
            if version == (1, 0):
                shape, _fortran, dtype = np.lib.format.read_array_header_1_0(handle)
            else:
                shape, _fortran, dtype = np.lib.format.read_array_header_2_0(handle)
            data_bytes = info.st_size - handle.tell()
    except (OSError, ValueError, EOFError) as exc:
        raise ModelLoadError(f"{path}: cannot be read as a .npy array ({exc})") from None
    if dtype.hasobject:
        raise ModelLoadError(f"{path}: holds Python objects ({dtype}); only numeric arrays are "
                             "read")
    needed = dtype.itemsize
    for dim in shape:
        needed *= dim  # Python ints: no overflow
    if needed != data_bytes:
        raise ModelLoadError(f"{path}: the header declares shape {shape} of {dtype} ({needed:,} "
                             f"bytes), the file holds {data_bytes:,} bytes of data")
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise ModelLoadError(f"{path}: cannot be read as a .npy array ({exc})") from None
