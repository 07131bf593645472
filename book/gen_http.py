#!/usr/bin/env python3
"""Writes book/src/reference/http.md from docs/openapi.json (the server's OpenAPI document).

    python3 book/gen_http.py          # rewrite the page
    python3 book/gen_http.py --check  # exit 1 if the page is not what the document gives
"""
import json
import re
import sys
from pathlib import Path

BOOK = Path(__file__).resolve().parent
SPEC = BOOK.parent / "docs" / "openapi.json"
PAGE = BOOK / "src" / "reference" / "http.md"


def cell(text):
    text = re.sub(r"\[(`[^`]+`)\](?!\()", r"\1", text)
    return " ".join(text.split()).replace("|", "\\|")


def render(spec):
    out = [
        "# HTTP API",
        "",
        "`harmony serve` speaks JSON over HTTP(S). The complete contract, with every request and",
        "response body, is the OpenAPI 3.1 document [openapi.json](../docs/openapi.json) (a server",
        "also serves its own at `GET /openapi.json`). This page lists its endpoints; it is",
        "generated from that document by `book/gen_http.py`. Tokens, limits and guarantees are in",
        "[the collection server](../docs/SERVER.md).",
        "",
        f"Version: {spec.get('info', {}).get('version', '?')}.",
        "",
        "| method | path | what it does |",
        "|---|---|---|",
    ]
    for path, ops in sorted(spec["paths"].items()):
        for method, op in sorted(ops.items()):
            if method not in ("get", "post", "put", "delete", "patch"):
                continue
            summary = op.get("summary") or op.get("description") or ""
            summary = summary.split(":", 1)[1] if summary.startswith("`") and ":" in summary else ""
            out.append(f"| {method.upper()} | `{path}` | {cell(summary) or '–'} |")
    out += [
        "",
        "Every error is a JSON object `{\"error\": {\"field\": …, \"message\": …}}` naming the field",
        "and what was expected.",
        "",
    ]
    return "\n".join(out)


def main():
    page = render(json.loads(SPEC.read_text()))
    if "--check" in sys.argv:
        if not PAGE.exists() or PAGE.read_text() != page:
            print(f"{PAGE} is stale: run python3 book/gen_http.py", file=sys.stderr)
            sys.exit(1)
        return
    PAGE.write_text(page)


if __name__ == "__main__":
    main()
