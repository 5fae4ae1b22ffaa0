"""One run at a time per output folder, a manifest that is written whole and lists every file
with its hash, and a --previous_output whose shards are checked against that list."""

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from runs.manifest import file_inventory
from runs.output_lock import OutputLock, OutputLocked, lock_path
from tests.jobs import run
from tests.tables import manifest, report, rows

pytestmark = pytest.mark.slow


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpha\n\nThe first document. " * 20)
    (folder / "b.txt").write_text("Second document, plain prose. " * 30)
    return folder


def flags(corpus) -> list[str]:
    return ["--input", str(corpus / "*"), "--embedding_model=none", "--boilerplate=off"]


def test_the_manifest_lists_every_file_with_its_size_and_hash(corpus, tmp_path):
    out = str(tmp_path / "out")
    run([*flags(corpus), "--output", out])
    files = manifest(out)["files"]
    on_disk = {
        os.path.relpath(os.path.join(folder, name), out)
        for folder, _, names in os.walk(out)
        for name in names
        if name != "run_manifest.json"
    }
    assert set(files) == on_disk
    assert {"cost_report.json", "cost_report.md"} <= set(files)
    assert files == file_inventory(out, [os.path.join(out, name) for name in files])
    assert not [n for n in os.listdir(out) if ".tmp-" in n]
    assert not os.path.exists(lock_path(out))


def test_a_second_run_into_a_locked_output_is_refused(corpus, tmp_path):
    out = str(tmp_path / "out")
    # A live process (not this one) holds the lock, as a run in another terminal would.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from runs.output_lock import OutputLock\n"
            f"with OutputLock({out!r}):\n    print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OutputLocked, match="in use by another run"):
            run([*flags(corpus), "--output", out])
        assert not os.path.exists(os.path.join(out, "chunks"))  # nothing was written
    finally:
        holder.kill()
        holder.wait()
    # Its holder is gone: the next run takes the lock over and completes.
    run([*flags(corpus), "--output", out])
    assert report(out)["documents_chunked"] == 2
    assert not os.path.exists(lock_path(out))


def test_the_lock_is_exclusive_within_one_process_too(tmp_path):
    out = str(tmp_path / "out")
    with OutputLock(out), pytest.raises(OutputLocked):
        OutputLock(out).__enter__()


def test_a_shard_added_to_the_previous_run_is_not_reused(corpus, tmp_path):
    night1 = str(tmp_path / "night1")
    run([*flags(corpus), "--output", night1])
    chunks_dir = os.path.join(night1, "chunks")
    (shard,) = os.listdir(chunks_dir)
    table = pq.read_table(os.path.join(chunks_dir, shard))
    injected = table.set_column(
        table.schema.get_field_index("text"), "text", [["INJECTED"] * table.num_rows]
    )
    pq.write_table(injected, os.path.join(chunks_dir, "part-99999-of-99999.parquet"))
    night2 = str(tmp_path / "night2")
    run([*flags(corpus), "--output", night2, "--previous_output", night1])
    texts = [c["text"] for c in rows(night2, "chunks")]
    assert "INJECTED" not in texts
    assert len(texts) == table.num_rows
    assert report(night2)["documents_unchanged"] == 2


def test_a_changed_shard_of_the_previous_run_is_refused(corpus, tmp_path):
    night1 = str(tmp_path / "night1")
    run([*flags(corpus), "--output", night1])
    chunks_dir = os.path.join(night1, "chunks")
    (shard,) = os.listdir(chunks_dir)
    path = os.path.join(chunks_dir, shard)
    table = pq.read_table(path)
    pq.write_table(
        table.set_column(
            table.schema.get_field_index("text"), "text", [["CHANGED"] * table.num_rows]
        ),
        path,
    )
    with pytest.raises(ValueError, match="is not the file that run wrote"):
        run([*flags(corpus), "--output", str(tmp_path / "night2"), "--previous_output", night1])


def test_a_shard_changed_in_place_fails_the_job_before_any_row_of_it_is_used(corpus, tmp_path):
    """Issue 23 item 1: the launcher lists the previous run's shards (sizes) and reads none;
    their sha256 is checked in the job, and each table is read only from checked shards. A
    shard of the same size with other bytes fails the job, naming the file; nothing is
    committed."""
    night1 = str(tmp_path / "night1")
    run([*flags(corpus), "--output", night1])
    chunks_dir = os.path.join(night1, "chunks")
    (shard,) = os.listdir(chunks_dir)
    path = os.path.join(chunks_dir, shard)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes
    with open(path, "wb") as f:
        f.write(bytes(data))
    night2 = str(tmp_path / "night2")
    with pytest.raises(Exception, match=f"chunks/{shard} is not the file that run wrote"):
        run([*flags(corpus), "--output", night2, "--previous_output", night1])
    assert not os.path.exists(night2)


def test_a_manifest_without_a_file_list_is_refused(corpus, tmp_path):
    """Issue 22 N7: without a file list the shards cannot be checked (and rows injected into
    them were copied into the new run): refused, no longer read by pattern with a warning."""
    night1 = str(tmp_path / "night1")
    run([*flags(corpus), "--output", night1])
    path = os.path.join(night1, "run_manifest.json")
    with open(path) as f:
        old = json.load(f)
    del old["files"]
    with open(path, "w") as f:
        json.dump(old, f)
    night2 = str(tmp_path / "night2")
    with pytest.raises(ValueError, match="no file list"):
        run([*flags(corpus), "--output", night2, "--previous_output", night1])
    assert not os.path.exists(night2)
