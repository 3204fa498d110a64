"""README.md stays a short user's guide, and no link of README.md or docs/*.md leads nowhere."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_README_LINES = 310
# [text](target) and [text](target "title"); images too
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def relative_links(text: str) -> list[str]:
    """Targets of the Markdown links that point into the repository (no scheme, no bare
    anchor), with any #anchor removed; code spans and blocks are not links."""
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    targets = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.IGNORECASE) or target.startswith("#"):
            continue
        targets.append(target.split("#", 1)[0])
    return targets


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_readme_is_at_most_350_lines():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, len(lines)


def test_every_relative_link_points_at_an_existing_file():
    broken, count = [], 0
    for doc in documents():
        for target in relative_links(doc.read_text(encoding="utf-8")):
            count += 1
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(REPO)}: {target}")
    assert broken == []
    assert count >= 20  # README and docs link each other: a parser that finds none is broken


def test_the_guide_links_every_document_in_docs():
    readme = set(relative_links((REPO / "README.md").read_text(encoding="utf-8")))
    for doc in sorted((REPO / "docs").glob("*.md")):
        assert f"docs/{doc.name}" in readme, doc.name


def test_the_link_finder():
    text = ("see [a](docs/a.md#x), [b](https://x.org/b.md), [c](#top), ![i](img/p.png)\n"
            "`[d](not/a/link.md)`\n```\n[e](in/code.md)\n```\n[f](../g.md \"title\")")
    assert relative_links(text) == ["docs/a.md", "img/p.png", "../g.md"]
