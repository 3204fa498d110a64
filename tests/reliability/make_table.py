"""Print the README's table: every bad-input case through the CLI -> exit code and message.

    python tests/reliability/make_table.py > /tmp/table.md
"""
from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: tests.*

from bad_inputs import all_cases

from tests.cli_runner import run_cli

NAMES = {"onnx": "ONNX", "tf": "TensorFlow", "caffe": "Caffe"}


def _excerpt(stderr: str, folder: str) -> str:
    text = stderr.strip().removeprefix("Error: ").replace(folder + "/", "")
    text = re.sub(r"\s+", " ", text).replace("|", "\\|")
    return text if len(text) <= 110 else text[:107] + "..."


def main() -> None:
    rows: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for case in all_cases():
        with tempfile.TemporaryDirectory() as tmp:
            src, out = Path(tmp) / "src", Path(tmp) / "out"
            src.mkdir()
            out.mkdir()
            source, extra = case.build(src)
            result = run_cli("convert", source, "-o", out / "m.onnx", *extra)
            excerpt = _excerpt(result.stderr, str(src))
        # the truncations of one file share a row: "truncated (11 cut points)"
        kind = re.sub(r" at \d+ of \d+$", "", case.kind)
        rows.setdefault((case.fmt, kind), []).append((result.exit_code, excerpt))
    print("| format | bad input | exit | message (excerpt) |")
    print("|---|---|---|---|")
    for (fmt, kind), outcomes in rows.items():
        codes = "/".join(str(c) for c in sorted({c for c, _ in outcomes}))
        label = f"{kind} ({len(outcomes)} cut points)" if len(outcomes) > 1 else kind
        print(f"| {NAMES[fmt]} | {label} | {codes} | {outcomes[0][1]} |")


if __name__ == "__main__":
    main()
