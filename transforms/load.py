"""Make a vector store hold exactly the chunks of a finished run: which ones to write and
delete (a pure choice of mode), and the Beam stages that upsert, then delete, then record.

Full load: upsert every chunk of the run (each row tagged with its run_id), then delete every
row of another run. Incremental load, when the store holds the run this one was rebuilt from
(its manifest's previous_run_id): upsert only the chunks changes/ lists as added and delete
those it lists as removed. Either way the deletes wait for all the upserts, and the store's
record of the run it holds is written last, so a load that dies midway is redone by a rerun.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from schemas.columns import CHANGES, CHUNKS
from transforms.common import NAMESPACE
from transforms.incremental import PreviousRun, verified_shards
from transforms.stores import StoreSpec
from transforms.stores.base import CHUNK_COLUMNS, LoadState, VectorStore, store_row

FULL = "full"
INCREMENTAL = "incremental"
CURRENT = "current"  # the store already holds this run: nothing to do
DEFAULT_BATCH_SIZE = 500


@dataclass(frozen=True)
class RunToLoad:
    """A finished run folder, its manifest read and its shards checked against it."""

    output: str
    run_id: str
    previous_run_id: str | None
    embedding_dim: int
    shards: dict[str, tuple[str, ...]]

    @property
    def has_changes(self) -> bool:
        return CHANGES in self.shards

    def read_table(self, table: str, columns: list[str] | None = None) -> beam.PTransform:
        """A read of exactly the shards of `table` the manifest lists."""
        return PreviousRun(self.output, "", self.shards).read_table(table, columns)


def open_run(output: str) -> RunToLoad:
    """The run in `output`; ValueError naming the folder when it is not a complete, embedded
    run whose shards are the files its manifest lists."""
    path = FileSystems.join(output, "run_manifest.json")
    if not FileSystems.exists(path):
        raise ValueError(
            f"{output} has no run_manifest.json: not a complete corpus-chunker run "
            "(load reads only finished runs)"
        )
    with FileSystems.open(path) as f:
        manifest = json.loads(f.read().decode("utf-8"))
    if manifest.get("mode") != "run":
        raise ValueError(f"{output} is an --estimate run: it has no chunks to load")
    if not manifest.get("run_id") or manifest.get("files") is None:
        raise ValueError(
            f"{path} has no run_id or no file list: the run was made by an older "
            "corpus-chunker; rebuild it before loading it"
        )
    config = manifest.get("config", {})
    dim = config.get("embedding_dimension")
    if str(config.get("embedding_model", "")).lower() == "none" or not dim:
        raise ValueError(
            f"{output} was built with --embedding_model=none: its chunks have no embeddings "
            "to load into a vector store; rebuild it with an embedding model"
        )
    shards = verified_shards(
        output, manifest["files"], what="the run folder", advice="rebuild the run before loading"
    )
    if CHUNKS not in shards:
        raise ValueError(f"{path} lists no chunks/ shard: nothing to load")
    return RunToLoad(
        output=output,
        run_id=manifest["run_id"],
        previous_run_id=manifest.get("previous_run_id"),
        embedding_dim=int(dim),
        shards=shards,
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


class _StoreFn(beam.DoFn):
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
        self.upserted = Metrics.counter(NAMESPACE, "chunks_upserted")

    def process(self, rows: list[dict]) -> Iterator[int]:
        n = self.store.upsert(rows)
        self.upserted.inc(n)
        yield n


class _DeleteIds(_StoreFn):
    """Batches of chunk ids -> the number deleted. The side input (the upserts' total) is
    there so that no delete starts before every upsert is done."""

    def __init__(self, spec: StoreSpec) -> None:
        super().__init__(spec)
        self.deleted = Metrics.counter(NAMESPACE, "chunks_deleted")

    def process(self, chunk_ids: list[str], upserted: int) -> Iterator[int]:
        n = self.store.delete(chunk_ids)
        self.deleted.inc(n)
        yield n


class _DeleteOtherRuns(_StoreFn):
    """The upserts' total (one element, once they are all done) -> the rows of other runs
    deleted."""

    def __init__(self, spec: StoreSpec, run_id: str) -> None:
        super().__init__(spec)
        self.run_id = run_id
        self.deleted = Metrics.counter(NAMESPACE, "chunks_deleted")

    def process(self, upserted: int) -> Iterator[int]:
        n = self.store.delete_other_runs(self.run_id)
        self.deleted.inc(n)
        yield n


class StoreMismatchError(RuntimeError):
    """After a load, the store does not hold as many chunks as the run."""


class _RecordLoad(_StoreFn):
    """The deletes' total -> the summary, after checking the store holds as many chunks as the
    run and recording the run as the one it holds."""

    def __init__(self, spec: StoreSpec, run_id: str) -> None:
        super().__init__(spec)
        self.run_id = run_id

    def process(self, deleted: int, upserted: int, expected: int) -> Iterator[dict[str, Any]]:
        held = self.store.count()
        if held != expected:
            raise StoreMismatchError(
                f"--table={self.spec.table} holds {held} chunks after the load, and the run "
                f"{expected}: something else writes to it, or it was changed since its last "
                "load; rerun with --full"
            )
        self.store.finish(self.run_id)
        yield {"upserted": upserted, "deleted": deleted, "chunks": held}


def _chunk_id(row: dict) -> str:
    return row["chunk_id"]


class _ReadListedChunks(beam.DoFn):
    """A chunks/ shard -> its rows whose chunk_id is among `ids`."""

    def process(self, path: str, ids: dict[str, bool]) -> Iterator[dict]:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        if not ids:
            return
        wanted = pa.array(list(ids), type=pa.string())
        with FileSystems.open(path) as f:
            for batch in pq.ParquetFile(f).iter_batches(columns=list(CHUNK_COLUMNS)):
                listed = batch.filter(pc.is_in(batch.column("chunk_id"), value_set=wanted))
                yield from listed.to_pylist()


def _key(chunk_id: str) -> tuple[str, bool]:
    return chunk_id, True


def _not_listed(chunk_id: str, ids: dict[str, bool]) -> bool:
    return chunk_id not in ids


def _added(row: dict) -> list[str]:
    return list(row["chunks_added"] or ())


def _removed(row: dict) -> list[str]:
    return list(row["chunks_removed"] or ())


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

    def _batches(self) -> beam.PTransform:
        return beam.BatchElements(min_batch_size=self.batch_size, max_batch_size=self.batch_size)

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        run_id = self.run.run_id
        ids = (
            pbegin
            | "Read chunk ids" >> self.run.read_table(CHUNKS, ["chunk_id"])
            | "Chunk ids" >> beam.Map(_chunk_id)
        )
        expected = (
            ids
            | "Distinct ids" >> beam.Distinct()
            | "Count chunks" >> beam.combiners.Count.Globally()
        )
        if self.mode == FULL:
            rows = pbegin | "Read chunks" >> self.run.read_table(CHUNKS, list(CHUNK_COLUMNS))
        else:
            changes = pbegin | "Read changes" >> self.run.read_table(
                CHANGES, ["chunks_added", "chunks_removed"]
            )
            added = changes | "Added ids" >> beam.FlatMap(_added) | "Key added" >> beam.Map(_key)
            # Filtered in Arrow as the shards are read: only the few added rows (embeddings
            # and all) become Python dicts.
            rows = (
                pbegin
                | "Chunk shards" >> beam.Create(self.run.shards[CHUNKS])
                | "Read added chunks" >> beam.ParDo(_ReadListedChunks(), beam.pvalue.AsDict(added))
            )
        upserted = (
            rows
            | "Store rows" >> beam.Map(store_row, run_id)
            | "Batch rows" >> self._batches()
            | "Upsert" >> beam.ParDo(_Upsert(self.spec))
            | "Total upserted" >> beam.CombineGlobally(sum)
        )
        if self.mode == FULL:
            deleted = upserted | "Delete other runs' chunks" >> beam.ParDo(
                _DeleteOtherRuns(self.spec, run_id)
            )
        else:
            removed = (
                changes
                | "Removed ids" >> beam.FlatMap(_removed)
                | "Distinct removed" >> beam.Distinct()
            )
            # A removed id that the run still holds (the same text now in another document,
            # say) was just upserted: it must stay.
            kept = (
                ids
                | "Removed but held"
                >> beam.Filter(
                    _listed_id, beam.pvalue.AsDict(removed | "Key removed" >> beam.Map(_key))
                )
                | "Key kept" >> beam.Map(_key)
            )
            deleted = (
                removed
                | "Not held" >> beam.Filter(_not_listed, beam.pvalue.AsDict(kept))
                | "Batch ids" >> self._batches()
                | "Delete removed"
                >> beam.ParDo(_DeleteIds(self.spec), beam.pvalue.AsSingleton(upserted))
                | "Total deleted" >> beam.CombineGlobally(sum)
            )
        return deleted | "Record the load" >> beam.ParDo(
            _RecordLoad(self.spec, run_id),
            beam.pvalue.AsSingleton(upserted),
            beam.pvalue.AsSingleton(expected),
        )


def _listed_id(chunk_id: str, ids: dict[str, bool]) -> bool:
    return chunk_id in ids
