#!/usr/bin/env python3
"""Counts the places outside harmony-tasks and harmony-protocol that name a task kind.

A task kind should be known in one place: its descriptor in harmony-tasks (and its wire types in
harmony-protocol). Every `TaskSpec::Variant`, `TaskEstimate::Variant` or `TaskKind::Variant`
written in another crate's non-test source is a place that must change when a task is added.

The script prints the count per file and exits 1 when the total rises above CEILING, so the count
can only fall. Lower CEILING whenever a change removes matches; the goal is 0, with at most the
files in EXCEPTIONS (each with its reason).

    python3 scripts/task_kind_matches.py            # per-file counts and the total
    python3 scripts/task_kind_matches.py --quiet    # the total only
"""
import pathlib
import re
import sys

# The highest total allowed today. It may only go down.
CEILING = 0
# Files allowed to name task kinds, with the reason.
EXCEPTIONS = {}
OWNERS = ("crates/harmony-tasks/", "crates/harmony-protocol/")
PATTERN = re.compile(r"\b(TaskSpec|TaskEstimate|TaskKind)::([A-Z][A-Za-z0-9]*)")


def strip_tests(text: str) -> str:
    """Source without `#[cfg(test)]` items (brace-matched) and without comments."""
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        j = text.find("{", m.end())
        semi = text.find(";", m.end())
        if j < 0 or (0 <= semi < j):
            i = semi + 1 if semi >= 0 else len(text)
            continue
        depth = 0
        for k in range(j, len(text)):
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            if depth == 0:
                i = k + 1
                break
        else:
            i = len(text)
    out.append(text[i:])
    return "".join(out)


def counts(root: pathlib.Path) -> dict:
    found = {}
    for path in sorted((root / "crates").rglob("*.rs")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(OWNERS) or "/tests/" in rel or "/benches/" in rel or "/target/" in rel:
            continue
        n = len(PATTERN.findall(strip_tests(path.read_text(encoding="utf-8"))))
        if n:
            found[rel] = n
    return found


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    found = counts(root)
    counted = {f: n for f, n in found.items() if f not in EXCEPTIONS}
    total = sum(counted.values())
    if "--quiet" not in sys.argv:
        for f, n in sorted(found.items(), key=lambda kv: -kv[1]):
            note = f"  (exception: {EXCEPTIONS[f]})" if f in EXCEPTIONS else ""
            print(f"{n:5}  {f}{note}")
    print(f"task-kind matches outside harmony-tasks and harmony-protocol: {total} in "
          f"{len(counted)} files (ceiling {CEILING}, goal 0)")
    if total > CEILING:
        print(f"the count rose above {CEILING}: name the task through its descriptor instead",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
