"""A run killed at any point leaves the previous output byte-identical, and the rerun gives
exactly the result of a run that was never interrupted (runs/staging.py)."""

import hashlib
import logging
import os
import signal
import subprocess
import sys

import pytest

from runs.staging import recover, staging_folder
from tests.jobs import run
from tests.tables import report, rows

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.slow


def _job(args: list[str], fault: str | None = None) -> subprocess.CompletedProcess:
    """The job in a process of its own; `fault`: a tests/faults.py spec installed in it.
    Without Beam's construction-time type check, as tests/jobs.py runs jobs (the graph is
    the one the in-process runs here build)."""
    program = ["tests.faults", fault] if fault else ["pipelines.chunk_corpus"]
    return subprocess.run(
        [sys.executable, "-m", *program, *args, "--quiet", "--no_pipeline_type_check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _files(folder) -> dict[str, str]:
    out = {}
    for base, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return out


def _result(output: str) -> dict:
    """What the run holds, without what differs between two runs of the same job (run ids,
    timings)."""
    chunks = sorted(
        (c["chunk_id"], c["text"], c["context"], tuple(c["embedding"] or ()))
        for c in rows(output, "chunks")
    )
    changes = sorted(
        (c["doc_id"], c["change"], tuple(c["chunks_added"]), tuple(c["chunks_removed"]))
        for c in rows(output, "changes")
    )
    r = report(output)
    return {"chunks": chunks, "changes": changes, "counts": (r["chunks"], r["documents_in"])}


def test_a_killed_overwrite_leaves_the_previous_run_and_the_rerun_completes(tmp_path, caplog):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(8):
        (corpus / f"doc{i}.md").write_text(
            f"# Document {i}\n\n" + f"Paragraph about subject {i}, with some words. " * 40
        )
    live = tmp_path / "live"
    args = ["--input", str(corpus / "*"), "--output", str(live)]
    # Only the killed runs need a process of their own: the others run in this one.
    run([*args, "--quiet"])
    # tonight's corpus: one edited, one added
    (corpus / "doc3.md").write_text("# Document 3\n\nRewritten today. " * 30)
    (corpus / "new.md").write_text("# New\n\nA document added today. " * 30)
    rebuild = [*args, "--previous_output", str(live), "--overwrite"]
    reference = tmp_path / "reference"  # the uninterrupted rebuild, from a copy of last night
    run(["--input", str(corpus / "*"), "--output", str(reference), "--previous_output", str(live)])
    expected = _result(str(reference))

    for counter in ("documents_extracted", "chunks_embedded", "chunk_rows_written"):
        before = _files(live)
        killed = _job(rebuild, fault=f"kill:{counter}:2")
        assert killed.returncode == -signal.SIGKILL, (counter, killed.stderr[-3000:])
        assert _files(live) == before, counter  # byte for byte, and still a complete run
        assert rows(str(live), "chunks")
        leftovers = [e for e in os.listdir(tmp_path) if e.startswith(".live.")]
        assert all(".staging-" in e or e == ".live.lock" for e in leftovers), leftovers
        if counter == "chunk_rows_written":  # killed while writing: its files are left beside
            assert any(".staging-" in e for e in leftovers), (counter, leftovers)

    with caplog.at_level(logging.WARNING):
        run([*rebuild, "--quiet"])  # the rerun needs no process of its own
    assert "did not complete" in caplog.text  # the killed runs' staging folders, deleted
    assert [e for e in os.listdir(tmp_path) if e.startswith(".live.")] == []  # lock released
    assert _result(str(live)) == expected


def _complete_run(folder, text: str) -> None:
    (folder / "chunks").mkdir(parents=True)
    (folder / "chunks" / "part-00000-of-00001.parquet").write_text(text)
    (folder / "cost_report.json").write_text("{}")
    (folder / "run_manifest.json").write_text(
        '{"config_fingerprint": "f", "mode": "run", "files": {"chunks/part-00000-of-00001.parquet":'
        ' {}, "cost_report.json": {}}}'
    )


def test_a_swap_cut_short_between_its_renames_is_finished_by_the_next_run(tmp_path):
    live = tmp_path / "live"
    _complete_run(live, "old")
    staged = staging_folder(str(live), "run2")
    _complete_run(tmp_path / os.path.basename(staged), "new")
    os.rename(live, tmp_path / ".live.replaced-run2")  # killed right after the first rename
    assert not live.exists()
    lines = recover(str(live))
    assert (live / "chunks" / "part-00000-of-00001.parquet").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["live"] and len(lines) == 2


def test_a_staging_folder_without_a_manifest_is_deleted_and_the_output_kept(tmp_path):
    live = tmp_path / "live"
    _complete_run(live, "old")
    half = tmp_path / os.path.basename(staging_folder(str(live), "run3"))
    (half / "chunks" / "beam-temp-abc").mkdir(parents=True)  # what Beam leaves when killed
    recover(str(live))
    assert sorted(os.listdir(tmp_path)) == ["live"]
    assert (live / "chunks" / "part-00000-of-00001.parquet").read_text() == "old"
