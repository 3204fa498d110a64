"""A handful of bad inputs through the real command line, in a child process under RLIMIT_AS
(3 GiB) and a timeout: the absurd-size cases must be refused before anything is allocated."""
from __future__ import annotations

import pytest
from bad_inputs import all_cases, random_bytes
from rel_checks import folder_listing
from rel_limits import MEMORY_LIMIT, run_cli_limited, run_limited

from nhwc_onnx.errors import EXIT_UNREADABLE

CHOSEN = ["onnx-input dim 2^40", "onnx-weight dims 2^40", "onnx-external data escapes folder",
          "tf-Const shape 2^40", "tf-ZIP named .pb", "caffe-Reshape target 2^40",
          "caffe-input dim 2^40"]
CASES = [c for c in all_cases() if c.id in CHOSEN]


def _check_one_line(proc, code: int, fragment: str, out_dir) -> None:
    err = proc.stderr.strip()
    detail = f"exit {proc.returncode}, stderr: {err!r}"
    assert proc.returncode == code, detail
    assert "Traceback" not in proc.stderr and "internal error" not in err, detail
    assert len(err.splitlines()) == 1 and err.startswith("Error: "), detail
    assert fragment.lower() in err.lower(), detail
    assert folder_listing(out_dir) == [], folder_listing(out_dir)


def test_the_memory_bound_is_real():
    """The child really runs under the limit: allocating more than it fails there."""
    code = ("import numpy as np\n"
            f"try:\n    np.ones({MEMORY_LIMIT // 8 + 1}, np.float64)\n"
            "except MemoryError:\n    print('refused')\n")
    proc = run_limited(["-c", code], timeout=60)
    assert proc.stdout.strip() == "refused", proc.stderr


def test_chosen_cases_exist():
    assert sorted(c.id for c in CASES) == sorted(CHOSEN)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_in_a_memory_bounded_process(case, tmp_path):
    src_dir, out_dir = tmp_path / "src", tmp_path / "out"
    src_dir.mkdir()
    out_dir.mkdir()
    source, extra = case.build(src_dir)
    proc = run_cli_limited(["convert", source, "-o", out_dir / "m.onnx", *extra], timeout=60)
    _check_one_line(proc, case.code, case.fragment, out_dir)


def _tf_container_cases(folder):
    saved = folder / "saved"
    saved.mkdir()
    (saved / "saved_model.pb").write_bytes(random_bytes(3000))
    keras = folder / "model.keras"
    keras.write_bytes(random_bytes(3000, seed=6))
    h5 = folder / "model.h5"
    h5.write_bytes(b"not an HDF5 file\n" * 10)
    return {"SavedModel": saved, "keras": keras, "h5": h5}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["SavedModel", "keras", "h5"])
def test_corrupt_tensorflow_containers_end_in_an_error_line(kind, tmp_path):
    """SavedModel and Keras inputs import TensorFlow (seconds, a lot of address space): the
    corrupt ones still end in exit 2 and an 'Error:' line, under the memory bound."""
    source = _tf_container_cases(tmp_path)[kind]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = run_cli_limited(["convert", source, "-o", out_dir / "m.onnx"], timeout=180)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == EXIT_UNREADABLE, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lines and lines[-1].startswith("Error: ") and "cannot load" in lines[-1], lines
    assert folder_listing(out_dir) == []


@pytest.mark.slow
def test_tensorflow_import_adds_no_log_lines_for_a_user_who_set_nothing(tmp_path):
    """Without TF_* variables (a user's shell), TensorFlow's import prints absl/oneDNN lines
    on stderr, so the 'Error:' line is not the only one."""
    source = _tf_container_cases(tmp_path)["h5"]
    proc = run_cli_limited(["convert", source, "-o", tmp_path / "m.onnx"], timeout=180,
                           TF_CPP_MIN_LOG_LEVEL=None, TF_ENABLE_ONEDNN_OPTS=None)
    assert proc.returncode == EXIT_UNREADABLE
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
