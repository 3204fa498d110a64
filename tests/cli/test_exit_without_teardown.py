"""The command line ends without the interpreter's teardown (nhwc_onnx.cli.exit_without_teardown):
what teardown does that a user can see must still happen - output flushed, atexit handlers run,
the documented exit code - and a process with a native framework loaded ends the ordinary way."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# Registers an atexit handler that leaves a mark, prints through C's stdio (buffered: a pipe),
# optionally pretends a native framework is loaded, then runs the command line.
_CHILD = textwrap.dedent("""
    import atexit, ctypes, sys, threading, time, types
    mark, native, *argv = sys.argv[1:]
    atexit.register(lambda: open(mark, "w").write("ran"))
    if native == "yes":
        sys.modules["cv2"] = types.ModuleType("cv2")
    if native == "thread":  # a thread the ordinary exit waits for
        threading.Thread(target=lambda: (time.sleep(0.5), open(mark + ".thread", "w"))).start()
    ctypes.CDLL(None).printf(b"from C stdio\\n")
    from nhwc_onnx.cli import main
    sys.argv = ["nhwc-onnx", *argv]
    main()
""")


# Buffered output, as a user's shell gives it (PYTHONUNBUFFERED would hide a missing flush).
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def _run(tmp_path: Path, *argv: str, native: bool | str = False, stdout=subprocess.PIPE):
    mark = tmp_path / "atexit-ran"
    mark.unlink(missing_ok=True)
    native = native if isinstance(native, str) else "yes" if native else "no"
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(mark), native,
                           *argv], stdout=stdout, stderr=subprocess.PIPE, text=True,
                          timeout=120, check=False, env=_ENV)
    return proc, mark.exists()


def _copies(tmp_path: Path, count: int) -> list[str]:
    folder = tmp_path / "models"
    folder.mkdir()
    return [shutil.copy(EXAMPLES / "tiny_convnet.onnx", folder / f"m{i}.onnx")
            for i in range(count)]


def test_exit_codes_output_and_atexit_handlers_survive_the_fast_exit(tmp_path):
    valid, ran = _run(tmp_path, "check", str(EXAMPLES / "tiny_convnet.onnx"))
    assert (valid.returncode, ran) == (0, True)
    assert valid.stdout.endswith("tiny_convnet.onnx: valid (8 nodes)\n")  # flushed into a pipe
    # the fast exit skips C's exit(): what C code left in stdio buffers is not written
    assert "from C stdio" not in valid.stdout

    invalid, _ = _run(tmp_path, "check", str(EXAMPLES / "invalid" / "broken.onnx"))
    assert invalid.returncode == 1 and "INVALID" in invalid.stdout
    missing, _ = _run(tmp_path, "check", str(tmp_path / "none.onnx"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    usage, _ = _run(tmp_path, "check", str(EXAMPLES / "tiny_convnet.onnx"), "--no-such-option")
    assert usage.returncode == 2 and "No such option '--no-such-option'." in usage.stderr


def test_output_to_a_file_is_complete(tmp_path):
    files = _copies(tmp_path, 400)  # about 30 KB of report: beyond one buffer
    with open(tmp_path / "out.txt", "w") as out:
        proc, _ = _run(tmp_path, "check", *files, stdout=out)
    lines = (tmp_path / "out.txt").read_text().splitlines()
    assert proc.returncode == 0
    assert len(lines) == 401 and lines[-1].startswith("400 files: 400 valid")
    assert lines[0].endswith("m0.onnx: valid (8 nodes)")


def test_with_a_native_framework_loaded_the_process_exits_the_ordinary_way(tmp_path):
    proc, ran = _run(tmp_path, "check", str(EXAMPLES / "tiny_convnet.onnx"), native=True)
    assert (proc.returncode, ran) == (0, True)
    assert "from C stdio" in proc.stdout  # C's exit() flushed it


def test_a_running_thread_is_waited_for(tmp_path):
    proc, ran = _run(tmp_path, "check", str(EXAMPLES / "tiny_convnet.onnx"), native="thread")
    assert (proc.returncode, ran) == (0, True)
    assert (tmp_path / "atexit-ran.thread").exists()


def test_a_reader_that_goes_away_ends_the_command_with_exit_1_and_no_traceback(tmp_path):
    files = _copies(tmp_path, 1000)  # more than a pipe holds
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path / "m"), "no", "check",
                              *files], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_ENV)
    child.stdout.read(10)
    child.stdout.close()
    stderr = child.stderr.read().decode()
    assert child.wait(timeout=120) == 1
    assert "Traceback" not in stderr and "Exception ignored" not in stderr


_EXIT_AFTER_PRINT = textwrap.dedent("""
    import sys
    from nhwc_onnx.cli import exit_without_teardown
    print("buffered, not flushed")
    code = sys.argv[1]
    exit_without_teardown(None if code == "None" else int(code) if code.isdigit() else code)
""")


def _exit_with(code: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _EXIT_AFTER_PRINT, code], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=120, check=False, env=_ENV)


def test_the_exit_flushes_what_python_buffered_and_keeps_sys_exit_codes():
    for code, expected in (("0", 0), ("None", 0), ("3", 3), ("130", 130)):
        proc = _exit_with(code)
        assert (proc.returncode, proc.stdout) == (expected, "buffered, not flushed\n"), code
    message = _exit_with("a message")  # sys.exit("a message"): printed, exit 1
    assert (message.returncode, message.stderr) == (1, "a message\n")


def test_a_flush_into_a_closed_pipe_exits_1_without_a_traceback():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        proc = _exit_with("0", stdout=write_end)
    finally:
        os.close(write_end)
    assert proc.returncode == 1
    assert proc.stderr == ""


def test_a_command_started_with_stdout_closed_exits_as_before(tmp_path):
    # Python sets sys.stdout to None; echo writes nothing, and the exit must not trip on it
    proc = subprocess.run(["sh", "-c", 'exec "$0" "$@" >&-', sys.executable, "-c", _CHILD,
                           str(tmp_path / "m"), "no", "check", str(EXAMPLES / "tiny_convnet.onnx")],
                          stderr=subprocess.PIPE, text=True, timeout=120, check=False, env=_ENV)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
