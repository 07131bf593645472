#!/usr/bin/env python3
"""Checks the links of the guide and the repository's Markdown, without the network.

For README.md, CONTRIBUTING.md, CHANGELOG.md, data/README.md, docs/*.md and book/src/**.md:
every relative link and image must name a file (or folder) of the repository, every `#anchor`
a heading of its target page, and no link may leave the repository. Pages of the book (its own
and docs/, which book/src/docs links to) are also checked as the book sees them: a link that
leaves book/src would be broken in the built book. Text that points outside the repository
(`../shared/…`, absolute paths under /work) is refused too.

    python3 book/check_links.py        # exit 1 and one line per problem if any
"""
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BOOK_SRC = REPO / "book" / "src"
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
OUTSIDE = re.compile(r"\.\./shared/|(?<![\w.])/work/")
FENCE = re.compile(r"^\s*(```|~~~)")


def strip_code(text):
    """The text with fenced blocks blanked (line numbers kept) and inline code removed."""
    out, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else re.sub(r"`[^`]*`", "``", line))
    return out


def slug(heading):
    """mdBook's (and GitHub's) id of a heading."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"<[^>]+>", "", text)
    out = []
    for ch in text.strip():
        if ch.isalnum() or ch in "_-":
            out.append(ch.lower())
        elif ch.isspace():
            out.append("-")
    return "".join(out)


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, ids, fenced = {}, set(), False
        for line in path.read_text(encoding="utf-8").split("\n"):
            if FENCE.match(line):
                fenced = not fenced
                continue
            m = None if fenced else HEADING.match(line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                ids.add(base if n == 0 else f"{base}-{n}")
            for a in re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line):
                ids.add(a)
        _anchors[path] = ids
    return _anchors[path]


def pages():
    fixed = [REPO / p for p in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "data/README.md")]
    docs = sorted((REPO / "docs").glob("*.md"))
    book = sorted(p for p in BOOK_SRC.rglob("*.md") if "docs" not in p.relative_to(BOOK_SRC).parts[:1])
    return [p for p in fixed if p.exists()] + docs + book


def book_path(page):
    """Where a page sits in the book's tree, or None if the book does not show it."""
    if page.is_relative_to(BOOK_SRC):
        return page
    if page.parent == REPO / "docs":
        return BOOK_SRC / "docs" / page.name
    return None


def check(page, errors):
    rel = page.relative_to(REPO)
    lines = strip_code(page.read_text(encoding="utf-8"))
    in_book = book_path(page)
    for no, line in enumerate(lines, 1):
        if OUTSIDE.search(line):
            errors.append(f"{rel}:{no}: points outside the repository: {line.strip()[:100]}")
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page.resolve()
            where = f"{rel}:{no}: {target}"
            if not dest.is_relative_to(REPO):
                errors.append(f"{where}: leaves the repository")
                continue
            if not dest.exists():
                errors.append(f"{where}: no such file")
                continue
            if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                errors.append(f"{where}: no heading #{anchor} in {dest.relative_to(REPO)}")
            if in_book and file_part:
                seen = Path(os.path.normpath(in_book.parent / file_part))
                if not seen.is_relative_to(BOOK_SRC) or not seen.exists():
                    errors.append(f"{where}: not in the book (book/src): broken in the built book")


def main():
    errors, checked = [], pages()
    for page in checked:
        check(page, errors)
    summary = REPO / "book" / "src" / "SUMMARY.md"
    listed = set(re.findall(r"\]\((docs/[^)#]+)\)", summary.read_text()))
    for doc in sorted((REPO / "docs").glob("*.md")):
        if f"docs/{doc.name}" not in listed:
            errors.append(f"docs/{doc.name}: not in book/src/SUMMARY.md")
    for e in errors:
        print(e)
    print(f"check_links: {len(checked)} pages, {len(errors)} problems", file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
