"""Checks shared by the reliability tests: what a clean failure of the CLI looks like."""
from __future__ import annotations

from pathlib import Path


def folder_listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def assert_clean_failure(result, code: int, fragment: str, out_dir: Path) -> str:
    """One 'Error: ...' line on stderr, the documented code, nothing in the output folder."""
    err = result.stderr.strip()
    detail = f"exit {result.exit_code}, stderr: {err!r}, exception: {result.exception!r}"
    assert result.exit_code == code, detail
    assert "Traceback" not in result.stderr + result.stdout, detail
    assert "internal error" not in err, detail
    assert len(err.splitlines()) == 1 and err.startswith("Error: "), detail
    assert fragment.lower() in err.lower(), detail
    assert folder_listing(out_dir) == [], f"left in the output folder: {folder_listing(out_dir)}"
    return err
