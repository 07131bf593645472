"""Shared fixtures: the repository's paths and the `harmony` binary for the CLI comparison."""

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def harmony_bin() -> str:
    """The `harmony` CLI: $HARMONY_BIN, else target/release or target/debug of this checkout,
    else on PATH. Missing: the test is skipped, unless HARMONY_BIN is set (CI sets it), which
    makes it a failure."""
    env = os.environ.get("HARMONY_BIN")
    if env:
        if not os.access(env, os.X_OK):
            pytest.fail(f"HARMONY_BIN={env} is not an executable")
        return env
    for p in (ROOT / "target" / "release" / "harmony", ROOT / "target" / "debug" / "harmony"):
        if p.exists():
            return str(p)
    found = shutil.which("harmony")
    if found:
        return found
    pytest.skip("no harmony binary (build it with `cargo build --release -p harmony-cli` or set HARMONY_BIN)")
