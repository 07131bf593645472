#!/usr/bin/env python3
"""Fails when a non-test Rust source file under crates/ is over 1,000 lines or a function in one
is over 80 lines (STYLE.md: files a newcomer can read in one sitting, functions that fit on a
screen). Test code is exempt: files under tests/ or benches/, files named tests.rs, and
`#[cfg(test)]` modules.

    python3 scripts/size_limits.py [--quiet]
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "crates"
MAX_FILE, MAX_FN = 1000, 80
# One pass over comments, strings (raw or not) and char literals, so that braces and quotes
# inside them count for nothing; lifetimes ('a) are not char literals.
TOKEN = re.compile(
    r'//[^\n]*|/\*.*?\*/|r(#*)".*?"\1|b?"(?:\\.|[^"\\])*"|b?\'(?:\\.|[^\'\\])\'',
    re.S,
)


def blank(text):
    """`text` with comments and literals replaced by spaces (newlines kept)."""
    return TOKEN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def block_end(t, open_at):
    depth = 0
    for j in range(open_at, len(t)):
        if t[j] == "{":
            depth += 1
        elif t[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(t) - 1


def test_spans(t):
    """(start, end) offsets of every `#[cfg(test)]` module."""
    spans = []
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", t):
        spans.append((m.start(), block_end(t, m.end() - 1)))
    return spans


def is_test_file(p):
    parts = p.parts
    return "tests" in parts or "benches" in parts or p.name == "tests.rs" or "target" in parts


def check(p):
    raw = p.read_text(encoding="utf-8")
    t = blank(raw)
    spans = test_spans(t)
    problems = []
    code_lines = raw.count("\n") - sum(t[a:b].count("\n") for a, b in spans)
    if code_lines > MAX_FILE:
        problems.append(f"{p}: {code_lines} lines outside tests, over {MAX_FILE}")
    for m in re.finditer(r"\bfn\s+(\w+)[^;{]*\{", t):
        if any(a <= m.start() <= b for a, b in spans):
            continue
        end = block_end(t, m.end() - 1)
        n = t.count("\n", m.start(), end) + 1
        if n > MAX_FN:
            line = t.count("\n", 0, m.start()) + 1
            problems.append(f"{p}:{line}: fn {m.group(1)} is {n} lines, over {MAX_FN}")
    return problems


def main():
    files = [p for p in sorted(ROOT.rglob("*.rs")) if not is_test_file(p.relative_to(ROOT))]
    problems = [x for p in files for x in check(p)]
    for x in problems:
        print(x)
    if "--quiet" not in sys.argv or problems:
        print(f"size limits: {len(files)} files, {len(problems)} over a limit")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
