"""The frontends table (nhwc_onnx.frameworks): every framework's name, files, and the parts its
frontend provides; the one place the package lists the frameworks."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import nhwc_onnx
from nhwc_onnx import frameworks
from nhwc_onnx.errors import ModelLoadError, UsageError
from nhwc_onnx.frontends.topology import SourceGraph
from nhwc_onnx.options import ConvertOptions

PACKAGE_DIR = Path(nhwc_onnx.__file__).parent
EXAMPLES = PACKAGE_DIR.parent / "examples"
SOURCES = {"tf": (EXAMPLES / "tf" / "small_cnn.pb", None),
           "caffe": (EXAMPLES / "caffe" / "tiny_net.prototxt",
                     EXAMPLES / "caffe" / "tiny_net.caffemodel"),
           "onnx": (EXAMPLES / "onnx" / "small_nchw.onnx", None)}


def test_the_table_lists_each_framework_once():
    assert frameworks.names() == ("tf", "caffe", "onnx")
    assert [fw.label for fw in frameworks.FRAMEWORKS] == ["TensorFlow", "Caffe", "ONNX"]
    suffixes = [s for fw in frameworks.FRAMEWORKS for s in fw.suffixes]
    assert len(suffixes) == len(set(suffixes))


@pytest.mark.parametrize("name", ["tf", "caffe", "onnx"])
def test_every_frontend_provides_every_part(name):
    fw = frameworks.get(name)
    source, weights = SOURCES[name]
    options = ConvertOptions(weights=str(weights) if weights else None)
    model = fw.load(source, options)
    assert len(model.graph) > 3
    ops = {node.doc or node.op for node in model.graph.nodes}
    assert ops & set(fw.registry().names())  # the registry is the one that converted it
    assert fw.recognises(source) is (name != "caffe")  # a prototxt is never guessed
    graph = fw.source_graph(source, options)
    assert isinstance(graph, SourceGraph) and len(graph.nodes) >= len(model.graph) // 2
    assert graph.inputs and graph.outputs
    reference = fw.reference(source, options)
    assert callable(reference.run) and callable(reference.tensor_names)


def test_the_table_imports_no_frontend_until_one_is_used():
    code = ("import sys\nfrom nhwc_onnx import frameworks\n"
            "frameworks.detect(sys.argv[1])\n"
            "print(sorted(m for m in sys.modules if m.startswith('nhwc_onnx.frontends')))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(SOURCES["tf"][0])],
                          capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize(("name", "expected"), [
    ("m.pb", "tf"), ("m.PBTXT", "tf"), ("m.keras", "tf"), ("m.h5", "tf"), ("m.hdf5", "tf"),
    ("deploy.prototxt", "caffe"), ("m.onnx", "onnx")])
def test_a_source_is_detected_by_its_suffix(name, expected, tmp_path):
    path = tmp_path / name
    path.write_bytes(b"")
    assert frameworks.detect(path).name == expected


def test_a_folder_is_a_savedmodel_or_nothing(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    with pytest.raises(ModelLoadError, match=r"a folder, but not a TensorFlow SavedModel "
                                             r"\(no saved_model.pb\)$"):
        frameworks.detect(folder)
    (folder / "saved_model.pb").write_bytes(b"")
    assert frameworks.detect(folder).name == "tf"


def test_detection_says_what_to_do_with_other_files(tmp_path):
    with pytest.raises(ModelLoadError, match="no such file"):
        frameworks.detect(tmp_path / "none.onnx")
    weights = tmp_path / "net.caffemodel"
    weights.write_bytes(b"")
    with pytest.raises(ModelLoadError, match=f"convert the net's deploy .prototxt with "
                                             f"--weights {weights}$"):
        frameworks.detect(weights)
    other = tmp_path / "model.tflite"
    other.write_bytes(b"")
    with pytest.raises(ModelLoadError, match=r"extension '.tflite'; pass --framework "
                                             r"tf\|caffe\|onnx$"):
        frameworks.detect(other)


def test_an_unknown_name_is_a_usage_error_naming_the_parameter():
    with pytest.raises(UsageError, match=r"^Invalid value for '--framework': unknown framework "
                                         r"'mxnet' \(expected one of tf, caffe, onnx\)$"):
        frameworks.get("mxnet", parameter="--framework")


def test_a_file_named_as_another_format_says_which_it_reads_as(tmp_path):
    onnx_as_pb = tmp_path / "model.pb"
    onnx_as_pb.write_bytes(SOURCES["onnx"][0].read_bytes())
    with pytest.raises(ModelLoadError, match="it reads as an ONNX model: pass --framework onnx$"):
        frameworks.load_source(onnx_as_pb, "tf", ConvertOptions())


_FRAMEWORK_WORDS = {"tf", "caffe", "onnx", "tensorflow", "TensorFlow", "Caffe", "ONNX"}


def _framework_lists(path: Path) -> list[str]:
    """Tuples, lists, sets and dicts of the file that name two frameworks or more."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None] + node.values
        else:
            continue
        words = {i.value for i in items if isinstance(i, ast.Constant)} & _FRAMEWORK_WORDS
        if len({w.lower().replace("tensorflow", "tf") for w in words}) >= 2:
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_module_but_the_table_lists_the_frameworks(tmp_path):
    found = [where for path in sorted(PACKAGE_DIR.rglob("*.py"))
             if path.name != "frameworks.py" and not path.name.endswith("_pb2.py")
             for where in _framework_lists(path)]
    assert found == []
    # what the check finds: lists as api.py, cli.py and docs.py had them
    old = tmp_path / "old.py"
    old.write_text('FRAMEWORKS = ("tf", "caffe", "onnx")\nx = 1\n'
                   'FRONTENDS = {"tensorflow": "TensorFlow", "caffe": "Caffe"}\n'
                   'ONE = ("onnx", ".onnx")\n')
    assert _framework_lists(old) == ["old.py:1", "old.py:3"]
