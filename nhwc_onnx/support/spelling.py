"""Names a user probably meant: the did-you-mean of error messages (a mistyped command, an
unknown op name). A leaf: imports nothing of the project, and difflib only on a mistake."""
from __future__ import annotations

from collections.abc import Iterable


def closest_name(name: str, names: Iterable[str]) -> str | None:
    """The one of ``names`` that ``name`` was probably meant to be (same letters in another
    case first, then a close spelling), or None."""
    names = list(names)
    same_letters = [n for n in names if n.lower() == name.lower()]
    if same_letters:
        return same_letters[0]
    import difflib

    close = difflib.get_close_matches(name, names, n=1)
    return close[0] if close else None


def unknown_names(given: Iterable[str], known: Iterable[str], what: str) -> str:
    """The message for names not among ``known``: each with its likely meaning, then the
    list of known ones."""
    known = list(known)
    named = []
    for name in given:
        close = closest_name(name, known)
        named.append(f"{name} (did you mean {close}?)" if close else name)
    return f"not {what}: {', '.join(named)} (known: {', '.join(known)})"
