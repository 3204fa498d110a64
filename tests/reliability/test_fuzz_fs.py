"""File-system fuzzing (``fuzz_fs.py``): FIFOs, devices, symlinks (to a regular file, to a
device, dangling, looping), hard links, sparse files, directories and empty files in every slot
a command reads, in a child under RLIMIT_AS with a timeout. NHWC_FUZZ_FS_CASES (default 300)
and NHWC_FUZZ_SEED (default 0) scale it; replay one case with
``python tests/reliability/fuzz_fs.py CASES SEED --only N``."""
from __future__ import annotations

import json
import os

import pytest
from fuzz_fs import KINDS, SLOTS, pick
from rel_limits import HERE, run_limited

CASES = int(os.environ.get("NHWC_FUZZ_FS_CASES", "300"))
SEED = int(os.environ.get("NHWC_FUZZ_SEED", "0"))


def _campaign(count: int, *extra: str) -> dict:
    proc = run_limited([str(HERE / "fuzz_fs.py"), str(count), str(SEED), *extra],
                       timeout=120 + count * 1.0)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_file_system_fuzz_inputs():
    result = _campaign(CASES)
    assert result["cases"] == CASES
    assert result["failures"] == [], json.dumps(result["failures"][:20], indent=1)
    # both sides are exercised: disguised regular files convert, the rest is refused
    assert result["outcomes"].get("exit 0", 0) >= CASES // 10
    assert result["outcomes"].get("exit 2", 0) >= CASES // 2


def test_file_system_fuzz_output_targets():
    result = _campaign(24, "--outputs")
    assert result["failures"] == [], json.dumps(result["failures"][:20], indent=1)


def test_every_slot_and_kind_is_picked():
    cases = pick(len(SLOTS) * len(KINDS), 0)
    assert {c.slot for c in cases} == set(SLOTS)
    assert {c.kind for c in cases} == set(KINDS)
    assert pick(50, 3) == pick(50, 3)
