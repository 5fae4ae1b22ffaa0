"""`corpus-chunker load`: the choice of mode, the run folder checks, and real loads into
PostgreSQL/pgvector and LanceDB of run folders built by hand (tests/load_runs.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pipelines import load
from tests.load_runs import assert_holds_exactly, change, chunk, held, store_state, write_run
from transforms.stores import StoreSpec
from transforms.stores.base import STORE_COLUMNS, LoadState, check_table_name, store_schema
from transforms.stores.loading import CURRENT, FULL, INCREMENTAL, RunToLoad, choose_mode, open_run

ROOT = Path(__file__).resolve().parents[1]

# --- the choice of mode ---------------------------------------------------------------------


def _run(run_id: str = "b", previous: str | None = "a", changes: bool = True) -> RunToLoad:
    shards = {"chunks": ("x",), **({"changes": ("y",)} if changes else {})}
    return RunToLoad("out/b", run_id, previous, 4, shards)


@pytest.mark.parametrize(
    "state, run, full, mode",
    [
        (LoadState(), _run(), False, FULL),  # empty store
        (LoadState("a"), _run(), False, INCREMENTAL),  # holds the previous run
        (LoadState("a"), _run(), True, FULL),  # --full
        (LoadState("z"), _run(), False, FULL),  # holds another run
        (LoadState("a"), _run(previous=None), False, FULL),  # not a rebuild
        (LoadState("a"), _run(changes=False), False, FULL),  # no changes/ table
        (LoadState("b"), _run(), False, CURRENT),  # already loaded
        (LoadState("b"), _run(), True, FULL),
        # a load of this run died midway: redone incrementally, its upserts are this run's
        (LoadState("a", loading_run_id="b"), _run(), False, INCREMENTAL),
        # a load of a third run died midway: its rows would stay, so everything is redone
        (LoadState("a", loading_run_id="c"), _run(), False, FULL),
        (LoadState("b", loading_run_id="c"), _run(), False, FULL),
    ],
)
def test_choose_mode(state: LoadState, run: RunToLoad, full: bool, mode: str) -> None:
    chosen, why = choose_mode(state, run, full)
    assert chosen == mode
    assert why


# --- the run folder and the flags -----------------------------------------------------------


def test_open_run_reads_the_manifest_and_checks_the_shards(tmp_path: Path) -> None:
    out = write_run(str(tmp_path / "r"), [chunk("d", 0, "hello")], "r1", "r0", changes=[])
    run = open_run(out)
    assert (run.run_id, run.previous_run_id, run.embedding_dim) == ("r1", "r0", 4)
    assert run.has_changes
    assert [os.path.basename(p) for p in run.shards["chunks"]] == ["part-00000-of-00001.parquet"]


def test_a_shard_changed_in_place_fails_the_load_and_writes_nothing(tmp_path: Path) -> None:
    """open_run lists the shards (sizes) and reads none; the load checks each shard's sha256
    before it reads it, so a same-size change fails the load, naming the file."""
    pytest.importorskip("lancedb", reason="pip install -e .[load]")
    from transforms.stores import StoreSpec

    out = write_run(str(tmp_path / "r"), [chunk("d", 0, "hello")], "r1", "r0", changes=[])
    run = open_run(out)
    (shard,) = run.shards["chunks"]
    assert [c[0] for c in run.checks if "/chunks/" in c[0]] == [shard]
    with open(shard, "rb") as f:
        data = bytearray(f.read())
    data[5] ^= 0xFF  # same size, other bytes: in the first page, not in the footer
    with open(shard, "wb") as f:
        f.write(bytes(data))
    spec = StoreSpec(f"lancedb://{tmp_path / 'lancedb'}")
    with pytest.raises(Exception, match=r"chunks/part-00000-of-00001\.parquet is not the file"):
        _load(out, spec, "--full")
    assert _rows_of_run(spec, "r1") == 0  # the table is made before the job; no row is in it
    with pytest.raises(ValueError, match="without a check"):
        _run().checked_shards(None, "chunks")  # type: ignore[arg-type]


def test_open_run_refuses_what_is_not_a_loadable_run(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=rf"{tmp_path / 'missing'} has no run_manifest.json"):
        open_run(str(tmp_path / "missing"))
    estimate = write_run(str(tmp_path / "e"), [chunk("d", 0, "x")], "e1", mode="estimate")
    with pytest.raises(ValueError, match="is an --estimate run"):
        open_run(estimate)
    unembedded = write_run(str(tmp_path / "n"), [chunk("d", 0, "x")], "n1", embedding_model="none")
    with pytest.raises(ValueError, match=r"--embedding_model=none.*no embeddings"):
        open_run(unembedded)
    tampered = write_run(str(tmp_path / "t"), [chunk("d", 0, "x")], "t1")
    with open(os.path.join(tampered, "chunks", "part-00000-of-00001.parquet"), "ab") as f:
        f.write(b"more")
    with pytest.raises(ValueError, match=rf"run folder {tampered}: chunks/part-.* is not the file"):
        open_run(tampered)
    old = write_run(str(tmp_path / "o"), [chunk("d", 0, "x")], "o1")
    manifest_path = os.path.join(old, "run_manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    del manifest["run_id"]
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)
    with pytest.raises(ValueError, match="has no run_id"):
        open_run(old)


def test_flags_are_checked_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="--to is required"):
        load.parse(["out/r"])
    with pytest.raises(ValueError, match="unknown argument --ful"):
        load.parse(["out/r", "--to", "lancedb:///tmp/x", "--ful"])
    args, beam_args = load.parse(["out/r", "--to=lancedb:///x", "--runner=DirectRunner"])
    assert (args.dir, args.to, args.table, args.full) == (
        "out/r",
        "lancedb:///x",
        "corpus_chunks",
        False,
    )
    assert beam_args == ["--runner=DirectRunner"]
    with pytest.raises(ValueError, match="--to='mysql://x'"):
        StoreSpec("mysql://x")
    with pytest.raises(ValueError, match="--table='Chunks; drop'"):
        check_table_name("Chunks; drop")


def test_load_is_a_subcommand_of_corpus_chunker(capsys) -> None:
    from pipelines.chunk_corpus import SUBCOMMANDS, main

    assert SUBCOMMANDS["load"] == "pipelines.load:main"
    with pytest.raises(SystemExit) as exit_:
        main(["load", "--help"])
    assert exit_.value.code == 0
    assert "corpus-chunker load DIR --to URI" in capsys.readouterr().out


def test_the_dask_runner_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--runner=daskrunner is refused"):
        load.run([str(tmp_path), "--to", f"lancedb://{tmp_path}/db", "--runner=DaskRunner"])


def test_main_reports_errors_naming_the_folder(tmp_path: Path, capsys) -> None:
    assert load.main([str(tmp_path / "nope"), "--to", f"lancedb://{tmp_path}/db"]) == 2
    assert f"{tmp_path / 'nope'} has no run_manifest.json" in capsys.readouterr().err


def test_store_schema_is_the_chunk_columns_and_run_id() -> None:
    s = store_schema(384)
    assert tuple(s.names) == STORE_COLUMNS
    assert str(s.field("embedding").type) == "fixed_size_list<item: float>[384]"
    assert not s.field("run_id").nullable and s.field("embedding").nullable


# --- real loads -----------------------------------------------------------------------------

RUN_A = [
    chunk("alpha", 0, "alpha one"),
    chunk("alpha", 1, "alpha two"),
    chunk("alpha", 2, "alpha parent", parent=True),
    chunk("beta", 0, "beta one"),
    chunk("beta", 1, "beta two"),
    chunk("gamma", 0, "gamma one"),
    chunk("gamma", 1, "gamma two"),
]


def _rebuild(tmp_path: Path) -> tuple[str, list[dict]]:
    """Run B, rebuilt from run A: beta edited (one chunk kept, one replaced), gamma removed,
    delta added, alpha unchanged."""
    beta_new = chunk("beta", 1, "beta two, edited")
    delta = [chunk("delta", 0, "delta one"), chunk("delta", 1, "delta parent", parent=True)]
    chunks_b = [*RUN_A[:4], beta_new, *delta]
    changes = [
        change("alpha", "unchanged"),
        change("beta", "changed", [beta_new["chunk_id"]], [RUN_A[4]["chunk_id"]]),
        change("gamma", "removed", removed=[RUN_A[5]["chunk_id"], RUN_A[6]["chunk_id"]]),
        change("delta", "added", [c["chunk_id"] for c in delta]),
    ]
    out = write_run(str(tmp_path / "b"), chunks_b, "run-b", "run-a", changes)
    return out, chunks_b


def _load(run_dir: str, spec: StoreSpec, *flags: str) -> None:
    load.run([run_dir, "--to", spec.uri, "--table", spec.table, "--batch_size=2", *flags])


@pytest.mark.slow
def test_full_then_incremental_load_hold_exactly_the_run(
    store: StoreSpec, tmp_path: Path, capsys
) -> None:
    run_a = write_run(str(tmp_path / "a"), RUN_A, "run-a")
    _load(run_a, store)
    assert "upserted 7, deleted 0, mode full" in capsys.readouterr().out
    assert_holds_exactly(store, RUN_A)
    assert held(store)[RUN_A[2]["chunk_id"]]["embedding"] is None  # the parent: no vector
    assert store_state(store) == LoadState("run-a", None)

    run_b, chunks_b = _rebuild(tmp_path)
    _load(run_b, store)
    # only changes/' added chunks are written, and its removed ones deleted
    assert "upserted 3, deleted 3, mode incremental" in capsys.readouterr().out
    assert_holds_exactly(store, chunks_b)
    assert store_state(store) == LoadState("run-b", None)
    rows = held(store)
    assert rows[RUN_A[0]["chunk_id"]]["run_id"] == "run-a"  # untouched
    assert rows[chunks_b[4]["chunk_id"]]["run_id"] == "run-b"


@pytest.mark.slow
def test_loading_the_same_run_again_changes_nothing(
    store: StoreSpec, tmp_path: Path, capsys
) -> None:
    run_a = write_run(str(tmp_path / "a"), RUN_A, "run-a")
    _load(run_a, store)
    before = held(store)
    versions = _row_versions(store)
    capsys.readouterr()
    _load(run_a, store)
    assert "upserted 0, deleted 0, mode current" in capsys.readouterr().out
    _load(run_a, store, "--full")  # every row written again, with the same values
    assert "mode full" in capsys.readouterr().out
    after = held(store)
    assert sorted(after) == sorted(before)
    for chunk_id, row in before.items():
        for name in STORE_COLUMNS:
            if name == "embedding" and row[name] is not None:
                assert (after[chunk_id][name] == row[name]).all()
            else:
                assert after[chunk_id][name] == row[name], name
    assert store_state(store) == LoadState("run-a", None)
    # PostgreSQL: an upsert of an identical row writes nothing (no new row version)
    assert _row_versions(store) == versions


@pytest.mark.slow
def test_an_edit_at_the_top_of_a_document_updates_its_other_chunks_in_place(
    store: StoreSpec, tmp_path: Path, capsys
) -> None:
    """A sentence more in a long document's first chunk: that chunk is replaced, and the 40
    after it keep their ids, texts and vectors and move 7 characters on. The load writes them
    (changes/' chunks_updated); in PostgreSQL as HOT updates, so the HNSW index is left alone."""
    doc = [chunk("long", i, f"part {i} of the long page") for i in range(41)]
    _load(write_run(str(tmp_path / "a"), doc, "run-a"), store)
    first = chunk("long", 0, "One sentence more, then part 0 of the long page")
    moved = [
        c | {"start_char": c["start_char"] + 7, "end_char": c["end_char"] + 7} for c in doc[1:]
    ]
    changes = [
        change(
            "long",
            "changed",
            [first["chunk_id"]],
            [doc[0]["chunk_id"]],
            [c["chunk_id"] for c in moved],
        )
    ]
    hot_before = _hot_updates(store)
    capsys.readouterr()
    _load(write_run(str(tmp_path / "b"), [first, *moved], "run-b", "run-a", changes), store)
    assert "upserted 41, deleted 1, mode incremental" in capsys.readouterr().out
    assert_holds_exactly(store, [first, *moved])
    if store.kind == "postgresql":
        assert _hot_updates(store, at_least=hot_before + 40) == hot_before + 40


@pytest.mark.slow
def test_postgres_updates_a_row_with_a_long_vector_hot(postgres_server) -> None:
    """Vectors of 768 dimensions are stored out of line (TOAST): a row whose offsets alone
    change keeps its stored vector, so the update is HOT (no new HNSW entry)."""
    from transforms.stores.base import store_table

    dim = 768
    rng = np.random.default_rng(7)
    rows = [
        chunk("wide", i, f"wide part {i} " * 40) | {"embedding": rng.normal(size=dim).tolist()}
        for i in range(30)
    ]
    schema = store_schema(dim)
    chunks_schema = pa.schema([schema.field(n) for n in schema.names if n != "run_id"])
    postgres_server.psql("CREATE DATABASE wide;")
    spec = StoreSpec(postgres_server.get_uri("wide"), "wide_chunks")
    store = spec.open()
    try:
        store.prepare(dim)
        store.upsert(store_table(pa.Table.from_pylist(rows, schema=chunks_schema), "r1", dim))
        store.finish("r1")  # builds the HNSW index
        moved = [r | {"start_char": r["start_char"] + 7} for r in rows]
        before = _hot_updates(spec)
        store.upsert(store_table(pa.Table.from_pylist(moved, schema=chunks_schema), "r2", dim))
    finally:
        store.close()
    assert _hot_updates(spec, at_least=before + 30) == before + 30


def _hot_updates(spec: StoreSpec, at_least: int = 0) -> int | None:
    """PostgreSQL: the table's HOT updates so far (statistics arrive a moment after the
    loading connections close, so wait up to 10 s for `at_least`)."""
    if spec.kind != "postgresql":
        return None
    import psycopg

    with psycopg.connect(spec.uri, autocommit=True) as conn:
        for _ in range(100):
            conn.execute("SELECT pg_stat_clear_snapshot()")
            n = conn.execute(
                "SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = %s", (spec.table,)
            ).fetchone()[0]
            if n >= at_least:
                return n
            time.sleep(0.1)
    return n


def _row_versions(spec: StoreSpec) -> dict[str, str] | None:
    if spec.kind != "postgresql":
        return None
    import psycopg

    with psycopg.connect(spec.uri) as conn:
        return dict(conn.execute(f"SELECT chunk_id, xmin::text FROM {spec.table}").fetchall())


@pytest.mark.slow
def test_a_store_holding_another_run_is_loaded_in_full(
    store: StoreSpec, tmp_path: Path, capsys
) -> None:
    other = [chunk("omega", 0, "from elsewhere"), RUN_A[0]]
    _load(write_run(str(tmp_path / "z"), other, "run-z"), store)
    run_b, chunks_b = _rebuild(tmp_path)  # rebuilt from run-a, which the store does not hold
    capsys.readouterr()
    _load(run_b, store)
    out = capsys.readouterr().out
    assert "upserted 7, deleted 1, mode full (the store holds run run-z" in out
    assert_holds_exactly(store, chunks_b)


@pytest.mark.slow
def test_a_chunk_both_removed_and_added_stays(store: StoreSpec, tmp_path: Path) -> None:
    """The same chunk id removed with one document and added with another (the same text
    moved): the delete after the upsert must not take it away."""
    moved = chunk("alpha", 0, "alpha one")
    _load(write_run(str(tmp_path / "a"), RUN_A, "run-a"), store)
    chunks_b = [c for c in RUN_A if c["doc_id"] != "alpha"] + [moved]
    changes = [
        change("alpha", "removed", removed=[c["chunk_id"] for c in RUN_A[:3]]),
        change("alpha2", "added", [moved["chunk_id"]]),
    ]
    _load(write_run(str(tmp_path / "b"), chunks_b, "run-b", "run-a", changes), store)
    assert_holds_exactly(store, chunks_b)


class _Boom(RuntimeError):
    pass


@pytest.mark.slow
@pytest.mark.parametrize("mode", [FULL, INCREMENTAL])
def test_a_load_that_dies_midway_is_redone_by_a_rerun(
    store: StoreSpec, tmp_path: Path, monkeypatch, mode: str
) -> None:
    """The second upsert batch fails: nothing is deleted, the store still records the run it
    held, and the rerun converges to exactly the new run."""
    _load(write_run(str(tmp_path / "a"), RUN_A, "run-a"), store)
    run_b, chunks_b = _rebuild(tmp_path)
    store_class = type(store.open())
    upsert = store_class.upsert
    calls = []

    def failing_upsert(self, rows):
        calls.append(len(rows))
        if len(calls) == 2:
            raise _Boom("the connection dropped")
        return upsert(self, rows)

    monkeypatch.setattr(store_class, "upsert", failing_upsert)
    flags = ["--full"] if mode == FULL else []
    with pytest.raises(Exception, match="the connection dropped"):
        _load(run_b, store, *flags)
    half = held(store)
    assert set(c["chunk_id"] for c in RUN_A) <= set(half)  # no delete ran
    assert store_state(store) == LoadState("run-a", "run-b")
    monkeypatch.setattr(store_class, "upsert", upsert)
    _load(run_b, store)  # without --full: the half-done load of run-b is redone
    assert_holds_exactly(store, chunks_b)
    assert store_state(store) == LoadState("run-b", None)


@pytest.mark.slow
def test_a_second_load_into_the_same_table_is_refused(
    store: StoreSpec, tmp_path: Path, capsys
) -> None:
    """While one load holds the table (PostgreSQL: its advisory lock; LanceDB: the lock file
    beside the table), another fails at once, naming the table, and writes nothing."""
    run_a = write_run(str(tmp_path / "a"), RUN_A, "run-a")
    refused = r"--table=corpus_chunks in .* is in use by another load"
    with load.load_lock(store), pytest.raises(ValueError, match=refused):
        _load(run_a, store)
    _load(run_a, store)  # released: this load goes ahead
    # the refused one had not begun: this one finds the store empty
    assert "mode full (the store holds no run yet)" in capsys.readouterr().out
    assert_holds_exactly(store, RUN_A)


@pytest.mark.slow
def test_a_half_done_load_of_a_third_run_forces_a_full_load(
    store: StoreSpec, tmp_path: Path, monkeypatch, capsys
) -> None:
    _load(write_run(str(tmp_path / "a"), RUN_A, "run-a"), store)
    stray = [chunk("stray", 0, "half loaded")]
    store_class = type(store.open())
    upsert = store_class.upsert

    def upsert_then_fail(self, rows):
        upsert(self, rows)
        raise _Boom("killed")

    monkeypatch.setattr(store_class, "upsert", upsert_then_fail)
    with pytest.raises(Exception, match="killed"):
        _load(write_run(str(tmp_path / "c"), stray, "run-c"), store)
    monkeypatch.setattr(store_class, "upsert", upsert)
    assert "stray-0-half_loaded" in held(store)
    run_b, chunks_b = _rebuild(tmp_path)  # from run-a, which the store still records
    capsys.readouterr()
    _load(run_b, store)
    assert (
        "mode full (a load of run run-c into the store did not finish)" in capsys.readouterr().out
    )
    assert_holds_exactly(store, chunks_b)


@pytest.mark.slow
def test_a_table_of_another_dimension_is_refused(store: StoreSpec, tmp_path: Path) -> None:
    s = store.open()
    try:
        s.prepare(8)
        with pytest.raises(ValueError, match=r"--table=corpus_chunks exists with .*8"):
            s.prepare(4)
    finally:
        s.close()


_SLOW_LOAD = """
import sys, time
from transforms.stores.lance import LanceStore
from transforms.stores.postgres import PostgresStore
from pipelines.load import main

for cls in (LanceStore, PostgresStore):
    def slow(self, rows, upsert=cls.upsert):
        n = upsert(self, rows)
        time.sleep(0.3)  # time for the test to see some batches in and kill the load
        return n
    cls.upsert = slow
sys.exit(main(sys.argv[1:]))
"""


def _rows_of_run(spec: StoreSpec, run_id: str) -> int:
    store = spec.open()
    try:
        if spec.kind == "lancedb":
            return store.chunks.count_rows(f"run_id = '{run_id}'")
        return store.conn.execute(
            f"SELECT count(*) FROM {spec.table} WHERE run_id = %s", (run_id,)
        ).fetchone()[0]
    finally:
        store.close()


@pytest.mark.slow
def test_a_load_killed_midway_converges_when_rerun(store: StoreSpec, tmp_path: Path) -> None:
    """SIGKILL the load process after some upsert batches: the store still records the run
    it held, and a rerun of the same command ends with exactly the new run."""
    _load(write_run(str(tmp_path / "a"), RUN_A, "run-a"), store)
    many = [chunk("delta", i, f"delta chunk number {i}") for i in range(60)]
    changes = [
        change("gamma", "removed", removed=[RUN_A[5]["chunk_id"], RUN_A[6]["chunk_id"]]),
        change("delta", "added", [c["chunk_id"] for c in many]),
    ]
    chunks_b = [*RUN_A[:5], *many]
    run_b = write_run(str(tmp_path / "b"), chunks_b, "run-b", "run-a", changes)
    command = [sys.executable, "-c", _SLOW_LOAD, run_b, "--to", store.uri, "--batch_size=5"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 180
        while _rows_of_run(store, "run-b") < 10:
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the load wrote nothing in 180 s"
            time.sleep(0.1)
        proc.kill()
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert 10 <= _rows_of_run(store, "run-b") < len(many)  # killed midway
    assert RUN_A[5]["chunk_id"] in held(store)  # deletes had not begun
    assert store_state(store) == LoadState("run-a", "run-b")
    _load(run_b, store)
    assert_holds_exactly(store, chunks_b)
    assert store_state(store) == LoadState("run-b", None)


@pytest.mark.slow
def test_the_loaded_store_answers_the_readme_search(store: StoreSpec, tmp_path: Path) -> None:
    """The search queries the README shows find a chunk by its own vector first; PostgreSQL's
    table has its HNSW index."""
    import numpy as np

    _load(write_run(str(tmp_path / "a"), RUN_A, "run-a"), store)
    target = RUN_A[3]
    query = np.asarray(target["embedding"], dtype=np.float32)
    if store.kind == "lancedb":
        import lancedb

        table = lancedb.connect(store.uri[len("lancedb://") :]).open_table("corpus_chunks")
        hits = table.search(query).distance_type("cosine").where("NOT is_parent").limit(10)
        sources = [(h["source"], h["text"]) for h in hits.to_list()]
    else:
        import psycopg
        from pgvector.psycopg import register_vector

        with psycopg.connect(store.uri) as conn:
            register_vector(conn)
            indexes = conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE tablename = 'corpus_chunks'"
            ).fetchall()
            assert any("hnsw (embedding vector_cosine_ops)" in i for (i,) in indexes)
            conn.execute("SET enable_seqscan = off")  # as on a large table: through the index
            rows = conn.execute(
                "SELECT source, section_path, text, embedding <=> %s AS distance "
                "FROM corpus_chunks ORDER BY embedding <=> %s LIMIT 10",
                (query, query),
            ).fetchall()
            sources = [(r[0], r[2]) for r in rows]
    assert sources[0] == (target["source"], target["text"])
    assert len(sources) == 6  # every chunk but the parent, which has no vector
