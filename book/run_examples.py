#!/usr/bin/env python3
"""Runs the examples of README.md and of the guide (book/src/**.md and docs/*.md) against a
freshly built `harmony` and a loopback server, and fails on the first block that exits non-zero.

Conventions (CONTRIBUTING.md, "Every example runs"):

- ```sh / ```bash / ```shell blocks run with bash -euo pipefail, the blocks of one page in one
  shell, in order (variables such as $ID carry over), in a scratch directory where `data/` and
  `examples/` are the repository's. A server started with `&` is stopped when the page ends.
  The loopback ports 8080 to 8089 are replaced by free ones.
- ```console blocks: the lines starting with `$ ` run; the others are the expected output.
- ```python blocks run with $HARMONY_PYTHON (default python3) when it imports harmony_ldp,
  else they are counted as skipped; a block of `>>>` lines runs as a doctest (its outputs are
  checked; the page's doctests share one session).
- ```toml and ```json blocks are parsed; with `# file: NAME` (TOML) or the comment
  `<!-- file: NAME -->` before the fence they are also written to NAME for the next blocks.
- A block with `<!-- not run: REASON -->` on the line before its fence is not run; so is a block
  that book/not-run.toml names (its page and the start of its text), for pages whose
  text this runner should not have to change.
- A block with `<!-- needs: FEATURE -->` runs when `harmony --version` lists the feature (CI's
  binary is built with `datafusion`), and is counted as skipped otherwise.
- Any other language (text, output, js, rust, sql…) is not an example and is not counted.

    python3 book/run_examples.py [PAGE.md ...]

The binary: $HARMONY_BIN, else target/release/harmony, else target/debug/harmony.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

try:
    import tomllib
except ModuleNotFoundError:
    sys.exit("run_examples: needs Python >= 3.11 (tomllib)")
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHELL = {"sh", "bash", "shell", "console"}
RUN = SHELL | {"python", "toml", "json"}
MARK = re.compile(r"<!--\s*(not run|file|needs):\s*(.*?)\s*-->")
PAGE_TIMEOUT = float(os.environ.get("HARMONY_EXAMPLES_TIMEOUT", "900"))


def blocks(path):
    """(language, code, mark, line) of every fenced block of `path`."""
    lines = path.read_text(encoding="utf-8").split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)```\s*([A-Za-z0-9_+-]*)", lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = len(m.group(1)), m.group(2).lower(), i
        prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        mark = MARK.search(prev)
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        i += 1
        out.append((lang, "\n".join(body), mark.groups() if mark else None, start + 1))
    return out


def side_marks():
    """(page, first-line prefix) -> reason, from book/not-run.toml."""
    path = REPO / "book" / "not-run.toml"
    entries = tomllib.loads(path.read_text()).get("not_run", []) if path.exists() else []
    return {(e["page"], e["starts"]): e["reason"] for e in entries}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def harmony_bin():
    for cand in (os.environ.get("HARMONY_BIN"), REPO / "target/release/harmony", REPO / "target/debug/harmony"):
        if cand and Path(cand).is_file():
            return Path(cand).resolve()
    sys.exit("run_examples: no harmony binary (build it, or set HARMONY_BIN)")


def python_with_sdk():
    py = os.environ.get("HARMONY_PYTHON", "python3")
    ok = subprocess.run([py, "-c", "import harmony_ldp, pandas"], capture_output=True).returncode == 0
    return py if ok else None


def features():
    """The optional features `harmony --version` lists."""
    out = subprocess.run([str(harmony_bin()), "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"\(features: ([^)]*)\)", out)
    return [f.strip() for f in m.group(1).split(",")] if m else []


def script_of(page, found, scratch, python, counts):
    """The bash script of one page and the block each marker line names."""
    ports = {str(p): str(free_port()) for p in range(8080, 8090)}
    parts = ["set -euo pipefail"]
    marks = side_marks()
    doctests = []
    for n, (lang, code, mark, line) in enumerate(found):
        if lang not in RUN:
            continue
        where = f"{page}:{line}"
        side = [r for (p, start), r in marks.items() if p == page and code.lstrip().startswith(start)]
        mark = ("not run", side[0]) if side and not mark else mark
        if mark and mark[0] == "not run":
            counts["not run"].append(f"{where} ({mark[1]})")
            continue
        if mark and mark[0] == "needs" and mark[1] not in features():
            counts["skipped"].append(f"{where} (a harmony without --features {mark[1]})")
            continue
        for old, new in ports.items():
            code = code.replace(f"127.0.0.1:{old}", f"127.0.0.1:{new}").replace(f"localhost:{old}", f"localhost:{new}")
        if lang in ("toml", "json"):
            try:
                tomllib.loads(code) if lang == "toml" else json.loads(code)
            except ValueError as e:
                raise SystemExit(f"run_examples: {where}: the {lang} block does not parse: {e}")
            name = mark[1] if mark and mark[0] == "file" else None
            m = re.match(r"#\s*file:\s*(\S+)", code) if lang == "toml" else None
            name = name or (m.group(1) if m else None)
            if name:
                (scratch / name).write_text(code + "\n")
            counts["run"].append(where)
            continue
        if lang == "python":
            if not python:
                counts["skipped"].append(f"{where} (no harmony_ldp)")
                continue
            if code.lstrip().startswith(">>>"):  # a doctest: the outputs shown are checked
                # The page's doctests share one session, as in the reader's interpreter: each
                # block runs after the page's earlier ones.
                doctests.append(code)
                (scratch / f"block{n}.txt").write_text("\n\n".join(doctests) + "\n")
                code = (f"{python} -c 'import doctest, sys; r = doctest.testfile(\"block{n}.txt\", "
                        f"module_relative=False, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE); "
                        f"sys.exit(1 if r.failed else 0)'")
            else:
                (scratch / f"block{n}.py").write_text(code + "\n")
                code = f"{python} block{n}.py"
        elif lang == "console":
            code = "\n".join(l[2:] for l in code.split("\n") if l.startswith("$ "))
        parts.append(f"echo '::block {where}' >&2\n{code}")
        counts["run"].append(where)
    return "\n".join(parts) + "\n"


def run_page(page, binary, python, counts):
    found = blocks(REPO / page)
    scratch = Path(tempfile.mkdtemp(prefix="harmony-examples-"))
    for d in ("data", "examples", "crates", "web"):
        (scratch / d).symlink_to(REPO / d)
    script = script_of(page, found, scratch, python, counts)
    env = dict(os.environ, PATH=f"{binary.parent}:{os.environ['PATH']}")
    env.pop("HARMONY_DATA_DIR", None)
    env.pop("HARMONY_ADMIN_TOKEN", None)
    t0 = time.time()
    log = scratch / "examples.log"
    with open(log, "w") as out_file:
        proc = subprocess.Popen(["bash", "-c", script], cwd=scratch, env=env, start_new_session=True,
                                stdout=out_file, stderr=subprocess.STDOUT)
        try:
            proc.wait(timeout=PAGE_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.returncode = "timeout"
        finally:
            try:
                os.killpg(proc.pid, signal.SIGTERM)  # servers the page started in the background
            except ProcessLookupError:
                pass
    out = log.read_text(errors="replace")
    if proc.returncode != 0:
        block = [l for l in out.split("\n") if l.startswith("::block ")]
        print(out[-6000:])
        print(f"run_examples: FAILED ({proc.returncode}) in {block[-1][8:] if block else page}")
        return False
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"run_examples: {page}: ok ({time.time() - t0:.1f} s)")
    return True


def main():
    pages = sys.argv[1:] or ["README.md"] + sorted(
        str(p.relative_to(REPO)) for p in (REPO / "book/src").rglob("*.md")
        if p.relative_to(REPO / "book/src").parts[0] != "docs") + sorted(
        str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))
    binary, python = harmony_bin(), python_with_sdk()
    counts = {"run": [], "not run": [], "skipped": []}
    ok = all(run_page(p, binary, python, counts) for p in pages)
    for what in ("not run", "skipped"):
        for w in counts[what]:
            print(f"  {what}: {w}")
    total = sum(len(v) for v in counts.values())
    print(f"run_examples: {len(counts['run'])} run, {len(counts['not run'])} marked not run, "
          f"{len(counts['skipped'])} skipped, of {total} blocks in {len(pages)} pages"
          f" ({harmony_bin()}, python: {python or 'none'})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
