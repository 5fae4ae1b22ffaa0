"""Make a vector store hold exactly the chunks of a finished run: which ones to write and
delete (a pure choice of mode), and the Beam stages that upsert, then delete, then record.

Full load: upsert every chunk of the run (each row tagged with its run_id), then delete every
row of another run. Incremental load, when the store holds the run this one was rebuilt from
(its manifest's previous_run_id): upsert only the chunks changes/ lists as added or updated,
and delete those it lists as removed. Either way the deletes wait for all the upserts, and the
store's record of the run it holds is written last, so a load that dies midway is redone by a
rerun.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from runs.manifest import CheckShards
from runs.run_folder import RunFolder
from schemas.columns import CHANGES, CHUNKS
from transforms.stage_base import Counts
from transforms.stores import StoreSpec
from transforms.stores.base import CHUNK_COLUMNS, LoadState, VectorStore, store_table

FULL = "full"
INCREMENTAL = "incremental"
CURRENT = "current"  # the store already holds this run: nothing to do
DEFAULT_BATCH_SIZE = 500
CHANGES_COLUMNS = ("chunks_added", "chunks_removed", "chunks_updated")  # what a load reads


@dataclass(frozen=True)
class RunToLoad:
    """A finished run folder, its manifest read and its shards listed (sizes checked); each
    shard's sha256 is checked where the load runs, before it is read (`checked_shards`)."""

    output: str
    run_id: str
    previous_run_id: str | None
    embedding_dim: int
    shards: dict[str, tuple[str, ...]]
    chunk_count: int = 0  # rows of chunks/ (chunk ids are unique in a run)
    # (path, manifest entry, error) of each shard, for runs.manifest.CheckShards
    checks: tuple[tuple[str, dict, str], ...] = ()

    def checked_shards(self, pbegin: beam.pvalue.PBegin, table: str) -> beam.PCollection:
        """The paths of `table`'s shards, each found to be the file the manifest lists before
        anything reads it (runs.manifest.CheckShards): the launcher lists the run's shards and
        reads none. A changed one fails the load."""
        paths = self.shards.get(table, ())
        try:
            check = CheckShards(self.checks, paths)
        except ValueError as e:
            raise ValueError(f"{self.output}: {table} {e}") from None
        return pbegin | f"Check {table} shards" >> check

    @property
    def has_changes(self) -> bool:
        return CHANGES in self.shards


def open_run(output: str) -> RunToLoad:
    """The run in `output`; ValueError naming the folder when it is not a complete, embedded
    run whose shards are the files its manifest lists."""
    folder = RunFolder(output, f"the run folder {output}", "rebuild the run before loading it")
    folder.require_chunks(" to load")
    config = folder.config
    dim = config.get("embedding_dimension")
    if str(config.get("embedding_model", "")).lower() == "none" or not dim:
        raise ValueError(
            f"{output} was built with --embedding_model=none: its chunks have no embeddings "
            "to load into a vector store; rebuild it with an embedding model"
        )
    shards = folder.listed_shards
    if CHUNKS not in shards:
        raise ValueError(f"{folder.label} lists no chunks/ shard: nothing to load")
    return RunToLoad(
        output=output,
        run_id=folder.run_id,
        previous_run_id=folder.previous_run_id,
        embedding_dim=int(dim),
        shards=shards,
        chunk_count=sum(_row_count(path) for path in shards[CHUNKS]),
        checks=folder.shard_checks(),
    )


def choose_mode(state: LoadState, run: RunToLoad, full: bool = False) -> tuple[str, str]:
    """(mode, why): how to make a store in `state` hold `run`.

    Incremental only when the store finished loading the run this one was rebuilt from and no
    load of a third run is half done (its upserts would stay); a half-done load of this very
    run is redone the same way. Everything else is a full load."""
    if full:
        return FULL, "--full"
    if state.run_id == run.run_id and state.loading_run_id is None:
        return CURRENT, f"the store already holds run {run.run_id} (--full reloads it)"
    if state.loading_run_id not in (None, run.run_id):
        return FULL, f"a load of run {state.loading_run_id} into the store did not finish"
    if state.run_id is None:
        return FULL, "the store holds no run yet"
    if run.previous_run_id is None or state.run_id != run.previous_run_id:
        return FULL, (
            f"the store holds run {state.run_id}, and {run.output} was not rebuilt from it "
            f"(its previous run: {run.previous_run_id or 'none'})"
        )
    if not run.has_changes:
        return FULL, f"{run.output} has no changes/ table"
    return INCREMENTAL, f"the store holds run {state.run_id}, which {run.output} was rebuilt from"


class _StoreFn(Counts, beam.DoFn):
    """A DoFn with one store connection per instance."""

    def __init__(self, spec: StoreSpec) -> None:
        self.spec = spec
        self.store: VectorStore | None = None

    def setup(self) -> None:
        self.store = self.spec.open()

    def teardown(self) -> None:
        if self.store is not None:
            self.store.close()


class _Upsert(_StoreFn):
    def __init__(self, spec: StoreSpec) -> None:
        super().__init__(spec)

    def process(self, rows: Any) -> Iterator[int]:  # a pyarrow.Table of store rows
        n = self.store.upsert(rows)
        self.stat("chunks_upserted", n)
        yield n


class _DeleteIds(_StoreFn):
    """Batches of chunk ids -> the number deleted, less those the run holds (`kept`). The
    side input `upserted` (the upserts' counts) is there so that no delete starts before every
    upsert is done."""

    def __init__(self, spec: StoreSpec) -> None:
        super().__init__(spec)

    def process(self, chunk_ids: list[str], upserted: list[int], kept: list[str]) -> Iterator[int]:
        held = set(kept)
        n = self.store.delete([i for i in chunk_ids if i not in held])
        self.stat("chunks_deleted", n)
        yield n


class _DeleteOtherRuns(_StoreFn):
    """One element, once every upsert is done (the side input `upserted`) -> the rows of other
    runs deleted."""

    def __init__(self, spec: StoreSpec, run_id: str) -> None:
        super().__init__(spec)
        self.run_id = run_id

    def process(self, _: None, upserted: list[int]) -> Iterator[int]:
        n = self.store.delete_other_runs(self.run_id)
        self.stat("chunks_deleted", n)
        yield n


class StoreMismatchError(RuntimeError):
    """After a load, the store does not hold as many chunks as the run."""


class _RecordLoad(_StoreFn):
    """One element, once every upsert and delete is done (the side inputs: their counts per
    batch) -> the summary, after checking the store holds as many chunks as the run and
    recording the run as the one it holds."""

    def __init__(self, spec: StoreSpec, run_id: str, expected: int) -> None:
        super().__init__(spec)
        self.run_id = run_id
        self.expected = expected

    def process(self, _: None, upserted: list[int], deleted: list[int]) -> Iterator[dict]:
        expected = self.expected  # in the message below
        held = self.store.count()
        if held != expected:
            raise StoreMismatchError(
                f"--table={self.spec.table} holds {held} chunks after the load, and the run "
                f"{expected}: something else writes to it, or it was changed since its last "
                "load; rerun with --full"
            )
        self.store.finish(self.run_id)
        yield {"upserted": sum(upserted), "deleted": sum(deleted), "chunks": held}


class _ReadRows(beam.DoFn):
    """A chunks/ shard -> its rows as the store holds them (pyarrow Tables of at most
    `batch_size` rows): all of them, or only those whose chunk_id is in `ids` (filtered in
    Arrow as the shard is read, so only the rows to write are converted at all)."""

    def __init__(self, run_id: str, embedding_dim: int, batch_size: int) -> None:
        self.run_id = run_id
        self.embedding_dim = embedding_dim
        self.batch_size = batch_size

    def process(self, path: str, ids: list[list[str]] | None = None) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        wanted = None if ids is None else _id_array(ids)
        if wanted is not None and not len(wanted):
            return
        pending: list[Any] = []
        held = 0
        with FileSystems.open(path) as f:
            for batch in pq.ParquetFile(f).iter_batches(
                batch_size=self.batch_size, columns=list(CHUNK_COLUMNS)
            ):
                if wanted is not None:
                    batch = batch.filter(pc.is_in(batch.column("chunk_id"), value_set=wanted))
                if batch.num_rows:
                    pending.append(batch)
                    held += batch.num_rows
                while held >= self.batch_size:
                    table = pa.Table.from_batches(pending)
                    yield self._rows(table.slice(0, self.batch_size))
                    rest = table.slice(self.batch_size)
                    pending, held = rest.to_batches(), rest.num_rows
        if held:
            yield self._rows(pa.Table.from_batches(pending))

    def _rows(self, chunks: Any) -> Any:
        return store_table(chunks, self.run_id, self.embedding_dim)


def _id_array(batches: list[list[str]]) -> Any:
    """Batches of chunk ids (a side input) -> one pyarrow string array, for pc.is_in."""
    import pyarrow as pa

    return pa.array([i for batch in batches for i in batch], type=pa.string())


def _row_count(path: str) -> int:
    """The rows of a Parquet shard, from its footer."""
    import pyarrow.parquet as pq

    with FileSystems.open(path) as f:
        return pq.ParquetFile(f).metadata.num_rows


class _HeldIds(beam.DoFn):
    """A chunks/ shard -> those of `ids` (batches of ids) that it holds (its chunk_id column
    alone is read)."""

    def process(self, path: str, ids: list[list[str]]) -> Iterator[str]:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        wanted = _id_array(ids)
        if not len(wanted):
            return
        with FileSystems.open(path) as f:
            held = pq.read_table(f, columns=["chunk_id"]).column("chunk_id")
        yield from held.filter(pc.is_in(held, value_set=wanted)).to_pylist()


class _ReadChanges(beam.DoFn):
    """A changes/ shard -> the ids to upsert (chunks_added and chunks_updated) and, tagged
    REMOVED, those to delete, in lists of at most `batch_size`."""

    REMOVED = "removed"

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size

    def process(self, path: str) -> Iterator[Any]:
        import pyarrow.parquet as pq

        with FileSystems.open(path) as f:
            table = pq.read_table(f, columns=list(CHANGES_COLUMNS))
        upsert = [*_ids(table, "chunks_added"), *_ids(table, "chunks_updated")]
        removed = _ids(table, "chunks_removed")
        step = self.batch_size
        for start in range(0, len(upsert), step):
            yield upsert[start : start + step]
        for start in range(0, len(removed), step):
            yield beam.pvalue.TaggedOutput(self.REMOVED, removed[start : start + step])


def _ids(table: Any, column: str) -> list[str]:
    return table.column(column).combine_chunks().flatten().to_pylist()


class LoadChunks(beam.PTransform):
    """PBegin -> one summary dict ({upserted, deleted, chunks}) once `store` holds exactly the
    chunks of `run`, loaded in `mode` (FULL or INCREMENTAL) in batches of `batch_size`.

    The store must be prepared and the load begun (VectorStore.prepare, begin) beforehand.
    """

    def __init__(self, run: RunToLoad, spec: StoreSpec, mode: str, batch_size: int) -> None:
        super().__init__()
        if mode not in (FULL, INCREMENTAL):
            raise ValueError(f"mode={mode!r}: expected {FULL!r} or {INCREMENTAL!r}")
        if batch_size < 1:
            raise ValueError(f"--batch_size={batch_size}: must be at least 1")
        self.run = run
        self.spec = spec
        self.mode = mode
        self.batch_size = batch_size

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        run_id = self.run.run_id
        shards = self.run.checked_shards(pbegin, CHUNKS)
        read = _ReadRows(run_id, self.run.embedding_dim, self.batch_size)
        if self.mode == FULL:
            batches = shards | "Read chunks" >> beam.ParDo(read)
        else:
            changes = self.run.checked_shards(pbegin, CHANGES) | "Read changes" >> beam.ParDo(
                _ReadChanges(self.batch_size)
            ).with_outputs(_ReadChanges.REMOVED, main="upsert")
            # Filtered in Arrow as the shards are read: only the rows to write are converted.
            batches = shards | "Read listed chunks" >> beam.ParDo(
                read, beam.pvalue.AsList(changes.upsert)
            )
        # Counts per batch, read whole as side inputs: a stage that takes one starts only once
        # every batch is written (the deletes after the upserts, the record after both).
        upserted = beam.pvalue.AsList(
            batches
            | "Spread batches" >> beam.Reshuffle()
            | "Upsert" >> beam.ParDo(_Upsert(self.spec))
        )
        if self.mode == FULL:
            deleted = (
                pbegin
                | "Once" >> beam.Create([None])
                | "Delete other runs' chunks"
                >> beam.ParDo(_DeleteOtherRuns(self.spec, run_id), upserted)
            )
        else:
            removed = changes[_ReadChanges.REMOVED]
            # A removed id that the run still holds (listed removed by one document and
            # added by another) was just upserted: it must stay.
            kept = shards | "Removed but held" >> beam.ParDo(
                _HeldIds(), beam.pvalue.AsList(removed)
            )
            deleted = removed | "Delete removed" >> beam.ParDo(
                _DeleteIds(self.spec), upserted, beam.pvalue.AsList(kept)
            )
        return (
            pbegin
            | "At the end" >> beam.Create([None])
            | "Record the load"
            >> beam.ParDo(
                _RecordLoad(self.spec, run_id, self.run.chunk_count),
                upserted,
                beam.pvalue.AsList(deleted),
            )
        )
