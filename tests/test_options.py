"""ConvertOptions: one frozen record of a conversion's options, checked when it is made (a
mistake names its parameter) and recorded in the report and the model's metadata exactly as
earlier versions recorded them."""
from __future__ import annotations

import dataclasses
import json
import pickle
from pathlib import Path

import pytest

import nhwc_onnx
from nhwc_onnx.errors import UsageError
from nhwc_onnx.options import ConvertOptions

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# What every default conversion writes into its metadata (the options of a model converted by
# 8b05207, without the entry of the removed approximate_padding): written out by hand.
DEFAULT_METADATA = ('{"allow_transpose": false, "domain": "nhwc", '
                    '"seed": 0, "signature": "serving_default", "weights_as_constants": false}')


def test_a_default_conversion_records_the_options_it_always_recorded(tmp_path):
    result = nhwc_onnx.convert(EXAMPLES / "onnx" / "small_nchw.onnx", tmp_path / "m.onnx")
    assert result.model.metadata["options"] == DEFAULT_METADATA
    assert json.dumps(ConvertOptions().to_report(), sort_keys=True) == DEFAULT_METADATA


def test_the_report_records_what_was_set_and_only_what_changes_a_conversion():
    options = ConvertOptions(framework="caffe", outputs="conv1",
                             input_shapes={"data": [-1, 3, 9, 9]}, batch=2,
                             weights=Path("w.caffemodel"), seed=7, domain="default",
                             strict=True, keep_layout="data",
                             exact_cut=False).running(constant_inputs={"k": [1.0]}, keep_going=True,
                                                      batch_probe=11)
    assert options.to_report() == {
        "outputs": ["conv1"], "input_shapes": {"data": [-1, 3, 9, 9]}, "batch": 2,
        "weights": "w.caffemodel", "seed": 7, "signature": "serving_default", "domain": "",
        "weights_as_constants": False, "allow_transpose": False,
        "strict": True, "keep_layout": ["data"]}


@pytest.mark.parametrize("field", ["inputs", "outputs", "keep_layout"])
def test_a_str_of_names_is_one_comma_separated_list_never_its_characters(field):
    assert getattr(ConvertOptions(**{field: "prob"}), field) == ("prob",)
    assert getattr(ConvertOptions(**{field: " a, b,,"}), field) == ("a", "b")
    # a list holds one name per item: a name with a comma is given that way
    assert getattr(ConvertOptions(**{field: ["a,b", "c"]}), field) == ("a,b", "c")
    with pytest.raises(TypeError, match=f"^ConvertOptions\\({field}=...\\): every name must be"):
        ConvertOptions(**{field: ["a", 3]})
    with pytest.raises(TypeError, match=f"^ConvertOptions\\({field}=...\\): expected a list"):
        ConvertOptions(**{field: 3})


def test_no_names_is_no_choice():
    assert ConvertOptions(inputs="", outputs=[]).inputs is None
    assert ConvertOptions(outputs=[]).outputs is None
    assert ConvertOptions(keep_layout="").keep_layout == ()


@pytest.mark.parametrize(("value", "error", "says"), [
    ("x=1,2,3,4", TypeError, r"^ConvertOptions\(input_shapes=...\): expected a mapping NAME -> "),
    ([("x", [1, 2])], TypeError, r"^ConvertOptions\(input_shapes=...\): expected a mapping"),
    ({"x": "1,2,3"}, TypeError, (r"^ConvertOptions\(input_shapes\['x'\]=...\): expected a "
                                r"sequence of ints, got str")),
    ({"x": [1, True]}, TypeError, r"^ConvertOptions\(input_shapes\['x'\]=...\): expected an int"),
    ({"x": [1, 0, 5]}, UsageError, (r"^Invalid value for 'input_shapes\['x'\]': 0 is not in the "
                                   r"range x>=1$")),
    ({3: [1]}, TypeError, r"^ConvertOptions\(input_shapes=...\): every key must be"),
])
def test_input_shapes_must_be_names_to_positive_dims(value, error, says):
    with pytest.raises(error, match=says):
        ConvertOptions(input_shapes=value)


def test_input_shapes_are_a_read_only_copy():
    given = {"x": [1, 3, 4, 4]}
    options = ConvertOptions(input_shapes=given)
    given["x"].append(9)
    given["y"] = [1]
    assert dict(options.input_shapes) == {"x": (1, 3, 4, 4)}
    with pytest.raises(TypeError):
        options.input_shapes["x"] = (1,)


@pytest.mark.parametrize(("field", "value", "error", "says"), [
    ("batch", 0, UsageError, r"^Invalid value for 'batch': 0 is not in the range x>=1$"),
    ("batch", True, TypeError, r"^ConvertOptions\(batch=...\): expected an int, got bool"),
    ("batch", "2", TypeError, r"^ConvertOptions\(batch=...\): expected an int, got str"),
    ("seed", -1, UsageError, r"^Invalid value for 'seed': -1 is not in the range x>=0$"),
    ("framework", "tflite", UsageError, (r"^Invalid value for 'framework': unknown framework "
                                        r"'tflite' \(expected one of tf, caffe, onnx\)$")),
    ("framework", 1, TypeError, r"^ConvertOptions\(framework=...\): expected a str"),
    ("domain", "ai.onnx", UsageError, r"^Invalid value for 'domain': expected 'nhwc' or "),
    ("strict", "yes", TypeError, r"^ConvertOptions\(strict=...\): expected True or False"),
    ("exact_cut", 1, TypeError, r"^ConvertOptions\(exact_cut=...\): expected True or False"),
    ("weights", 3, TypeError, r"^ConvertOptions\(weights=...\): expected a path or 'random'"),
    ("signature", "", TypeError, r"^ConvertOptions\(signature=...\): expected a signature"),
])
def test_a_wrong_value_names_its_parameter(field, value, error, says):
    with pytest.raises(error, match=says):
        ConvertOptions(**{field: value})
    if error is UsageError:  # a ValueError to callers that know nothing of the project
        assert issubclass(error, ValueError)


@pytest.mark.parametrize("field", ["keep_going", "batch_probe", "constant_inputs"])
def test_the_run_state_is_no_option_a_caller_gives(field):
    with pytest.raises(TypeError):
        ConvertOptions(**{field: None})
    assert field not in {f.name for f in dataclasses.fields(ConvertOptions)}


@pytest.mark.parametrize("field, value, says", [
    ("constant_inputs", [1], r"^ConvertOptions\(constant_inputs=...\): expected a "),
    ("keep_going", 1, r"^ConvertOptions\(keep_going=...\): expected True or False"),
    ("batch_probe", 0, r"0 is not in the range x>=1"),
])
def test_a_wrong_run_state_names_its_field(field, value, says):
    with pytest.raises((TypeError, UsageError), match=says):
        ConvertOptions().running(**{field: value})


def test_values_are_normalised():
    options = ConvertOptions(weights=Path("net.caffemodel"), domain="default", batch=3)
    assert (options.weights, options.domain, options.batch) == ("net.caffemodel", "", 3)
    assert ConvertOptions(weights="").weights is None


def test_options_are_frozen_and_a_changed_copy_is_checked_again():
    options = ConvertOptions(batch=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.batch = 3
    assert options.replace(batch=4).batch == 4 and options.batch == 2
    with pytest.raises(UsageError, match="batch"):
        options.replace(batch=0)
    assert options.replace(outputs="a,b").outputs == ("a", "b")


def test_options_cross_to_a_worker_process_unchanged():
    options = ConvertOptions(outputs="y", input_shapes={"x": [1, 2]}, keep_layout=["x"])
    copy = pickle.loads(pickle.dumps(options))
    assert copy == options and hash(copy) == hash(options)
    assert copy.input_shapes == {"x": (1, 2)}


def test_the_api_takes_only_a_convertoptions(tmp_path):
    with pytest.raises(TypeError, match="^options: expected a ConvertOptions, got dict$"):
        nhwc_onnx.convert(EXAMPLES / "onnx" / "small_nchw.onnx", tmp_path / "m.onnx",
                          {"batch": 1})
    assert not (tmp_path / "m.onnx").exists()
