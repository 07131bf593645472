#!/usr/bin/env python3
"""Writes book/src/reference/python-api.md from the installed `harmony_ldp` package: every public
name of `harmony_ldp.__all__` with its signature and docstring (the docstrings' examples are
doctests that crates/harmony-py/tests/test_docs.py runs).

    $HARMONY_PYTHON book/gen_python.py     # a Python where harmony_ldp imports
"""
import inspect
from pathlib import Path

import harmony_ldp as hl

PAGE = Path(__file__).resolve().parent / "src" / "reference" / "python-api.md"


def signature(obj):
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(…)"


def entry(name, obj, level):
    doc = inspect.getdoc(obj) or ""
    if isinstance(obj, property):
        # A property's repr is its address: the page shows its docstring (or nothing) instead.
        head = f"{'#' * level} `{name}` (property)"
        return [head, "", "```text", doc, "```", ""] if doc else [head, ""]
    kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "constant"
    head = f"{'#' * level} `{name}{signature(obj) if callable(obj) else ''}`"
    if kind == "constant":
        return [head, "", f"`{name} = {obj!r}`"[:400], ""]
    return [head, "", "```text", doc, "```", ""] if doc else [head, ""]


def main():
    out = ["# Python API", "",
           "Every public name of `harmony_ldp`, with its signature and docstring, generated from",
           "the installed package by `book/gen_python.py`. The [Python reference](../docs/PYTHON.md)",
           "explains them with examples; the type stubs are `harmony_ldp/__init__.pyi`.", ""]
    for name in sorted(hl.__all__, key=str.lower):
        obj = getattr(hl, name)
        out += entry(name, obj, 2)
        if inspect.isclass(obj):
            for m, member in sorted(vars(obj).items()):
                if m.startswith("_"):
                    continue
                target = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
                if callable(target) or isinstance(member, property):
                    out += entry(f"{name}.{m}", target if callable(target) else member, 3)
    PAGE.write_text("\n".join(out))
    print(f"gen_python: {PAGE.name} ({len(hl.__all__)} names)")


if __name__ == "__main__":
    main()
