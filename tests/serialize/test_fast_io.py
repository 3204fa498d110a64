"""The fast file paths: chunked writes of weights that are not C-ordered little-endian bytes,
zero-copy loads (weights are read-only views of the mapped file), and no ``import onnx`` where
a dialect file is only read or written."""
from __future__ import annotations

import io
import mmap
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from nhwc_onnx.ir import Graph, Model, Value
from nhwc_onnx.serialize import load, save, to_bytes
from nhwc_onnx.serialize import stream as stream_module
from nhwc_onnx.serialize.stream import ArrayWriter

REPO = Path(__file__).resolve().parents[2]


def _arrays() -> dict[str, np.ndarray]:
    """Every layout the writer must turn into C-ordered little-endian bytes."""
    rng = np.random.default_rng(11)
    base = rng.standard_normal((7, 5, 3)).astype(np.float32)
    return {
        "transposed": base.transpose(2, 0, 1),
        "big_endian_transposed": base.astype(">f4").transpose(1, 2, 0),
        "big_endian": rng.standard_normal((5, 3)).astype(">f8"),
        "float16_transposed": base.astype(np.float16).T,
        "int64_strided": np.arange(40, dtype=np.int64)[::3],
        "int32_big_endian": np.arange(30, dtype=">i4").reshape(5, 6)[:, ::-1],
        "bool_transposed": (base > 0).transpose(1, 0, 2),
        "uint8": np.arange(7 * 11, dtype=np.uint8).reshape(7, 11),
        "empty": np.zeros((0, 3), np.float32),
        "empty_transposed": np.zeros((3, 0), np.float32).T,
        "scalar": np.array(2.5, dtype=">f4"),
        "contiguous": base,
        "wide_transposed": rng.standard_normal((300, 7)).astype(np.float32).T,  # tiled copy
        # the dialect's weight orders, tile edges ragged on both axes (long and short runs)
        "hwio_as_ohwi": rng.standard_normal((3, 3, 7, 300)).astype(np.float32)
        .transpose(3, 0, 1, 2),
        "oihw_as_ohwi": rng.standard_normal((5, 7, 3, 3)).astype(np.float32).transpose(0, 2, 3, 1),
        "matmul_as_dense_big_endian": rng.standard_normal((70, 300)).astype(">f4").T,
        "rows_of_a_transposed": rng.standard_normal((300, 40)).astype(np.float32).T[5:35],
        "columns_of_a_transposed": rng.standard_normal((300, 40)).astype(np.float32).T[:, 9:290],
        "batch_of_transposes_with_gaps": rng.standard_normal((4, 300, 9)).astype(np.float32)
        [:, :, 1:8].transpose(0, 2, 1),
    }


def _expected_bytes(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array.astype(array.dtype.newbyteorder("<"))).tobytes()


def test_the_dialects_weight_orders_take_the_tiled_transpose():
    from nhwc_onnx.serialize.stream import transpose_plan

    arrays = _arrays()
    for name in ("hwio_as_ohwi", "oihw_as_ohwi", "matmul_as_dense_big_endian",
                 "rows_of_a_transposed", "columns_of_a_transposed",
                 "batch_of_transposes_with_gaps", "transposed", "wide_transposed"):
        source, q_tile, p_tile = transpose_plan(arrays[name])
        assert np.array_equal(source.reshape(arrays[name].shape), arrays[name]), name
        assert q_tile * p_tile >= 256, name
    base = np.zeros((6, 5, 4), np.float32)
    for name, array in {"C order": base, "C order with gaps": base[:, ::2],
                        "reversed": base.transpose(2, 1, 0)[::-1],
                        "broadcast": np.broadcast_to(base[:1], (6, 5, 4)).transpose(2, 0, 1),
                        "interleaved axes": base.transpose(1, 0, 2),
                        "one axis": base[0, 0], "empty": base[:0].T}.items():
        assert transpose_plan(array) is None, name


@pytest.mark.parametrize("small_copy_bytes", [0, 512 << 10])  # tiles / numpy's copy
@pytest.mark.parametrize("chunk_bytes", [1, 24, 100, 1 << 20])
def test_array_writer_bytes_equal_the_c_ordered_little_endian_copy(
        chunk_bytes, small_copy_bytes, monkeypatch):
    monkeypatch.setattr(stream_module, "SMALL_COPY_BYTES", small_copy_bytes)
    for name, array in _arrays().items():
        out = io.BytesIO()
        writer = ArrayWriter(out, chunk_bytes=chunk_bytes)
        writer.write(array)
        assert out.getvalue() == _expected_bytes(array), name
        # the chunk buffer never holds a whole converted copy (only one row when a row is
        # bigger than a chunk, one element at the least)
        row = array.itemsize if array.ndim < 2 else array.itemsize * array.shape[-1]
        assert writer._buffer is None or len(writer._buffer) <= max(chunk_bytes, row), name


def test_array_writer_allocates_its_buffer_once():
    writer = ArrayWriter(io.BytesIO(), chunk_bytes=1 << 20)
    writer.write(np.arange(6, dtype=np.float32))  # C-ordered: written from its own memory
    assert writer._buffer is None
    buffers = set()
    for size in (4, 64, 256):  # transposed weights of growing size, as a model's come
        writer.write(np.ones((size, size), np.float32).T)
        buffers.add(id(writer._buffer))
    assert len(buffers) == 1 and len(writer._buffer) == 1 << 20


class _Sink:
    """A file that keeps only a checksum of what it is given (no memory of its own)."""

    def __init__(self):
        import hashlib

        self.hash = hashlib.sha256()

    def write(self, data) -> int:
        self.hash.update(data)
        return len(data)


def test_array_writer_converts_through_one_small_buffer():
    import hashlib
    import tracemalloc

    big = np.arange(1024 * 1024, dtype=">f4").reshape(1024, 1024)  # 4 MB
    expected = hashlib.sha256(_expected_bytes(big.T) + _expected_bytes(big[:, ::-1])).digest()
    sink = _Sink()
    writer = ArrayWriter(sink, chunk_bytes=64 * 1024)
    tracemalloc.start()
    try:
        writer.write(big.T)
        first = writer._buffer
        writer.write(big[:, ::-1])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sink.hash.digest() == expected
    assert writer._buffer is first and len(first) <= 64 * 1024
    assert peak < 512 * 1024, peak  # never a whole converted copy of the 4 MB weight


def _model(arrays: dict[str, np.ndarray]) -> Model:
    g = Graph("layouts")
    x = g.add_input(Value("x", "float32", (3, 2)))
    inputs = [x] + [g.constant(array, name) for name, array in arrays.items()]
    node = g.make_node("Mystery", inputs, {}, name="mystery", domain="my.domain")
    node.output.shape = (3, 2)
    g.outputs.append(node.output)
    return Model(g)


@pytest.mark.parametrize("as_constants", [False, True])
def test_saved_weights_are_what_onnx_itself_writes_and_reads(tmp_path, monkeypatch, as_constants):
    monkeypatch.setattr(stream_module, "CHUNK_BYTES", 64)  # many chunks per weight
    arrays = _arrays()
    arrays["strings"] = np.array([["a", "bc"], ["déf", ""]], dtype=object).T
    model = _model(arrays)
    path = save(model, tmp_path / "m.onnx", weights_as_constants=as_constants)
    data = path.read_bytes()
    assert data == to_bytes(model, weights_as_constants=as_constants)
    proto = onnx.load_from_string(data)
    tensors = [n.attribute[0].t for n in proto.graph.node if n.op_type == "Constant"] \
        if as_constants else list(proto.graph.initializer)
    assert len(tensors) == len(arrays)
    for tensor in tensors:
        array = arrays[tensor.name or _output_of(proto, tensor)]
        np.testing.assert_array_equal(numpy_helper.to_array(tensor), array)
        if array.dtype != object:  # onnx's encoder writes the same raw bytes
            reference = numpy_helper.from_array(array.astype(array.dtype.newbyteorder("=")))
            assert tensor.raw_data == reference.raw_data
    back = {v.name: v.const for v in load(path).graph.constants()}
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype.newbyteorder("=")
        np.testing.assert_array_equal(back[name], array)


def _output_of(proto, tensor) -> str:
    return next(n.output[0] for n in proto.graph.node if n.attribute and n.attribute[0].t is tensor)


def test_external_data_writes_converted_weights_in_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(stream_module, "CHUNK_BYTES", 64)
    arrays = {k: v for k, v in _arrays().items() if v.nbytes}
    arrays["wide"] = np.arange(600, dtype=">f4").reshape(20, 30).T  # over the inline floor
    model = _model(arrays)
    path = save(model, tmp_path / "m.onnx", external_threshold=0)
    full = onnx.load(str(path))
    external = onnx.load(str(path), load_external_data=False)
    assert any(t.data_location == onnx.TensorProto.EXTERNAL for t in external.graph.initializer)
    for tensor in full.graph.initializer:
        np.testing.assert_array_equal(numpy_helper.to_array(tensor), arrays[tensor.name])


@pytest.mark.parametrize("external", [False, True])
def test_large_weights_are_handed_to_the_kernel_for_writing_as_they_are_written(
        tmp_path, monkeypatch, external):
    from nhwc_onnx.serialize import writer as writer_module

    real = writer_module.kernel_writeback()
    assert real is not None  # Linux: the C library has sync_file_range
    handed: list[tuple[int, int]] = []

    def start(fd: int, offset: int, length: int) -> object:
        # a range handed over must already be in the file, not in Python's buffer
        assert os.fstat(fd).st_size >= offset + length
        handed.append((offset, length))
        return real(fd, offset, length)

    monkeypatch.setattr(writer_module, "kernel_writeback", lambda: start)
    monkeypatch.setattr(writer_module, "WRITEBACK_BYTES", 2048)
    monkeypatch.setattr(writer_module, "WRITEBACK_ALIGNMENT", 512)
    # 1.2 KB each: well inside Python's write buffer, so a hint without a flush would be early
    arrays = {f"w{i}": np.full((20, 15), i, np.float32).T for i in range(16)}
    model = _model(arrays)
    path = save(model, tmp_path / "m.onnx", external_threshold=0 if external else 1 << 30)
    written = (path.with_name("m.onnx.data") if external else path).read_bytes()
    assert len(handed) >= 6
    assert [o for o, _ in handed] == [0] + [o + n for o, n in handed[:-1]]  # in order, no gap
    assert all(n >= 2048 for _, n in handed) and sum(n for _, n in handed) <= \
        len(written)
    # whole pages only: writing on into a page under writeback would wait for the disk
    assert all((o + n) % 512 == 0 for o, n in handed)
    if not external:
        assert written == to_bytes(model)
    back = {v.name: v.const for v in load(path).graph.constants()}
    for name, array in arrays.items():
        np.testing.assert_array_equal(back[name], array)


def test_small_models_are_written_without_writeback_hints(tmp_path, monkeypatch):
    from nhwc_onnx.serialize import writer as writer_module

    monkeypatch.setattr(writer_module, "kernel_writeback", lambda: pytest.fail("hinted"))
    save(_model({"w": np.ones((40, 30), np.float32)}), tmp_path / "m.onnx")


def _mapped_base(array: np.ndarray):
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    return base.obj if isinstance(base, memoryview) else base


def test_load_views_large_weights_in_the_mapped_file(tmp_path):
    rng = np.random.default_rng(5)
    big = rng.standard_normal((64, 33)).astype(np.float32)  # 8 KB: lifted
    small = np.arange(6, dtype=np.int64)  # inline
    for as_constants in (False, True):
        path = save(_model({"big": big, "small": small}), tmp_path / f"m{as_constants}.onnx",
                    weights_as_constants=as_constants)
        consts = {v.name: v.const for v in load(path).graph.constants()}
        np.testing.assert_array_equal(consts["big"], big)
        np.testing.assert_array_equal(consts["small"], small)
        assert isinstance(_mapped_base(consts["big"]), mmap.mmap), as_constants
        assert not consts["big"].flags.writeable  # passes must not write into the file
        assert consts["small"].flags.writeable


def test_load_checks_the_size_of_a_lifted_tensor(tmp_path):
    from nhwc_onnx.errors import ModelLoadError

    proto = onnx.load_from_string(to_bytes(_model({"w": np.ones((40, 40), np.float32)})))
    proto.graph.initializer[0].dims[0] = 41
    path = tmp_path / "bad.onnx"
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(ModelLoadError, match="holds 6400 bytes"):
        load(path)


def _run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          check=False, env=env, cwd=REPO, timeout=300)


_CLI_THEN_REPORT_MODULES = """
import sys
from nhwc_onnx.cli import command_line
sys.argv = ["nhwc-onnx", *sys.argv[1:]]
code = command_line()
print("EXIT", code)
print("ONNX", "onnx" in sys.modules, "onnxruntime" in sys.modules)
print("WRITER", "nhwc_onnx.serialize.writer" in sys.modules, \
"nhwc_onnx.files.writes" in sys.modules)
# peak of this program only (ru_maxrss would include the forking test process's memory)
peak = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")]
print("RSS", int(peak[0].split()[1]) * 1024 if peak else 0)
"""


def _report(result: subprocess.CompletedProcess) -> dict[str, list[str]]:
    lines = [line.split() for line in result.stdout.splitlines() if line[:4] in
             ("EXIT", "ONNX", "RSS ", "WRIT")]
    return {words[0]: words[1:] for words in lines}


@pytest.mark.slow
@pytest.mark.parametrize("source, extra", [
    ("examples/tf/small_cnn.pb", []),
    ("examples/caffe/tiny_net.prototxt", ["--weights", "examples/caffe/tiny_net.caffemodel"]),
])
def test_tf_and_caffe_conversions_never_import_onnx(tmp_path, source, extra):
    out = tmp_path / "out.onnx"
    result = _run_python(_CLI_THEN_REPORT_MODULES, "convert", source, *extra, "-o", str(out))
    report = _report(result)
    assert report["EXIT"] == ["0"], result.stderr
    assert out.is_file()
    assert report["ONNX"] == ["False", "False"]


@pytest.mark.skipif(sys.platform != "linux", reason="peak memory read from /proc/self/status")
def test_check_imports_no_onnx_and_reads_no_weight_bytes(tmp_path):
    weights = np.ones((96, 1 << 18), np.float32)  # 96 MB: far more than check's own memory
    path = save(_model({"w": weights}), tmp_path / "big.onnx")
    del weights
    size = path.stat().st_size
    result = _run_python(_CLI_THEN_REPORT_MODULES, "check", str(path))
    report = _report(result)
    assert report["EXIT"] == ["1"], result.stdout + result.stderr  # Mystery is no dialect op
    assert "Mystery" in result.stdout + result.stderr
    assert report["ONNX"] == ["False", "False"]
    assert report["WRITER"] == ["False", "False"]  # check only reads: the writer loads lazily
    peak = int(report["RSS"][0])
    assert 0 < peak < size * 0.8, (peak >> 20, size >> 20)


def test_load_on_a_big_endian_host_converts_views_to_native_order(tmp_path, monkeypatch):
    """On a big-endian host a little-endian view would compute wrong numbers in native code
    that assumes native order; the reader converts it (simulated: this host is little endian,
    so the conversion is a plain copy, and the values must not change)."""
    import types

    from nhwc_onnx.serialize import reader

    big = np.arange(64 * 33, dtype=np.float32).reshape(64, 33)
    path = save(_model({"big": big}), tmp_path / "m.onnx")
    monkeypatch.setattr(reader, "sys", types.SimpleNamespace(byteorder="big"))
    const = next(v.const for v in load(path).graph.constants() if v.name == "big")
    np.testing.assert_array_equal(const, big)
    assert const.dtype == np.dtype("float32") and const.flags.writeable  # a native copy
