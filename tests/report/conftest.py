"""Fixtures of the report's browser tests: one headless Chromium for the session, the folder that keeps the
screenshots (printed at the end), and openreg runs (one rank, two ranks) recorded once."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

from report_browser import Browser  # noqa: E402
from report_support import run_cli  # noqa: E402

ARTIFACTS = Path(os.environ.get("OPENREG_REPORT_ARTIFACTS", REPO / "build" / "report-artifacts"))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if ARTIFACTS.exists():
        terminalreporter.write_line(f"report screenshots and pages: {ARTIFACTS}")


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    print(f"\nreport screenshots and pages: {ARTIFACTS}")
    return ARTIFACTS


@pytest.fixture(scope="session")
def browser():
    with Browser() as b:
        yield b


def _demo(folder: Path, *extra: str) -> Path:
    done = run_cli(
        "demo",
        "-o",
        str(folder),
        "--size",
        "tiny",
        "--wait",
        "0",
        "--warmup",
        "1",
        "--active",
        "2",
        "--repeat",
        "1",
        *extra,
        cwd=folder.parent,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = folder / "report.html"
    assert f"Report (one offline HTML page, open it in any browser): {report}" in done.stdout, done.stdout[-2000:]
    assert report.is_file()
    return folder


@pytest.fixture(scope="session")
def openreg_run(tmp_path_factory) -> Path:
    """A one-rank demo run: its folder holds one trace and the demo's report.html."""
    return _demo(tmp_path_factory.mktemp("report-demo") / "traces")


@pytest.fixture(scope="session")
def two_rank_run(tmp_path_factory) -> Path:
    """`demo --ranks 2` (the demo spawns both ranks and bounds their wait): one trace per rank."""
    return _demo(tmp_path_factory.mktemp("report-ranks") / "traces", "--ranks", "2")
