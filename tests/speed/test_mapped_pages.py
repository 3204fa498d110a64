"""files.reads.mapped_array: a weight viewed in a memory-mapped source stops counting in the
process's resident memory once nothing holds it, and the bytes stay readable."""
from __future__ import annotations

import gc
import mmap
import sys

import numpy as np
import pytest

from nhwc_onnx.files.reads import mapped_array

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads resident memory from /proc/self/statm")

MB = 1 << 20


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * mmap.PAGESIZE


def mapped_file(tmp_path, megabytes: int) -> mmap.mmap:
    data = np.arange(megabytes * MB // 4, dtype="<f4")
    path = tmp_path / "weights.bin"
    path.write_bytes(b"\0" * 100 + data.tobytes())  # an unaligned start, as in a real file
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def test_pages_of_a_dropped_view_leave_the_process(tmp_path):
    buffer = mapped_file(tmp_path, 64)
    count = 64 * MB // 4
    view = mapped_array(buffer, np.dtype("<f4"), count, 100, (count // 1024, 1024))
    before = resident_bytes()
    assert float(view.sum(dtype=np.float64)) == float(np.arange(count, dtype=np.float64).sum())
    touched = resident_bytes()
    assert touched - before > 48 * MB  # reading the view brought the pages in
    del view
    gc.collect()
    assert touched - resident_bytes() > 48 * MB  # and dropping it gave them back


def test_a_second_view_of_released_bytes_reads_them_again(tmp_path):
    buffer = mapped_file(tmp_path, 4)
    count = 4 * MB // 4
    first = mapped_array(buffer, np.dtype("<f4"), count, 100, (count,))
    second = np.frombuffer(buffer, dtype="<f4", count=count, offset=100)
    assert second[-1] == count - 1
    del first
    gc.collect()
    assert np.array_equal(second, np.arange(count, dtype="<f4"))


def test_small_views_and_plain_bytes_are_left_alone():
    data = np.arange(16, dtype="<f4").tobytes()
    view = mapped_array(data, np.dtype("<f4"), 16, 0, (4, 4))
    assert view.shape == (4, 4) and view[3, 3] == 15
