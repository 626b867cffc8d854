"""Bad input gives one clear error line, exit status 2, and no page: neither a half-written one nor a
temporary file, and an older page at the output path stays as it was."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from report_support import run_cli

SHARED = Path(__file__).resolve().parents[3] / "shared" / "traces"


def _cases(tmp: Path) -> dict[str, tuple[Path, str]]:
    text = tmp / "notes.json"
    text.write_text("these are not the traces you are looking for\n")
    empty = tmp / "empty"
    empty.mkdir()
    whole = gzip.decompress((SHARED / "cuda_alexnet.json.gz").read_bytes())
    cut_json = tmp / "cut.json"
    cut_json.write_bytes(whole[: len(whole) // 2])
    cut_gz = tmp / "cut.json.gz"
    cut_gz.write_bytes((SHARED / "cuda_alexnet.json.gz").read_bytes()[:5000])
    no_events = tmp / "no_events.json"
    no_events.write_text(json.dumps({"schemaVersion": 1}))
    numbers = tmp / "numbers.json"  # JSON, and an array as Chrome's array format is, but of no event
    numbers.write_text("[1, 2, 3]")
    empty_events = tmp / "empty_events.json"
    empty_events.write_text(json.dumps({"traceEvents": []}))
    return {
        "not a trace": (text, "notes.json: not a valid trace: invalid trace at byte 0"),
        "empty folder": (empty, f"no *.json or *.json.gz trace in the folder {empty}"),
        "truncated json": (cut_json, "cut.json: not a valid trace: invalid trace at byte"),
        "truncated gzip": (cut_gz, "cut.json.gz:"),
        "no traceEvents": (no_events, 'no "traceEvents" array'),
        "missing": (tmp / "missing.json", "missing.json: no such file or folder"),
        "no event in it": (numbers, "numbers.json: not a valid trace: none of its 3 events is a trace event"),
        "empty traceEvents": (empty_events, "empty_events.json: not a valid trace: it holds no events"),
    }


CASES = (
    "not a trace",
    "empty folder",
    "truncated json",
    "truncated gzip",
    "no traceEvents",
    "missing",
    "no event in it",
    "empty traceEvents",
)


@pytest.mark.parametrize("case", CASES)
def test_bad_input_writes_nothing(tmp_path, case):
    path, message = _cases(tmp_path)[case]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    fresh = run_cli("report", str(path), "-o", str(out_dir / "new.html"))
    assert fresh.returncode == 2, fresh.stdout + fresh.stderr
    assert fresh.stderr.startswith("error: ") and message in fresh.stderr, fresh.stderr
    assert len(fresh.stderr.strip().splitlines()) == 1, fresh.stderr  # one line, no traceback
    assert fresh.stdout == ""
    # An older page at the output path is left as it was.
    old = out_dir / "old.html"
    old.write_text("<html>older report</html>")
    again = run_cli("report", str(path), "-o", str(old))
    assert again.returncode == 2
    assert old.read_text() == "<html>older report</html>"
    assert sorted(p.name for p in out_dir.iterdir()) == ["old.html"]  # no new page, no temporary file


def test_a_bad_trace_in_a_folder_fails_the_whole_report(tmp_path):
    folder = tmp_path / "ranks"
    folder.mkdir()
    (folder / "rank0.json.gz").write_bytes((SHARED / "cuda_alexnet.json.gz").read_bytes())
    (folder / "rank1.json").write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1,')
    done = run_cli("report", str(folder), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 2 and "rank1.json: not a valid trace" in done.stderr, done.stderr
    assert not (tmp_path / "r.html").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name != "ranks"] == []


def test_a_bad_snapshot_writes_nothing(tmp_path):
    snap = tmp_path / "snap.pickle"
    snap.write_text("hello")
    done = run_cli(
        "report", str(SHARED / "cuda_alexnet.json.gz"), "--memory", str(snap), "-o", str(tmp_path / "r.html")
    )
    assert done.returncode == 2 and "snap.pickle: not a memory snapshot" in done.stderr, done.stderr
    assert not (tmp_path / "r.html").exists()


def test_an_output_that_is_a_folder_or_cannot_be_written(tmp_path):
    trace = str(SHARED / "cuda_triton.json.gz")
    folder = tmp_path / "pages"
    folder.mkdir()
    done = run_cli("report", trace, "-o", str(folder))
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"error: {folder} is a folder: name the page's file (e.g. {folder / 'report.html'})\n"
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = run_cli("report", trace, "-o", str(blocker / "report.html"))  # a parent that is a file
    assert done.returncode == 2 and done.stderr.startswith(f"error: cannot write {blocker / 'report.html'}: ")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "pages"] and not list(folder.iterdir())
