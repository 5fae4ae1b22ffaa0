"""The commit and lock of an object-store output (runs/pointer.py): CURRENT written with a
precondition, so a run that lost a race fails naming the winner; a LOCK created only where
none is, taken over only when its lease ran out or its process ended; retention deleting only
what CURRENT neither names nor keeps. The store is faked here (its preconditions are what S3
and GCS give); the S3 store itself is checked against moto's server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time

import pytest

from runs import pointer
from runs.manifest import MANIFEST
from runs.output_lock import OutputLocked
from runs.pointer import (
    CommitLost,
    ObjectLock,
    PreconditionFailed,
    Stored,
    commit,
    read_pointer,
    remove_unkept,
)


class FakeStore:
    """Objects in a dict, with versions counted up: the preconditions S3 and GCS give. A local
    path's object is also written to its file, where Beam's FileSystems reads it."""

    def __init__(self) -> None:
        self.objects: dict[str, Stored] = {}
        self.writes = 0

    def read(self, path: str) -> Stored | None:
        return self.objects.get(path)

    def _write(self, path: str, data: bytes) -> str:
        self.writes += 1
        if path.startswith("/"):
            with open(path, "wb") as f:
                f.write(data)
        self.objects[path] = Stored(data, str(self.writes))
        return str(self.writes)

    def create(self, path: str, data: bytes) -> str:
        if path in self.objects:
            raise PreconditionFailed(path)
        return self._write(path, data)

    def replace(self, path: str, data: bytes, version: str) -> str:
        if path not in self.objects or self.objects[path].version != version:
            raise PreconditionFailed(path)
        return self._write(path, data)

    def delete(self, path: str, version: str) -> None:
        if path in self.objects:
            if self.objects[path].version != version:
                raise PreconditionFailed(path)
            del self.objects[path]


def _run(output, run_id: str) -> None:
    """A complete run folder `runs/<run_id>/` (its files on local disk: the retention and
    the manifest hash go through Beam's FileSystems, the pointer through the store)."""
    folder = output / "runs" / run_id
    (folder / "chunks").mkdir(parents=True)
    (folder / "chunks" / "part-00000-of-00001.parquet").write_text(run_id)
    (folder / MANIFEST).write_text(json.dumps({"run_id": run_id}))


def test_the_first_commit_creates_current_and_a_second_one_from_it_replaces_it(tmp_path):
    store, out = FakeStore(), str(tmp_path)
    _run(tmp_path, "a")
    first = commit(out, "a", None, 2, store)
    assert read_pointer(out, store) == first and first.kept == ()
    _run(tmp_path, "b")
    second = commit(out, "b", first, 2, store)
    assert (second.run_id, second.kept) == ("b", ("a",))
    assert pointer.current_run_folder(out) == os.path.join(out, "runs", "b")


def test_a_run_that_lost_the_race_fails_naming_the_winner(tmp_path):
    store, out = FakeStore(), str(tmp_path)
    _run(tmp_path, "a")
    start = commit(out, "a", None, 2, store)
    for run_id in ("fast", "slow"):
        _run(tmp_path, run_id)
    commit(out, "fast", start, 2, store)  # both started from run a; "fast" commits first
    with pytest.raises(CommitLost, match=r"now names the run fast .*this run \(slow\) was not"):
        commit(out, "slow", start, 2, store)
    assert read_pointer(out, store).run_id == "fast"
    # two first runs: the second finds CURRENT made
    other = FakeStore()
    _run(tmp_path, "b")
    commit(out, "a", None, 2, other)
    with pytest.raises(CommitLost, match="names the run a"):
        commit(out, "b", None, 2, other)


def test_retention_deletes_only_what_current_neither_names_nor_keeps(tmp_path):
    store, out = FakeStore(), str(tmp_path)
    state = None
    for run_id in ("a", "b", "c"):
        _run(tmp_path, run_id)
        state = commit(out, run_id, state, 2, store)
    _run(tmp_path, "killed")  # a run that never committed
    assert remove_unkept(out, None) == []  # nothing committed: a folder may be a live run's
    lines = remove_unkept(out, state)
    assert pointer.run_folders(out) == ["b", "c"]  # (local folders stay, emptied)
    assert len(lines) == 2 and all("neither current nor kept" in line for line in lines)


def test_current_naming_a_changed_run_folder_is_refused_naming_both(tmp_path):
    store, out = FakeStore(), str(tmp_path)
    _run(tmp_path, "a")
    commit(out, "a", None, 2, store)
    assert pointer.current_run_folder(out).endswith("/runs/a")
    (tmp_path / "runs" / "a" / MANIFEST).write_text("{}")
    with pytest.raises(ValueError, match=r"names the run a, but .*run_manifest.json is not"):
        pointer.current_run_folder(out)
    (tmp_path / "CURRENT").write_text("not json")
    with pytest.raises(ValueError, match="CURRENT is not a pointer this job wrote"):
        pointer.current_run_folder(out)


def test_keep_runs_below_one_is_refused(tmp_path):
    with pytest.raises(ValueError, match="--keep_runs must be at least 1"):
        commit(str(tmp_path), "a", None, 0, FakeStore())


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_the_lock_is_one_runs_and_its_error_names_the_holder():
    store = FakeStore()
    with ObjectLock("s3://bucket/out", "run1", store=store):
        second = ObjectLock("s3://bucket/out", "run2", store=store)
        with pytest.raises(OutputLocked, match=r"in use by another run \(run run1, pid"):
            second.__enter__()
        assert json.loads(store.read("s3://bucket/out/LOCK").data)["run_id"] == "run1"
    assert store.read("s3://bucket/out/LOCK") is None  # released


@pytest.mark.parametrize(
    "holder",
    [
        {"host": "elsewhere", "pid": 1, "lease_until": 0},  # its lease ran out
        {"host": socket.gethostname(), "pid": "dead", "lease_until": 4e9},  # its process ended
        {"garbage": True},  # unreadable: no lease
    ],
)
def test_a_lock_whose_lease_ran_out_or_whose_process_ended_is_taken_over(holder, caplog):
    if holder.get("pid") == "dead":
        holder = {**holder, "pid": _dead_pid()}
    store = FakeStore()
    store.create("s3://bucket/out/LOCK", json.dumps({"run_id": "old", **holder}).encode())
    with ObjectLock("s3://bucket/out", "new", store=store):
        assert json.loads(store.read("s3://bucket/out/LOCK").data)["run_id"] == "new"
    assert "taking over the lock" in caplog.text
    assert store.read("s3://bucket/out/LOCK") is None


def test_a_live_lease_elsewhere_is_not_taken_over():
    store = FakeStore()
    live = {"run_id": "other", "host": "elsewhere", "pid": 1, "lease_until": time.time() + 60}
    store.create("s3://bucket/out/LOCK", json.dumps(live).encode())
    with pytest.raises(OutputLocked, match="run other, pid 1 on elsewhere"):
        ObjectLock("s3://bucket/out", "new", store=store).__enter__()


def test_the_lock_is_renewed_and_a_lock_taken_over_is_not_removed_by_its_old_owner(caplog):
    store = FakeStore()
    lock = ObjectLock("s3://bucket/out", "slow", lease_s=0.3, store=store)
    with lock:
        first = store.read("s3://bucket/out/LOCK").version
        time.sleep(0.35)
        assert store.read("s3://bucket/out/LOCK").version != first  # renewed
        # another run takes it over (say its clock ran ahead): the renewal stops
        taken = store.read("s3://bucket/out/LOCK")
        store.replace("s3://bucket/out/LOCK", b'{"run_id": "thief"}', taken.version)
        time.sleep(0.25)
    assert json.loads(store.read("s3://bucket/out/LOCK").data)["run_id"] == "thief"


def test_each_s3_server_starts_with_an_empty_bucket():
    """moto's buckets live in the process, not the server: each test's server is reset, so
    what one test wrote is not in the next one's bucket (a pytest worker runs several)."""
    from tests.s3_server import BUCKET, s3_server

    with s3_server() as server:
        server.client().put_object(Bucket=BUCKET, Key="out/CURRENT", Body=b"left")
        assert list(server.objects()) == ["out/CURRENT"]
    with s3_server() as server:
        assert server.objects() == {}


def test_the_s3_store_keeps_its_preconditions_on_moto():
    from tests.s3_server import BUCKET, s3_server

    with s3_server() as server:
        store = pointer.S3Store(server.client())
        path = f"s3://{BUCKET}/out/CURRENT"
        assert store.read(path) is None
        version = store.create(path, b"1")
        with pytest.raises(PreconditionFailed):
            store.create(path, b"2")
        newer = store.replace(path, b"3", version)
        with pytest.raises(PreconditionFailed):
            store.replace(path, b"4", version)
        with pytest.raises(PreconditionFailed):
            store.delete(path, version)
        assert store.read(path) == Stored(b"3", newer)
        store.delete(path, newer)
        store.delete(path, newer)  # gone already: done
        assert store.read(path) is None


def test_an_unknown_scheme_has_no_pointer_store():
    with pytest.raises(ValueError, match="hdfs:// has no conditional write"):
        pointer.store_for("hdfs://x/out")


def test_the_gcs_store_writes_with_generation_preconditions():
    pytest.importorskip("google.cloud.storage")
    from google.api_core import exceptions

    calls = []

    class Blob:
        generation = 7

        def upload_from_string(self, data, content_type, if_generation_match):
            calls.append(("upload", data, if_generation_match))
            if if_generation_match not in (0, 7):
                raise exceptions.PreconditionFailed("412")
            self.generation = 8

        def delete(self, if_generation_match):
            calls.append(("delete", if_generation_match))

    class Client:
        def bucket(self, name):
            assert name == "bucket"
            return self

        def blob(self, key):
            assert key == "out/CURRENT"
            return Blob()

    store = pointer.GcsStore(Client())
    assert store.create("gs://bucket/out/CURRENT", b"x") == "8"
    assert store.replace("gs://bucket/out/CURRENT", b"y", "7") == "8"
    with pytest.raises(PreconditionFailed):
        store.replace("gs://bucket/out/CURRENT", b"z", "6")
    store.delete("gs://bucket/out/CURRENT", "8")
    assert calls == [
        ("upload", b"x", 0),
        ("upload", b"y", 7),
        ("upload", b"z", 6),
        ("delete", 8),
    ]


def test_an_older_versions_flat_run_is_read_until_current_names_a_run_then_deleted():
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions

    from runs.run_folder import RunFolder
    from tests.s3_server import BUCKET, s3_server

    def write(path: str, text: str) -> None:
        with FileSystems.create(path) as f:
            f.write(text.encode())

    manifest = '{"config_fingerprint": "f", "run_id": "%s"}'
    with s3_server() as server:
        FileSystems.set_options(PipelineOptions(server.flags))
        pointer.use_store("s3", None)
        try:
            out = f"s3://{BUCKET}/out"
            write(f"{out}/chunks/part-00000-of-00001.parquet", "flat")
            write(f"{out}/{MANIFEST}", manifest % "flat")
            folder = RunFolder(out)
            assert folder.path == out and folder.is_complete()  # no CURRENT: the folder itself
            staged = folder.staging_folder("r1")
            assert staged == f"{out}/runs/r1"
            write(f"{staged}/chunks/part-00000-of-00001.parquet", "r1")
            write(f"{staged}/{MANIFEST}", manifest % "r1")
            lines = folder.swap_in(staged, keep_runs=2)
            assert folder.path == staged and RunFolder(out).path == staged
            assert lines == [f"deleted the 2 files of the run an older version wrote in {out}"]
            assert sorted(server.objects("out/")) == [
                "out/CURRENT",
                "out/runs/r1/chunks/part-00000-of-00001.parquet",
                f"out/runs/r1/{MANIFEST}",
            ]
            with pytest.raises(ValueError, match="is not a run folder of"):
                folder.swap_in(f"s3://{BUCKET}/elsewhere/r2")
        finally:
            FileSystems.set_options(None)
            pointer.use_store("s3", None)
