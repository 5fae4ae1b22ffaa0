"""Read back a run's output folder: its Parquet tables, cost report and manifest (any file system
Beam knows: local, gs://, s3://)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems


def table_files(output: str, table: str) -> list[Any]:
    """The shards of one table (Beam's FileMetadata: path and size), sorted by path."""
    pattern = FileSystems.join(output, table, "*.parquet")
    found = FileSystems.match([pattern])[0].metadata_list
    return sorted(found, key=lambda m: m.path)


def read_table(output: str, table: str, columns: list[str] | None = None) -> pa.Table | None:
    """All shards of `output/table/` as one Arrow table; None when the run wrote none."""
    parts = []
    for meta in table_files(output, table):
        with FileSystems.open(meta.path, mime_type="application/octet-stream") as f:
            parts.append(pq.read_table(f, columns=columns))
    if not parts:
        return None
    return pa.concat_tables(parts, promote_options="permissive")


def read_json(output: str, name: str) -> dict[str, Any] | None:
    """`output/name` parsed, or None when it is not there."""
    path = FileSystems.join(output, name)
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path, mime_type="application/json") as f:
        return json.loads(f.read().decode("utf-8"))


def output_bytes(output: str) -> dict[str, int]:
    """Bytes of the run's files: per table folder, the report files together under "reports"."""
    sizes: dict[str, int] = {}
    root = output.rstrip("/") + "/"
    for meta in FileSystems.match([FileSystems.join(output, "**")])[0].metadata_list:
        rel = meta.path[len(root) :] if meta.path.startswith(root) else meta.path
        part = rel.split("/", 1)[0] if "/" in rel else "reports"
        sizes[part] = sizes.get(part, 0) + meta.size_in_bytes
    return sizes
