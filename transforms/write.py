"""Write the chunk, document, reject and change tables as zstd Parquet shards with explicit
schemas, through Beam's `fileio.WriteToFiles` (one write per table, fused with the stage that
makes its rows) and a Parquet `FileSink`."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.value_provider import StaticValueProvider

from runs.manifest import file_entry
from runs.staging import delete_folder
from schemas.arrow import (
    BOILERPLATE_SCHEMA,
    CHANGE_SCHEMA,
    DOCUMENT_SCHEMA,
    REJECT_SCHEMA,
    chunk_row,
    chunk_schema,
    document_row,
    reject_row,
)
from schemas.columns import BOILERPLATE, CHANGES, CHUNKS, DOCUMENTS, REJECTS
from transforms.stage_base import Counts

# The chunk rows of unchanged documents, copied from --previous_output into chunks/ as they are.
REUSED_CHUNK_ROWS = "reused_chunk_rows"


def table_prefix(output: str, table: str) -> str:
    return FileSystems.join(output, table, "part")


# Columns without min/max statistics: for a 60 MB document text, the statistics alone cost
# 270 MB of memory while the row group was written, and no reader prunes on a text's range.
NO_STATISTICS = frozenset({"text", "context", "error"})
# Rows are turned into Arrow record batches of this many, and a row group is written once its
# batches hold this many bytes (what Beam's WriteToParquet did here).
RECORD_BATCH_ROWS = 1000
ROW_GROUP_BYTES = 16 * 1024 * 1024
# Where each bundle's files are written before they are renamed to their final names; removed
# once every table is complete. A killed run leaves it inside its staging folder, which the next
# run deletes whole (runs/staging.py).
TEMP_FOLDER = ".temp-tables"


SHARD_NAME = re.compile(r"part-\d+-of-\d+\.parquet")  # a table's file, as shard_name names it


# The progress counter of a table's rows as the Parquet writer takes them.
COUNTERS = {CHUNKS: "chunk_rows_written"}


def shard_name(table: str, index: int, total: int) -> str:
    """`TABLE/part-SSSSS-of-NNNNN.parquet`, relative to the run folder."""
    return f"{table}/part-{index:05d}-of-{total:05d}.parquet"


# The key of a data file's Parquet key-value metadata that names its recorded entry: its size
# and sha256, computed by the sink as it wrote the file and saved as HASHES_FOLDER/<name>.json,
# so that the manifest needs no second reading of the file (`recorded_entry`).
FILE_KEY = b"corpus_chunker.file"
HASHES_FOLDER = ".hashes"


class _HashingWriter:
    """A file object that hands every byte on to `raw` and hashes it: the file's sha256 and
    size as written. Closing it leaves `raw` open (WriteToFiles closes its own handle)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        self.raw.write(data)
        return len(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self.raw.flush()

    @property
    def closed(self) -> bool:
        return self.raw.closed

    def close(self) -> None:
        pass

    def writable(self) -> bool:
        return True

    def entry(self) -> dict[str, Any]:
        return {"bytes": self.size, "sha256": self.digest.hexdigest()}


def recorded_entry(path: str, hashes: str) -> dict[str, Any]:
    """{bytes, sha256} of a data file: as its sink recorded them while writing it (its footer
    names the record; only the footer and the record are read), or, for a file without one
    (an empty shard, a file another writer made), read back whole."""
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            meta = pq.read_metadata(f).metadata or {}
        name = meta.get(FILE_KEY)
        if name:
            record = FileSystems.join(hashes, name.decode("ascii") + ".json")
            with FileSystems.open(record, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                entry = json.loads(f.read())
            size = FileSystems.match([path])[0].metadata_list[0].size_in_bytes
            if entry.get("bytes") == size:
                return {"bytes": entry["bytes"], "sha256": entry["sha256"]}
    except (OSError, ValueError, KeyError, IndexError, pa.ArrowException):
        pass
    return file_entry(path)


class ParquetSink(Counts, fileio.FileSink):
    """Rows (dicts) of one table -> one zstd Parquet file with the table's explicit schema.

    Statistics for every column but NO_STATISTICS. `folder`, the table's final folder, is made
    when a file is opened: `WriteToFiles` renames its files into place and, on a local disk, a
    rename into a missing folder fails (and Beam only logs it, at debug level). `counter`: a
    counter (`stat`) of the rows handed to the Parquet writer (`chunk_rows_written`).
    """

    def __init__(
        self,
        schema: pa.Schema,
        folder: str | None = None,
        counter: str | None = None,
        hashes: str | None = None,
    ) -> None:
        """`hashes`: where each file's size and sha256, hashed as it is written, are recorded
        (`recorded_entry`); None: not recorded."""
        self.schema = schema
        self.folder = folder
        self.counter = counter
        self.hashes = hashes
        self._name: str | None = None  # of the file being written (its temporary name)
        self._hashing: _HashingWriter | None = None
        self._writer: pq.ParquetWriter | None = None
        self._rows: list[dict] = []
        self._batches: list[pa.RecordBatch] = []
        self._batch_bytes = 0

    def create_metadata(self, destination: str, full_file_name: str) -> fileio.FileMetadata:
        # WriteToFiles names each file it opens here, before `open`: its record's name
        self._name = full_file_name.rstrip("/").rsplit("/", 1)[-1]
        return super().create_metadata(destination, full_file_name)

    def open(self, fh: BinaryIO) -> None:
        if self.folder is not None:
            _make_folder(self.folder)
        self._hashing = _HashingWriter(fh)
        self._writer = pq.ParquetWriter(
            self._hashing,
            self.schema,
            compression="zstd",
            write_statistics=[n for n in self.schema.names if n not in NO_STATISTICS],
        )

    def write(self, record: tuple[str, dict]) -> None:
        if self.counter is not None:
            self.stat(self.counter)
        self._rows.append(record[1])
        if len(self._rows) >= RECORD_BATCH_ROWS:
            self._to_batch()
        if self._batch_bytes >= ROW_GROUP_BYTES:
            self._write_row_group()

    def flush(self) -> None:
        """The rows still held, then the file's footer: `WriteToFiles` calls this once, last."""
        self._to_batch()
        self._write_row_group()
        if self._writer is not None:
            recorded = self.hashes is not None and self._name is not None
            if recorded:
                self._writer.add_key_value_metadata({FILE_KEY: self._name.encode("ascii")})
            self._writer.close()  # the footer; the file handle is WriteToFiles' to close
            self._writer = None
            if recorded and self._hashing is not None:
                _make_folder(self.hashes)
                record = FileSystems.join(self.hashes, f"{self._name}.json")
                with FileSystems.create(
                    record, compression_type=CompressionTypes.UNCOMPRESSED
                ) as f:
                    f.write(json.dumps(self._hashing.entry()).encode("utf-8"))

    def _to_batch(self) -> None:
        if self._rows:
            batch = pa.RecordBatch.from_pylist(self._rows, schema=self.schema)
            self._batches.append(batch)
            self._batch_bytes += batch.nbytes
            self._rows = []

    def _write_row_group(self) -> None:
        if self._batches:
            assert self._writer is not None, "ParquetSink.write after flush"
            self._writer.write_table(pa.Table.from_batches(self._batches, schema=self.schema))
            self._batches, self._batch_bytes = [], 0


class _CompleteTables(beam.DoFn):
    """After every file is in place: an empty shard for each table that got no row, the
    temporary folder removed, and every data file of the run out, by its full path.

    A table is always a folder with at least one file with its schema, so that a reader of an
    empty table (no rejects tonight) gets the columns, not a missing folder.
    """

    def __init__(self, output: str, schemas: dict[str, pa.Schema]) -> None:
        self.output = output
        self.schemas = schemas

    def process(self, _: None, written: list[str]) -> Iterator[str]:
        paths = sorted(FileSystems.join(self.output, name) for name in set(written))
        missing = [p for p in paths if not FileSystems.exists(p)]
        if missing:  # WriteToFiles logs a failed rename at debug level and goes on
            raise OSError(f"files the run wrote are not in place: {', '.join(missing[:3])}")
        tables_written = {name.split("/", 1)[0] for name in written}
        for table, schema in self.schemas.items():
            if table in tables_written:
                continue
            _make_folder(FileSystems.join(self.output, table))
            path = FileSystems.join(self.output, shard_name(table, 0, 1))
            with FileSystems.create(path) as f:
                pq.write_table(schema.empty_table(), f, compression="zstd")
            paths.append(path)
        delete_folder(FileSystems.join(self.output, TEMP_FOLDER))
        yield from paths


class WriteTables(beam.PTransform):
    """(table, row) pairs -> `DIR/<table>/part-SSSSS-of-NNNNN.parquet` for each table of
    `schemas`; outputs the full path of every file written, once they are all in place.

    The input is one PCollection of pairs, or a tuple of them: each goes through its own
    `fileio.WriteToFiles` (the table as its destination), which fuses with the stage that makes
    its rows. A Flatten of them before one write would be a stage boundary on the local
    runners (every row encoded and decoded once more), and each write adds its own stages: a
    table of many small rows (chunks) is cheaper written alone, a few tables of few rows
    together. A table of `schemas` that gets no row gets one empty shard.
    """

    def __init__(
        self, output: str, schemas: dict[str, pa.Schema], record_hashes: bool = False
    ) -> None:
        """`record_hashes`: each file's size and sha256 are recorded as it is written, in
        `output`/HASHES_FOLDER (`recorded_entry` reads them; the run's manifest step deletes
        them)."""
        super().__init__()
        self.output = output
        self.schemas = schemas
        self.record_hashes = record_hashes

    def expand(self, rows: beam.PCollection | tuple[beam.PCollection, ...]) -> beam.PCollection:
        output, schemas = self.output, self.schemas
        hashes = FileSystems.join(output, HASHES_FOLDER) if self.record_hashes else None
        writes = rows if isinstance(rows, tuple) else (rows,)
        if not writes:
            raise ValueError("WriteTables needs at least one PCollection of rows")
        names = [
            pairs
            | f"Write files {i}"
            >> fileio.WriteToFiles(
                path=output,
                destination=_table_of,
                sink=lambda table: ParquetSink(
                    schemas[table], FileSystems.join(output, table), COUNTERS.get(table), hashes
                ),
                file_naming=_file_naming,
                temp_directory=StaticValueProvider(str, FileSystems.join(output, TEMP_FOLDER)),
            )
            | f"File names {i}" >> beam.Map(_file_name)
            for i, pairs in enumerate(writes)
        ]
        written = names[0] if len(names) == 1 else names | "File names" >> beam.Flatten()
        return (
            written.pipeline
            | "Once" >> beam.Create([None])
            | "Complete tables"
            >> beam.ParDo(_CompleteTables(output, schemas), beam.pvalue.AsList(written))
        )


class WriteTable(beam.PTransform):
    """Rows (dicts) of one table -> `DIR/<table>/part-SSSSS-of-NNNNN.parquet`; outputs the
    files' paths."""

    def __init__(self, output: str, table: str, schema: pa.Schema) -> None:
        super().__init__()
        self.output = output
        self.table = table
        self.schema = schema

    def expand(self, rows: beam.PCollection) -> beam.PCollection:
        table = self.table
        return (
            rows
            | f"{table} rows" >> beam.Map(lambda row: (table, row))
            | f"Write {table}" >> WriteTables(self.output, {table: self.schema})
        )


class WriteShards(beam.PTransform):
    """Chunks, documents, rejects and changes to their Parquet tables (`WriteTables`: the chunk
    rows, most of the rows, written alone where they are made; the others in one write);
    returns the written files."""

    def __init__(self, output: str, embedding_dim: int | None, write_chunks: bool = True) -> None:
        super().__init__()
        self.output = output
        self.embedding_dim = embedding_dim
        self.write_chunks = write_chunks

    def expand(self, tables: dict[str, beam.PCollection]) -> beam.PCollection:
        schemas = {DOCUMENTS: DOCUMENT_SCHEMA, REJECTS: REJECT_SCHEMA}
        others = [
            tables[DOCUMENTS] | "Document rows" >> beam.Map(lambda d: (DOCUMENTS, document_row(d))),
            tables[REJECTS] | "Reject rows" >> beam.Map(lambda r: (REJECTS, reject_row(r))),
        ]
        writes = []
        if self.write_chunks:  # an --estimate changes nothing
            schemas[CHUNKS] = chunk_schema(self.embedding_dim)
            schemas[CHANGES] = CHANGE_SCHEMA
            chunk_rows = tables[CHUNKS] | "Chunk rows" >> beam.Map(lambda c: (CHUNKS, chunk_row(c)))
            if REUSED_CHUNK_ROWS in tables:  # incremental: rows copied from the last run
                reused = tables[REUSED_CHUNK_ROWS] | "Reused rows" >> beam.Map(
                    lambda r: (CHUNKS, r)
                )
                chunk_rows = (chunk_rows, reused) | "New and reused chunk rows" >> beam.Flatten()
            writes.append(chunk_rows)
            others.append(tables[CHANGES] | "Change rows" >> beam.Map(lambda r: (CHANGES, r)))
            schemas[BOILERPLATE] = BOILERPLATE_SCHEMA  # an empty table with --boilerplate off
            if BOILERPLATE in tables:
                others.append(
                    tables[BOILERPLATE] | "Boilerplate rows" >> beam.Map(lambda r: (BOILERPLATE, r))
                )
        writes.append(others | "Other rows" >> beam.Flatten())
        return tuple(writes) | "Tables" >> WriteTables(self.output, schemas, record_hashes=True)


def _make_folder(folder: str) -> None:
    """`folder` made if missing (a no-op on object stores); another bundle may make it first."""
    try:
        if not FileSystems.exists(folder):
            FileSystems.mkdirs(folder)
    except OSError:
        if not FileSystems.exists(folder):
            raise


def _table_of(record: tuple[str, dict]) -> str:
    return record[0]


def _file_name(result: Any) -> str:
    return result.file_name


def _file_naming(
    window: Any, pane: Any, shard_index: int, total_shards: int, compression: str, destination: str
) -> str:
    return shard_name(destination, shard_index, total_shards)
