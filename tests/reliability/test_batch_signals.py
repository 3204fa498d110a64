"""A signal stops a batch (`convert a b c --output-dir d --jobs 2`).

Real processes and real signals, many times over, because the failures were races: Ctrl-C
(SIGINT to the whole process group, as a terminal sends it) printed a `concurrent.futures`
traceback (`OSError: Signal 15 ignored due to race condition`) in most tries, and a worker
that had caught the signal took the next queued model and converted and wrote it after the
signal. Each try must end with exit 128+N, exactly one line on stderr, no temp file, every
output either absent or a complete model, and no output that was not being written when the
signal arrived.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from rel_limits import child_env, default_signals

WIDTH = 2048  # a 2048 x 2048 float32 Gemm: 16 MB per model, a conversion of a few tenths of a s
SOURCES = ("a", "b", "c")
HANG_GUARD = 120


def _sources(folder: Path) -> list[Path]:
    folder.mkdir()
    weight = numpy_helper.from_array(np.full((WIDTH, WIDTH), 0.5, np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)], "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, WIDTH])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    data = model.SerializeToString()
    paths = []
    for name in SOURCES:
        (folder / f"{name}.onnx").write_bytes(data)
        paths.append(folder / f"{name}.onnx")
    return paths


def _listing(folder: Path) -> set[str]:
    try:
        return set(os.listdir(folder))
    except FileNotFoundError:
        return set()


def _temps(names: set[str]) -> set[str]:
    return {n for n in names if n.endswith(".tmp")}


def _model_of_temp(name: str) -> str:
    return name[1:].split(".onnx.", 1)[0] + ".onnx"  # .a.onnx.1234abcd.tmp -> a.onnx


def _start(sources: list[Path], out_dir: Path) -> subprocess.Popen:
    # A session of its own: killpg reaches the command and its workers, as Ctrl-C does.
    return subprocess.Popen(
        [sys.executable, "-m", "nhwc_onnx.cli", "-q", "convert", *map(str, sources),
         "--output-dir", str(out_dir), "--jobs", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
        start_new_session=True, preexec_fn=default_signals)  # noqa: PLW1509


def _wait_for(condition, child: subprocess.Popen) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while not condition() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.0005)


def _finish(child: subprocess.Popen) -> str:
    try:
        _, stderr = child.communicate(timeout=HANG_GUARD)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    return stderr


def _assert_stopped_cleanly(child, stderr: str, signum: int, out_dir: Path,
                            being_written: set[str]) -> None:
    name = signal.Signals(signum).name
    assert child.returncode == 128 + signum, (child.returncode, stderr)
    assert stderr.strip() == f"Error: stopped by {name} (temp files removed)", stderr
    left = _listing(out_dir)
    assert not _temps(left), left
    new = left - being_written
    assert not new, f"written after the signal: {sorted(new)} (stderr: {stderr})"
    for output in left:
        assert onnx.load(str(out_dir / output)).graph.node  # complete, never a torn file


def _try_frozen(tmp_path: Path, sources: list[Path], trial: int, signum: int,
                whole_group: bool) -> bool:
    """Freeze the batch when the first temp file appears (a and b converting, c queued), send
    the signal, let it go on: c must never be written. False when a model had already
    finished at the freeze (c may have started: the try proves nothing about c)."""
    out_dir = tmp_path / f"out{trial}"
    child = _start(sources, out_dir)
    _wait_for(lambda: _temps(_listing(out_dir)), child)
    os.killpg(child.pid, signal.SIGSTOP)
    at_signal = _listing(out_dir)
    if whole_group:
        os.killpg(child.pid, signum)
    else:
        os.kill(child.pid, signum)  # `kill PID`: the command passes it on to its workers
    os.killpg(child.pid, signal.SIGCONT)
    stderr = _finish(child)
    assert _temps(at_signal), ("the batch ended before a write was caught", stderr)
    writing = {_model_of_temp(t) for t in _temps(at_signal)}
    _assert_stopped_cleanly(child, stderr, signum, out_dir, at_signal | writing)
    if at_signal - _temps(at_signal):  # a model had finished: c may have started
        return False
    assert "c.onnx" not in _listing(out_dir)
    return True


@pytest.mark.slow
@pytest.mark.parametrize("signum, whole_group", [(signal.SIGINT, True), (signal.SIGTERM, False)],
                         ids=["ctrl-c", "kill"])
def test_a_signal_while_two_models_are_written_stops_the_batch(signum, whole_group, tmp_path):
    sources = _sources(tmp_path / "src")
    caught_before_any_finished = sum(_try_frozen(tmp_path, sources, trial, signum, whole_group)
                                     for trial in range(4))
    assert caught_before_any_finished >= 2


@pytest.mark.slow
def test_ctrl_c_at_random_moments_never_prints_a_traceback_nor_writes_after_it(tmp_path):
    """Ctrl-C at seeded random moments of the batch (planning, loading, converting, writing,
    between models): the command's one line and 130, or, when it came after the last model,
    the batch's own result; never a traceback, a temp file or a model begun after it."""
    sources = _sources(tmp_path / "src")
    rng = random.Random(30)
    stopped = tried = 0
    while stopped < 6 and tried < 30:  # how fast a batch ends depends on the machine's load
        trial, tried = tried, tried + 1
        out_dir = tmp_path / f"out{trial}"
        child = _start(sources, out_dir)
        _wait_for(out_dir.exists, child)  # the batch has started (its folder is made)
        time.sleep(rng.uniform(0.0, 1.5))
        before = _listing(out_dir)
        os.killpg(child.pid, signal.SIGINT)
        at_signal = before | _listing(out_dir)
        stderr = _finish(child)
        assert "Traceback" not in stderr and "Error" not in stderr.replace(
            "Error: stopped by SIGINT (temp files removed)", ""), stderr
        if child.returncode == 0:  # the batch was over before the signal
            assert stderr == "" and _listing(out_dir) == {f"{n}.onnx" for n in SOURCES}
            continue
        stopped += 1
        writing = {_model_of_temp(t) for t in _temps(at_signal)}
        _assert_stopped_cleanly(child, stderr, signal.SIGINT, out_dir, at_signal | writing)
    assert stopped >= 6, f"only {stopped} of {tried} tries were stopped mid-batch"


def _pending(pid: int, signum: int) -> bool:
    """Whether ``signum`` waits in process ``pid`` (stopped, it cannot take it)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) & (
                    1 << (signum - 1)):
                return True
    return False


@pytest.mark.slow
def test_kill_reaches_the_workers_at_once_even_when_no_model_finishes(tmp_path):
    """`kill PID` while the batch is frozen; then only the command continues, its workers stay
    stopped, so no model can finish: the command must take the signal itself (not one of its
    helper threads, which would leave it waiting for a result) and pass it on at once. Before
    the pool's threads started with the signals blocked, 6 of 8 tries waited here."""
    sources = _sources(tmp_path / "src")
    for trial in range(5):
        out_dir = tmp_path / f"out{trial}"
        child = _start(sources, out_dir)
        try:
            _wait_for(lambda: _temps(_listing(out_dir)), child)  # noqa: B023 - this try's
            os.killpg(child.pid, signal.SIGSTOP)
            workers = [int(pid) for pid in subprocess.run(
                ["pgrep", "-P", str(child.pid)], capture_output=True, text=True,
                check=False).stdout.split()]
            assert len(workers) == 2, workers
            os.kill(child.pid, signal.SIGTERM)
            os.kill(child.pid, signal.SIGCONT)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not all(
                    _pending(w, signal.SIGTERM) for w in workers):
                time.sleep(0.01)
            forwarded = all(_pending(w, signal.SIGTERM) for w in workers)
        finally:
            os.killpg(child.pid, signal.SIGCONT)
        stderr = _finish(child)
        assert forwarded, f"try {trial}: the signal was not passed on within 10 s"
        _assert_stopped_cleanly(child, stderr, signal.SIGTERM, out_dir,
                                {_model_of_temp(t) for t in _temps(_listing(out_dir))}
                                | _listing(out_dir))


_SIGNAL_IN_A_FINALIZER = """
import os, signal, sys
from nhwc_onnx import signals
from nhwc_onnx.files.writes import atomic_write_text

class Finalized:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, inside __del__
        sum(range(1000))

signals.install()
Finalized()  # its exception is swallowed: Python would print 'Exception ignored in ...'
try:
    atomic_write_text(sys.argv[1], "written after the signal")
except signals.StoppedBySignal as exc:
    print("stopped", exc.exit_code)
"""


def test_a_signal_whose_exception_a_finalizer_swallows_still_stops_the_write(tmp_path):
    """A handler that runs inside a finalizer cannot stop the program by raising (that is how a
    batch worker went on to the next model): the signal is remembered, the write that follows
    is not published, and nothing is printed about the swallowed exception."""
    target = tmp_path / "out.txt"
    proc = subprocess.run([sys.executable, "-c", _SIGNAL_IN_A_FINALIZER, str(target)],
                          capture_output=True, text=True, timeout=60, env=child_env(),
                          check=False)
    assert proc.stdout.strip() == "stopped 143", (proc.stdout, proc.stderr)
    assert proc.stderr == ""
    assert os.listdir(tmp_path) == []


_WORKER = """
import os, signal, sys
from nhwc_onnx import signals

signals.install_in_worker()
if sys.argv[1] == "busy":
    with signals.job():
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(1000))  # the handler runs: the model's cleanup unwinds from here
        print("the model went on")
else:
    os.kill(os.getpid(), signal.SIGTERM)
    sum(range(1000))
print("took the next model")
"""


@pytest.mark.parametrize("state", ["busy", "idle"])
def test_a_worker_exits_on_a_signal_instead_of_taking_the_next_model(state):
    """The worker's rule itself (the batch tests see it through its outputs): during a model the
    signal unwinds it, then the process exits 143; between models it exits at once."""
    proc = subprocess.run([sys.executable, "-c", _WORKER, state], capture_output=True,
                          text=True, timeout=60, env=child_env(), check=False)
    assert proc.returncode == 143, (proc.stdout, proc.stderr)
    assert proc.stdout == "" and proc.stderr == ""
