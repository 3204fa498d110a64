"""``check`` over many files: expanding folders and globs, one result per file, JUnit XML.

One file's failure (unreadable, or even a bug of ours) never stops the others: every file gets
its own result, and the exit code is the worst one.
"""
from __future__ import annotations

import fnmatch
import os
import re

GLOB_CHARS = re.compile(r"[*?\[]")

# statuses, worst last
VALID, INVALID, ERROR, UNREADABLE = "valid", "invalid", "error", "unreadable"
STATUSES = (VALID, INVALID, ERROR, UNREADABLE)


def expand_model_paths(args: list[str] | tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Files to check, in order, and the arguments that matched none.

    A folder means every ``*.onnx`` below it (symlinked folders are not followed), a pattern
    with ``*``, ``?`` or ``[`` that names no existing path is a glob (``**`` recurses, and like
    the folder form it does not descend into symlinked folders), anything else is one file.
    Each file appears once, under the first name that reaches it (a symlink to a file
    already listed is not listed again).
    """
    files: list[str] = []
    empty: list[str] = []
    seen: set[str] = set()

    def add(path: str) -> None:
        key = os.path.realpath(path)  # realpath: no error on a symlink loop
        if key not in seen:
            seen.add(key)
            files.append(path)

    for arg in args:
        if os.path.isdir(arg):
            matched = _onnx_below(arg)
        elif not os.path.lexists(arg) and GLOB_CHARS.search(arg):
            matched = []
            for match in sorted(glob_paths(arg)):
                matched += _onnx_below(match) if os.path.isdir(match) else [match]
        else:
            matched = [arg]  # a missing file is reported by the loader
        if not matched:
            empty.append(arg)
        for path in matched:
            add(path)
    return files, empty


def glob_paths(pattern: str) -> list[str]:
    """The paths ``pattern`` matches, as ``glob.glob(pattern, recursive=True)`` spells them,
    except that ``**`` visits each real folder once: it does not enter symlinked folders.
    (Python's glob does: one ``a -> .`` link repeats every file ~40 times, until the path is
    too long, and two such links make the walk exponential.) A literal or wildcard segment
    still follows a link it names, as a shell does."""
    base = os.sep if pattern.startswith(os.sep) else ""
    parts = [p for p in pattern.split(os.sep) if p]
    found: list[str] = []
    if parts:
        _match_segments(base, parts, found)
    if pattern.endswith(os.sep):  # a trailing separator matches folders only
        found = list(dict.fromkeys(os.path.join(p, "") for p in found if os.path.isdir(p)))
    return found


def _match_segments(base: str, parts: list[str], found: list[str]) -> None:
    """Append the paths below ``base`` ("" = the current folder) that match ``parts``."""
    part, rest = parts[0], parts[1:]
    if part == "**":
        for below in _real_folders_and_files(base or os.curdir, files=not rest):
            path = os.path.join(base, below) if below else base
            if rest:
                _match_segments(path, rest, found)
            elif below or base:
                found.append(path if below else os.path.join(base, ""))  # glob's "d/"
        return
    if GLOB_CHARS.search(part):
        try:
            names = os.listdir(base or os.curdir)
        except OSError:
            return
        if not part.startswith("."):  # as glob: wildcards do not match hidden names
            names = [n for n in names if not n.startswith(".")]
        names = sorted(fnmatch.filter(names, part))
    else:
        names = [part]
    for name in names:
        path = os.path.join(base, name)
        if rest:
            if os.path.isdir(path):
                _match_segments(path, rest, found)
        elif os.path.lexists(path):
            found.append(path)


def _real_folders_and_files(folder: str, files: bool) -> list[str]:
    """"" (``folder`` itself) and the relative path of every folder below it that is not a
    symlink (nor hidden, nor under a hidden one), plus the files when ``files``."""
    found = [""]
    for root, dirs, names in os.walk(folder, followlinks=False):
        # os.walk lists symlinked folders among dirs without entering them: drop them here
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and not os.path.islink(os.path.join(root, d)))
        rel = os.path.relpath(root, folder)
        rel = "" if rel == os.curdir else rel
        entries = [*dirs, *(sorted(n for n in names if not n.startswith(".")) if files else ())]
        found += [os.path.join(rel, n) for n in entries]
    return found


def _onnx_below(folder: str) -> list[str]:
    found = []
    for root, dirs, names in os.walk(folder, followlinks=False):
        dirs.sort()
        found += [os.path.join(root, n) for n in sorted(names) if n.lower().endswith(".onnx")]
    return found


def check_file(path: str) -> dict:
    """The result of validating one file; never raises (an internal error becomes a result)."""
    from ..errors import ModelLoadError, NhwcOnnxError
    from ..schemas import validate
    from ..serialize import load

    result = {"path": path, "status": VALID, "error": "", "nodes": 0, "issues": []}
    try:
        model = load(path, defer_weights=True)  # shapes are checked, values are not read
        issues = validate(model)
    except ModelLoadError as exc:
        result.update(status=UNREADABLE, error=str(exc))
        return result
    except NhwcOnnxError as exc:
        result.update(status=ERROR, error=str(exc))
        return result
    except Exception as exc:  # noqa: BLE001 - one file's bug must not hide the other files
        result.update(status=ERROR, error=f"internal error in nhwc-onnx ({type(exc).__name__}: "
                                          f"{exc}); rerun with --debug for the traceback")
        return result
    result.update(status=INVALID if issues else VALID, nodes=len(model.graph),
                  issues=[i.to_dict() for i in issues], text=[str(i) for i in issues])
    return result


def no_match_result(arg: str) -> dict:
    what = "folder holds no *.onnx file" if os.path.isdir(arg) else "no file matches"
    return {"path": arg, "status": UNREADABLE, "error": f"{arg}: {what}", "nodes": 0,
            "issues": []}


def summary(results: list[dict]) -> dict[str, int]:
    """Files per status; ``error`` only appears when some file hit one (JSON stays as it was)."""
    counts = {s: sum(1 for r in results if r["status"] == s) for s in STATUSES}
    if not counts[ERROR]:
        del counts[ERROR]
    return counts


def to_junit(results: list[dict]) -> str:
    """JUnit XML: one <testcase> per file; one <failure> per dialect issue; an unreadable file
    or an internal error is an <error>."""
    import xml.etree.ElementTree as ET

    counts = summary(results)
    failures = counts[INVALID]
    errors = counts[UNREADABLE] + counts.get(ERROR, 0)
    suites = ET.Element("testsuites", name="nhwc-onnx check", tests=str(len(results)),
                        failures=str(failures), errors=str(errors))
    suite = ET.SubElement(suites, "testsuite", name="nhwc-onnx check", tests=str(len(results)),
                          failures=str(failures), errors=str(errors), skipped="0")
    for r in results:
        case = ET.SubElement(suite, "testcase", classname="nhwc-onnx.check",
                             name=_xml_text(r["path"]), file=_xml_text(r["path"]))
        if r["status"] in (UNREADABLE, ERROR):
            err = ET.SubElement(case, "error", type=r["status"],
                                message=_xml_text(r["error"].splitlines()[0] if r["error"] else ""))
            err.text = _xml_text(r["error"])
        for issue, text in zip(r["issues"], r.get("text", [])):
            fail = ET.SubElement(case, "failure", type=_xml_text(issue["rule"] or "dialect"),
                                 message=_xml_text(text))
            fail.text = _xml_text(text)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode")


# Compiled on first use: only --junit needs it.
_NOT_XML = "[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"


def _xml_text(text: str) -> str:
    """XML 1.0 cannot hold control characters even escaped; show them as \\xNN."""
    return re.sub(_NOT_XML, lambda m: f"\\x{ord(m.group()):02x}", str(text))
