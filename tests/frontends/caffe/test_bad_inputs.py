"""Broken inputs end in one clear project error (never a traceback from protobuf or numpy)."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.errors import InvalidModelError, ModelLoadError, NhwcOnnxError, UsageError
from nhwc_onnx.frontends.caffe import load
from nhwc_onnx.frontends.caffe.writer import write_caffemodel
from nhwc_onnx.options import ConvertOptions
from tests.frontends.caffe.test_layers_opencv import layer, net

CONV = "convolution_param { num_output: 4 kernel_size: 3 }"
TEXT = net(layer("conv1", "Convolution", ["data"], ["conv1"], CONV)
           + layer("fc", "InnerProduct", ["conv1"], ["fc"],
                   "inner_product_param { num_output: 5 }"))


def _weights(conv_shape=(4, 3, 3, 3), fc_shape=(5, 4 * 9 * 7), skip=(), extra_blob=False):
    rng = np.random.default_rng(0)
    layers = []
    if "conv1" not in skip:
        blobs = [rng.standard_normal(conv_shape), rng.standard_normal(4)]
        layers.append(("conv1", "Convolution", blobs + ([np.ones(2)] if extra_blob else [])))
    if "fc" not in skip:
        layers.append(("fc", "InnerProduct", [rng.standard_normal(fc_shape),
                                              rng.standard_normal(5)]))
    return layers


@pytest.fixture
def files(tmp_path):
    proto = tmp_path / "deploy.prototxt"
    proto.write_text(TEXT)
    return proto, tmp_path / "w.caffemodel"


def _load(proto, weights):
    return load(proto, ConvertOptions(weights=str(weights)))


def _one_line(err: Exception) -> str:
    message = str(err)
    assert message and "\n" not in message, message
    return message


def test_valid_files_load(files):
    proto, weights = files
    write_caffemodel(weights, _weights())
    assert _load(proto, weights).graph.outputs[0].shape == (2, 5)


def test_missing_layer_weights(files):
    proto, weights = files
    write_caffemodel(weights, _weights(skip=("fc",)))
    with pytest.raises(InvalidModelError) as info:
        _load(proto, weights)
    assert "'fc'" in _one_line(info.value) and "no weights" in str(info.value)


def test_wrong_blob_shape(files):
    proto, weights = files
    write_caffemodel(weights, _weights(conv_shape=(4, 3, 5, 5)))
    with pytest.raises(InvalidModelError) as info:
        _load(proto, weights)
    assert "[4, 3, 5, 5]" in _one_line(info.value) and "[4, 3, 3, 3]" in str(info.value)


def test_wrong_blob_count(files):
    proto, weights = files
    write_caffemodel(weights, _weights(extra_blob=True))
    with pytest.raises(InvalidModelError) as info:
        _load(proto, weights)
    assert "3 blob(s)" in _one_line(info.value)


def test_caffemodel_of_another_net(files, tmp_path):
    proto, weights = files
    write_caffemodel(weights, [("other", "Convolution", [np.ones((2, 2, 1, 1)), np.ones(2)])])
    with pytest.raises(InvalidModelError, match="does not match"):
        _load(proto, weights)


@pytest.mark.parametrize("cut", [0.999, 0.5, 0.01])
def test_truncated_caffemodel(files, cut):
    proto, weights = files
    write_caffemodel(weights, _weights())
    data = weights.read_bytes()
    weights.write_bytes(data[:max(1, int(len(data) * cut))])
    with pytest.raises(ModelLoadError) as info:
        _load(proto, weights)
    assert "truncated" in _one_line(info.value)


@pytest.mark.parametrize("content", [b"", b"\x00" * 64, b"name: 'not binary'\nlayer {}\n"])
def test_caffemodel_that_is_not_one(files, content):
    proto, weights = files
    weights.write_bytes(content)
    with pytest.raises(NhwcOnnxError) as info:
        _load(proto, weights)
    _one_line(info.value)


def test_random_bytes_as_caffemodel(files):
    proto, weights = files
    rng = np.random.default_rng(7)
    for i in range(20):
        weights.write_bytes(rng.integers(0, 256, 200 + 37 * i, dtype=np.uint8).tobytes())
        with pytest.raises(NhwcOnnxError) as info:
            _load(proto, weights)
        _one_line(info.value)


def test_prototxt_syntax_error_names_the_line(tmp_path):
    proto = tmp_path / "bad.prototxt"
    proto.write_text(TEXT.replace('num_output: 5', 'num_output: 5 }}'))
    with pytest.raises(ModelLoadError) as info:
        load(proto, ConvertOptions(weights="random"))
    line = TEXT.splitlines().index(next(x for x in TEXT.splitlines() if "num_output: 5" in x)) + 1
    assert f"line {line}" in _one_line(info.value)


def test_unknown_field_is_reported_not_dropped(tmp_path):
    proto = tmp_path / "bad.prototxt"
    text = TEXT.replace("kernel_size: 3", "kernel_size: 3\n  kernel_sise: 3")
    proto.write_text(text)
    with pytest.raises(ModelLoadError) as info:
        load(proto, ConvertOptions(weights="random"))
    message = _one_line(info.value)
    line = next(i for i, x in enumerate(text.splitlines(), 1) if "kernel_sise" in x)
    assert "kernel_sise" in message and f"line {line}," in message


def test_missing_files(tmp_path, files):
    proto, _weights = files
    with pytest.raises(ModelLoadError, match="prototxt .*nope.prototxt: no such file"):
        load(tmp_path / "nope.prototxt", ConvertOptions(weights="random"))
    with pytest.raises(ModelLoadError, match="caffemodel .*nope.caffemodel: no such file"):
        _load(proto, tmp_path / "nope.caffemodel")


@pytest.mark.parametrize("content", [b"", b"\x89PNG\r\n\x1a\n\x00\x00", b"\xff\xfe\xfa",
                                     b"layer { name: 'a' type: 'ReLU' bottom: 'x' top: 'y' }"])
def test_prototxt_that_is_not_one(tmp_path, content):
    proto = tmp_path / "x.prototxt"
    proto.write_bytes(content)
    with pytest.raises(NhwcOnnxError) as info:
        load(proto, ConvertOptions(weights="random"))
    _one_line(info.value)


def test_weights_required_without_caffemodel(files):
    proto, _ = files
    with pytest.raises(UsageError, match="--weights random"):  # a command-line mistake: exit 2
        load(proto, ConvertOptions())


def test_missing_input_shape(tmp_path):
    proto = tmp_path / "n.prototxt"
    proto.write_text('input: "data"\n' + layer("r", "ReLU", ["data"], ["r"]))
    with pytest.raises(InvalidModelError, match="--input-shape"):
        load(proto, ConvertOptions(weights="random"))


def test_absurd_shapes(tmp_path):
    proto = tmp_path / "n.prototxt"
    proto.write_text(net(layer("r", "ReLU", ["data"], ["r"]), shape=(1, 3, -4, 5)))
    with pytest.raises(InvalidModelError, match="invalid shape"):
        load(proto, ConvertOptions(weights="random"))
    proto.write_text(net(layer("r", "ReLU", ["data"], ["r"]), shape=(1, 3, 1 << 40, 5)))
    with pytest.raises(InvalidModelError, match="invalid shape"):
        load(proto, ConvertOptions(weights="random"))


def test_reshape_count_mismatch(tmp_path):
    proto = tmp_path / "n.prototxt"
    proto.write_text(net(layer("r", "Reshape", ["data"], ["r"],
                               "reshape_param { shape { dim: 2 dim: 5 } }")))
    with pytest.raises(InvalidModelError, match="changes the count"):
        load(proto, ConvertOptions(weights="random"))


def test_bottom_without_producer(tmp_path):
    proto = tmp_path / "n.prototxt"
    proto.write_text(net(layer("r", "ReLU", ["nothing"], ["r"])))
    with pytest.raises(InvalidModelError, match="'nothing'"):
        load(proto, ConvertOptions(weights="random"))


def test_unknown_requested_input_or_output(tmp_path):
    proto = tmp_path / "n.prototxt"
    proto.write_text(TEXT)
    with pytest.raises(UsageError, match="not inputs"):  # command-line mistakes: exit 2
        load(proto, ConvertOptions(weights="random", inputs=["nope"]))
    with pytest.raises(UsageError, match="^--outputs names 'nope', which is not a blob"):
        load(proto, ConvertOptions(weights="random", outputs=["nope"]))
    model = load(proto, ConvertOptions(weights="random", outputs=["conv1"]))
    assert [v.name for v in model.graph.outputs] == ["conv1"]
    # with the input declared by an Input layer, an unknown output is still named as such
    # (it used to keep no layer at all, and the net seemed to declare no inputs)
    input_layer = ('layer { name: "data" type: "Input" top: "data" '
                   'input_param { shape { dim: 2 dim: 3 dim: 11 dim: 9 } } }\n')
    proto.write_text(input_layer + TEXT.split("\n", 2)[2])
    assert [v.name for v in load(proto, ConvertOptions(weights="random")).graph.inputs] == [
        "data"]
    with pytest.raises(UsageError,
                       match="^--outputs names 'nope', 'nix', which is not a blob of this net$"):
        load(proto, ConvertOptions(weights="random", outputs=["conv1", "nope", "nix"]))


@pytest.mark.parametrize(("content", "what"), [
    (b"\x89HDF\r\n\x1a\n" + bytes(100), "HDF5"),
    (b"PK\x03\x04" + bytes(100), "ZIP"),
    (TEXT.encode(), "text"),
])
def test_foreign_file_as_caffemodel(files, content, what):
    proto, weights = files
    weights.write_bytes(content)
    with pytest.raises(ModelLoadError, match=what):
        _load(proto, weights)


def test_blob_data_shorter_than_its_shape_names_the_layer(files):
    from nhwc_onnx.frontends.caffe.writer import _len_field, _varint

    proto, weights = files
    blob = _len_field(7, _len_field(1, b"".join(_varint(d) for d in (4, 3, 3, 3))))
    blob += _len_field(5, np.zeros(10, np.float32).tobytes())
    layer = _len_field(1, b"conv1") + _len_field(2, b"Convolution") + _len_field(7, blob)
    weights.write_bytes(_len_field(100, layer))
    with pytest.raises(ModelLoadError) as info:  # bytes that do not decode: unreadable
        _load(proto, weights)
    assert "layer 'conv1' blob 0" in _one_line(info.value) and "108 values" in str(info.value)


def test_random_weights_have_a_budget(tmp_path):
    proto = tmp_path / "n.prototxt"
    proto.write_text(TEXT.replace("num_output: 4 ", "num_output: 2147483647 "))
    with pytest.raises(InvalidModelError, match="GiB of random weights"):
        load(proto, ConvertOptions(weights="random"))


def test_absurd_layer_output_is_refused(tmp_path):
    proto = tmp_path / "n.prototxt"
    proto.write_text(net(layer("d", "Deconvolution", ["data"], ["d"],
                               "convolution_param { num_output: 2 kernel_size: 1 "
                               "stride: 1000000 }")))
    with pytest.raises(InvalidModelError, match="absurd"):
        load(proto, ConvertOptions(weights="random"))


def test_blob_field_with_the_wrong_wire_type(files):
    from nhwc_onnx.frontends.caffe.writer import _len_field, _varint

    proto, weights = files
    blob = _len_field(7, _len_field(1, _varint(1))) + _varint(8 << 3) + _varint(7)
    layer = _len_field(1, b"conv1") + _len_field(2, b"Convolution") + _len_field(7, blob)
    weights.write_bytes(_len_field(100, layer))
    with pytest.raises(ModelLoadError, match="wire type 0"):
        _load(proto, weights)


TWICE_WRITTEN = {
    # two layers write blob 'a', neither in place: the later would silently win
    "two writers": (layer("r", "ReLU", ["data"], ["a"]) + layer("s", "Sigmoid", ["data"], ["a"])
                    + layer("t", "TanH", ["a"], ["out"]), "'a'"),
    # a layer writing the net's input (not in place: its bottom is another blob)
    "the input overwritten": (layer("r", "ReLU", ["data"], ["b"])
                              + layer("s", "Sigmoid", ["b"], ["data"]), "'data'"),
    # in place means top i is bottom i: Eltwise's top 0 is its bottom 1 here
    "in place at another index": (layer("r", "ReLU", ["data"], ["a"])
                                  + layer("e", "Eltwise", ["data", "a"], ["a"]), "'a'"),
}


@pytest.mark.parametrize("case", list(TWICE_WRITTEN))
def test_a_blob_written_by_two_layers_not_in_place_is_refused_naming_it(case, tmp_path):
    import cv2

    body, blob = TWICE_WRITTEN[case]
    proto = tmp_path / "n.prototxt"
    proto.write_text(net(body))
    with pytest.raises(InvalidModelError, match=f"blob {blob} is the top of layer"):
        load(proto, ConvertOptions(weights="random"))
    with pytest.raises(cv2.error):  # OpenCV, Caffe's reference here, refuses it as well
        cv2.dnn.readNetFromCaffe(str(proto))


def test_in_place_layers_rewriting_a_blob_still_convert(tmp_path):
    from tests.frontends.caffe.caffe_testlib import compare_with_opencv

    text = net(layer("c", "Convolution", ["data"], ["a"],
                     "convolution_param { num_output: 4 kernel_size: 3 }")
               + layer("r", "ReLU", ["a"], ["a"])
               + layer("s", "Scale", ["a"], ["a"], "scale_param { bias_term: true }"))
    model, results = compare_with_opencv(tmp_path, text)  # numbers, 1e-4
    assert len(model.graph.outputs) == 1 and len(results) == 1
