"""Write the chunk, document and reject tables as zstd Parquet shards with explicit schemas."""

from __future__ import annotations

from collections.abc import Iterator

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io import filebasedsink, parquetio
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.parquetio import WriteToParquet

from schemas.arrow import (
    CHANGE_SCHEMA,
    DOCUMENT_SCHEMA,
    REJECT_SCHEMA,
    chunk_row,
    chunk_schema,
    document_row,
    reject_row,
)
from schemas.columns import CHANGES, CHUNKS, DOCUMENTS, REJECTS
from schemas.records import Chunk
from transforms.stage_base import Counts

# The chunk rows of unchanged documents, copied from --previous_output into chunks/ as they are.
REUSED_CHUNK_ROWS = "reused_chunk_rows"


class _ChunkRows(Counts, beam.DoFn):
    """Chunk -> its row of chunks/, counted (`chunk_rows_written`) as it goes to the sink."""

    def process(self, chunk: Chunk) -> Iterator[dict]:
        self.stat("chunk_rows_written")
        yield chunk_row(chunk)


def table_prefix(output: str, table: str) -> str:
    return FileSystems.join(output, table, "part")


# Columns without min/max statistics: for a 60 MB document text, the statistics alone cost
# 270 MB of memory while the row group was written, and no reader prunes on a text's range.
NO_STATISTICS = frozenset({"text", "context", "error"})


class _ParquetSinkWithoutTextStatistics(parquetio._ParquetSink):
    """Beam's Parquet sink, with statistics for every column but NO_STATISTICS."""

    def open(self, temp_path: str) -> pq.ParquetWriter:
        self._file_handle = filebasedsink.FileBasedSink.open(self, temp_path)
        return pq.ParquetWriter(
            self._file_handle,
            self._schema,
            compression=self._codec,
            use_deprecated_int96_timestamps=self._use_deprecated_int96_timestamps,
            use_compliant_nested_type=self._use_compliant_nested_type,
            write_statistics=[n for n in self._schema.names if n not in NO_STATISTICS],
        )


class WriteTable(beam.PTransform):
    """Rows (already dicts) -> `DIR/<table>/part-SSSSS-of-NNNNN.parquet`; outputs file names."""

    def __init__(self, output: str, table: str, schema: pa.Schema) -> None:
        super().__init__()
        self.output = output
        self.table = table
        self.schema = schema

    def expand(self, rows: beam.PCollection) -> beam.PCollection:
        write = WriteToParquet(
            table_prefix(self.output, self.table),
            schema=self.schema,
            codec="zstd",
            file_name_suffix=".parquet",
            record_batch_size=1000,
            row_group_buffer_size=16 * 1024 * 1024,
        )
        # WriteToParquet takes no statistics setting: its sink gets the one open() that does
        write._sink.__class__ = _ParquetSinkWithoutTextStatistics
        return rows | f"Write {self.table}" >> write


class WriteShards(beam.PTransform):
    """Chunks, documents and rejects to their Parquet tables; returns the written files."""

    def __init__(self, output: str, embedding_dim: int | None, write_chunks: bool = True) -> None:
        super().__init__()
        self.output = output
        self.embedding_dim = embedding_dim
        self.write_chunks = write_chunks

    def expand(self, tables: dict[str, beam.PCollection]) -> beam.PCollection:
        written = []
        if self.write_chunks:
            rows = tables[CHUNKS] | "Chunk rows" >> beam.ParDo(_ChunkRows())
            if REUSED_CHUNK_ROWS in tables:  # incremental: rows copied from the last run
                rows = (rows, tables[REUSED_CHUNK_ROWS]) | "New and reused" >> beam.Flatten()
            written.append(
                rows
                | "Chunks table"
                >> WriteTable(self.output, CHUNKS, chunk_schema(self.embedding_dim))
            )
        written.append(
            tables[DOCUMENTS]
            | "Document rows" >> beam.Map(document_row)
            | "Documents table" >> WriteTable(self.output, DOCUMENTS, DOCUMENT_SCHEMA)
        )
        written.append(
            tables[REJECTS]
            | "Reject rows" >> beam.Map(reject_row)
            | "Rejects table" >> WriteTable(self.output, REJECTS, REJECT_SCHEMA)
        )
        if self.write_chunks:  # an --estimate changes nothing
            written.append(
                tables[CHANGES] | "Changes table" >> WriteTable(self.output, CHANGES, CHANGE_SCHEMA)
            )
        return tuple(written) | "All written files" >> beam.Flatten()
