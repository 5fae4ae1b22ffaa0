"""`corpus-chunker compact-cache --embedding_cache DIR`: rewrite an embedding cache folder with one
entry per model and embedded text, and drop the entries no run has made or used lately.

Each run adds to the folder: `embeddings-<run_id>-*.parquet`, the vectors its model made, and
`used-<run_id>-*.parquet`, the keys of the texts whose cached vector it used
(transforms/embedding/embedding_cache.py). An entry's last use is the latest of: the time of the
files that hold its vector or record its use (their modification time), and the `last_used`
column of a file an earlier compaction wrote. Entries last used more than --max_age_days ago are
dropped; the others are written to `embeddings-compacted-<id>-*.parquet`, with their last use,
and only then are the files that were read deleted. A Beam job, so a cache of billions of
vectors compacts on the same runners as the job that fills it:

    corpus-chunker compact-cache --embedding_cache gs://bucket/cache --max_age_days 30 \\
        --runner=DataflowRunner ...

Files that appear while it runs (a nightly run writing beside it) are neither read nor deleted.
A file that cannot be read is left in place, with a warning. A run reading the folder while the
old files are deleted may miss some of them: it embeds those texts again (cost, not a wrong
vector).
"""

from __future__ import annotations

import argparse
import logging
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines import local_runner
from transforms.embedding.embedding_cache import (
    CACHE_COLUMNS,
    CACHE_SCHEMA,
    USE_SCHEMA,
    VECTOR_FILES,
    cache_file_rows,
    checked_cache_row,
    is_text_key,
    is_use_file,
    write_cache_files,
)
from transforms.stage_base import Counts

_LOG = logging.getLogger(__name__)
DAY = 86_400
COMPACTED = f"{VECTOR_FILES}compacted-"
USE_COLUMNS = tuple(USE_SCHEMA.names)


class Use(NamedTuple):
    """One sighting of an entry: when, and its vector when the sighting holds one."""

    seconds: int
    embedding: tuple[float, ...] | None
    model_tokens: int | None


def _is_parquet(metadata: Any) -> bool:
    return metadata.path.endswith(".parquet")


class _ReadSightings(Counts, beam.DoFn):
    """A cache file's metadata -> ((model, text key), Use) for each of its rows, and the file's
    path (`read`) once it has been read whole; a file that cannot be read is left out (and
    so kept), with a warning."""

    READ = "read"

    def process(self, metadata: Any) -> Iterator[Any]:
        path = metadata.path
        mtime = int(metadata.last_updated_in_seconds)
        vectors = not is_use_file(path)
        required = CACHE_COLUMNS if vectors else USE_COLUMNS
        optional = ("last_used",) if vectors else ()
        out: list[tuple[tuple[str, str], Use]] = []
        try:  # the whole file first: only a file read whole is deleted
            for row in cache_file_rows(path, required, optional):
                use = self._use(row, mtime, vectors)
                if use is None:
                    self.stat("embedding_cache_entries_invalid")
                    continue
                out.append(((row["model"], row["text_sha256"]), use))
        except Exception as e:
            self.stat("embedding_cache_files_unreadable")
            _LOG.warning(
                "compact-cache: leaving %s in place, which is not a readable cache file (%s: %s)",
                path,
                type(e).__name__,
                str(e)[:200],
            )
            return
        self.stat("embedding_cache_files_read")
        yield from out
        yield beam.pvalue.TaggedOutput(self.READ, path)

    @staticmethod
    def _use(row: dict, mtime: int, vectors: bool) -> Use | None:
        model = row.get("model")
        if not isinstance(model, str) or not model:
            return None
        if not vectors:
            return Use(mtime, None, None) if is_text_key(row.get("text_sha256")) else None
        cached = checked_cache_row(row, model, None)
        if cached is None:
            return None
        last = row.get("last_used")
        seconds = int(last) if isinstance(last, int) and last > 0 else mtime
        return Use(seconds, cached.embedding, cached.model_tokens)


class LatestUse(beam.CombineFn):
    """Uses of one entry -> its last use, with a vector (the latest sighting's that has one)."""

    def create_accumulator(self) -> tuple[int, Use | None]:
        return 0, None

    def add_input(self, acc: tuple[int, Use | None], use: Use) -> tuple[int, Use | None]:
        last, vector = acc
        if use.embedding is not None and (vector is None or use.seconds >= vector.seconds):
            vector = use
        return max(last, use.seconds), vector

    def merge_accumulators(self, accs: Iterable[tuple[int, Use | None]]) -> tuple[int, Use | None]:
        last, vector = 0, None
        for seconds, held in accs:
            last = max(last, seconds)
            if held is not None and (vector is None or held.seconds >= vector.seconds):
                vector = held
        return last, vector

    def extract_output(self, acc: tuple[int, Use | None]) -> tuple[int, Use | None]:
        return acc


class _Keep(Counts, beam.DoFn):
    """An entry's last use -> its compacted row, unless it has no vector (a use of a text whose
    vector is gone) or was last used before `oldest`."""

    def __init__(self, oldest: int) -> None:
        self.oldest = oldest

    def process(self, item: tuple[tuple[str, str], tuple[int, Use | None]]) -> Iterator[dict]:
        (model, key), (last, vector) = item
        if vector is None:
            self.stat("embedding_cache_uses_without_vector")
            return
        if last < self.oldest:
            self.stat("embedding_cache_entries_dropped")
            return
        self.stat("embedding_cache_entries_kept")
        yield {
            "model": model,
            "text_sha256": key,
            "embedding": list(vector.embedding),
            "model_tokens": vector.model_tokens,
            "last_used": last,
        }


class _DeleteRead(beam.DoFn):
    """Once the compacted files are written: delete the files that were read."""

    def process(self, _: None, read: list[str], written: list[str]) -> Iterator[int]:
        keep = set(written)
        doomed = sorted(p for p in read if p not in keep)
        if doomed:
            FileSystems.delete(doomed)
        yield len(doomed)


class CompactCache(beam.PTransform):
    """PBegin -> the number of files deleted, once the compacted files are in place."""

    def __init__(self, folder: str, oldest: int, compaction_id: str) -> None:
        super().__init__()
        self.folder = folder
        self.oldest = oldest
        self.compaction_id = compaction_id

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        files = (
            pbegin
            | "Match cache files" >> fileio.MatchFiles(FileSystems.join(self.folder, "*.parquet"))
            | "Only Parquet files" >> beam.Filter(_is_parquet)
            | "Spread files" >> beam.Reshuffle()
        )
        read = files | "Read sightings" >> beam.ParDo(_ReadSightings()).with_outputs(
            _ReadSightings.READ, main="sightings"
        )
        written = (
            read.sightings
            | "Last use of each entry" >> beam.CombinePerKey(LatestUse())
            | "Keep recent entries" >> beam.ParDo(_Keep(self.oldest))
            | "Write compacted"
            >> write_cache_files(self.folder, f"{COMPACTED}{self.compaction_id}", CACHE_SCHEMA)
        )
        return (
            pbegin
            | "Once" >> beam.Create([None])
            | "Delete what was read"
            >> beam.ParDo(
                _DeleteRead(),
                beam.pvalue.AsList(read[_ReadSightings.READ]),
                beam.pvalue.AsList(written),
            )
        )


def _counter(result: Any, name: str) -> int:
    from apache_beam.metrics.metric import MetricsFilter

    found = result.metrics().query(MetricsFilter().with_name(name))["counters"]
    return sum(c.committed or c.attempted or 0 for c in found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="corpus-chunker compact-cache", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--embedding_cache", required=True, help="the cache folder (local, gs://, s3://)"
    )
    parser.add_argument(
        "--max_age_days",
        type=float,
        default=90.0,
        help="drop entries no run has made or used for this many days (default 90)",
    )
    args, beam_args = parser.parse_known_args(argv)
    if not args.max_age_days > 0:
        parser.error(f"--max_age_days must be above 0, got {args.max_age_days}")
    if "*" in args.embedding_cache or "?" in args.embedding_cache:
        parser.error(f"--embedding_cache {args.embedding_cache} holds a wildcard: give the folder")
    found = FileSystems.match([FileSystems.join(args.embedding_cache, "*.parquet")])[0]
    if not found.metadata_list:
        print(f"corpus-chunker compact-cache: {args.embedding_cache}: no cache files; nothing done")
        return 0
    oldest = int(time.time() - args.max_age_days * DAY)
    options = PipelineOptions(beam_args or ["--runner=DirectRunner"])
    with local_runner.pipeline(options) as p:
        _ = p | "Compact" >> CompactCache(args.embedding_cache, oldest, uuid.uuid4().hex)
    result = p.result
    kept = _counter(result, "embedding_cache_entries_kept")
    dropped = _counter(result, "embedding_cache_entries_dropped")
    files = _counter(result, "embedding_cache_files_read")
    unreadable = _counter(result, "embedding_cache_files_unreadable")
    print(
        f"corpus-chunker compact-cache: {args.embedding_cache}: {files} files read "
        f"({unreadable} unreadable, left in place); {kept} entries kept, {dropped} dropped "
        f"(last used over {args.max_age_days:g} days ago)"
    )
    return 0
