"""On s3:// (moto's server), a run killed at any step leaves CURRENT naming the old run or the
new one, whole: a reader that follows it never gets a mix (runs/pointer.py, issue 23 item 2).
The local filesystem's kill test is tests/e2e/test_crash.py."""

from __future__ import annotations

import io
import json
import logging
import signal

import pyarrow.parquet as pq
import pytest
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from runs import pointer
from runs.manifest import MANIFEST
from runs.run_folder import RunFolder
from tests.e2e.test_crash import _job
from tests.jobs import run
from tests.s3_server import BUCKET, s3_server
from transforms.stores.loading import open_run

pytestmark = pytest.mark.slow

OUTPUT = f"s3://{BUCKET}/live"
PREFIX = "live/"


@pytest.fixture
def s3():
    with s3_server() as server:
        FileSystems.set_options(PipelineOptions(server.flags))
        pointer.use_store("s3", None)
        try:
            yield server
        finally:
            FileSystems.set_options(None)


def _followed() -> tuple[str, dict[str, bytes]]:
    """What a reader gets by following CURRENT: the run's id and the bytes of every file its
    manifest lists, each checked against the manifest (RunFolder.shards)."""
    folder = RunFolder(OUTPUT)
    _ = folder.shards  # every shard's size and sha256 against the manifest
    files = {}
    for name in [*folder.manifest["files"], MANIFEST]:
        with FileSystems.open(folder.join(name)) as f:
            files[name] = f.read()
    return folder.run_id, files


def _run_folder(objects: dict[str, bytes], run_id: str) -> dict[str, bytes]:
    root = f"{PREFIX}runs/{run_id}/"
    return {k[len(root) :]: v for k, v in objects.items() if k.startswith(root)}


def _new_run_ids(objects: dict[str, bytes], known: set[str]) -> set[str]:
    root = f"{PREFIX}runs/"
    found = {k[len(root) :].split("/", 1)[0] for k in objects if k.startswith(root)}
    return found - known


def test_a_run_killed_at_each_step_leaves_the_old_run_or_the_new_one(s3, tmp_path, caplog):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(3):
        (corpus / f"doc{i}.md").write_text(
            f"# Document {i}\n\n" + f"Paragraph about subject {i}, with some words. " * 20
        )
    args = ["--input", str(corpus / "*"), "--output", OUTPUT, "--embedding_model=none", *s3.flags]
    run([*args, "--quiet"])
    old_id, old_files = _followed()
    assert _run_folder(s3.objects(), old_id) == old_files  # the whole folder, nothing else
    (corpus / "doc1.md").write_text("# Document 1\n\nRewritten today. " * 20)
    rebuild = [*args, "--previous_output", OUTPUT, "--overwrite"]

    # (the fault, --keep_runs, what CURRENT names after it: the old run or the killed one)
    steps = [
        # writing the new run's folder: one table's shards in it (on S3 an object appears
        # whole when closed, so a kill at a row counter leaves no file at all)
        ("kill_after:apache_beam.io.filesystems.FileSystems.rename:1", 2, "old"),
        ("kill_before:runs.pointer.commit:1", 2, "old"),  # its folder whole, CURRENT not moved
        ("kill_after:runs.pointer.commit:1", 2, "new"),  # CURRENT moved, nothing deleted yet
        # keeping 1: deleting the two older runs, killed when the first has lost its manifest
        # and not yet its shards
        ("kill_after:runs.pointer._delete:1", 1, "new"),
    ]
    known = {old_id}
    for fault, keep, expected in steps:
        before = s3.objects()
        killed = _job([*rebuild, f"--keep_runs={keep}"], fault=fault)
        assert killed.returncode == -signal.SIGKILL, (fault, killed.stderr[-3000:])
        after = s3.objects()
        new_ids = _new_run_ids(after, known)
        assert len(new_ids) == 1, (fault, new_ids)
        (new_id,) = new_ids
        known.add(new_id)
        run_id, files = _followed()
        if expected == "old":
            assert run_id == old_id, fault
            assert files == old_files, fault  # byte for byte
            assert _run_folder(after, old_id) == _run_folder(before, old_id), fault
        else:
            assert run_id == new_id, fault
            # the whole new run: its folder holds what its manifest lists, and nothing else
            assert _run_folder(after, new_id) == files, fault
            if keep == 1:  # an older run half deleted: shards left, its manifest gone first
                left = [_run_folder(after, r) for r in known - {new_id}]
                assert [MANIFEST in files for files in left if files].count(False) == 1, fault
            old_id, old_files = new_id, files
        assert f"{PREFIX}LOCK" in after, fault  # a killed run's lock stays, to be taken over

    with caplog.at_level(logging.WARNING):
        run([*rebuild, "--keep_runs=1", "--quiet"])  # takes over the lock, deletes the rest
    assert "taking over the lock" in caplog.text
    final_id, final_files = _followed()
    objects = s3.objects()
    assert sorted(objects) == sorted(
        [f"{PREFIX}CURRENT", *(f"{PREFIX}runs/{final_id}/{name}" for name in final_files)]
    )  # keep_runs=1: only the current run; the lock released
    # --previous_output followed CURRENT: the last committed run's documents are unchanged
    assert json.loads(final_files["cost_report.json"])["documents_unchanged"] == 3
    # and so does load's reading of a run folder (it reads the config CURRENT's run records)
    with pytest.raises(ValueError, match="built with --embedding_model=none"):
        open_run(OUTPUT)
    # the same chunks as the rebuild that was committed, then killed
    assert _chunks(final_files) == _chunks(old_files)
    assert "Rewritten today." in str(_chunks(final_files))
    # the job's commit step retried after its commit went through (transforms/commit.py):
    # nothing is written, CURRENT is as it was
    staged = pointer.run_path(OUTPUT, final_id)
    assert RunFolder(OUTPUT).commit(staged, 1, None) == []
    assert s3.objects() == objects


def _chunks(files: dict[str, bytes]) -> list[tuple[str, str]]:
    rows = [
        row
        for name, data in sorted(files.items())
        if name.startswith("chunks/")
        for row in pq.read_table(io.BytesIO(data), columns=["chunk_id", "text"]).to_pylist()
    ]
    return sorted((r["chunk_id"], r["text"]) for r in rows)
