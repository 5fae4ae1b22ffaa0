"""The column registry is the one declaration of every table's columns."""

import dataclasses
import os

import pyarrow as pa

from schemas.arrow import DOCUMENT_SCHEMA, REJECT_SCHEMA, chunk_schema
from schemas.columns import CHUNKS, COLUMNS, DOCUMENTS, REJECTS, TABLES, markdown_table
from schemas.records import Chunk, Document, Reject

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS = {CHUNKS: Chunk, DOCUMENTS: Document, REJECTS: Reject}


def test_each_table_has_a_record_type_holding_its_columns():
    for table, record in RECORDS.items():
        fields = {f.name for f in dataclasses.fields(record)}
        missing = [c.name for c in COLUMNS[table] if c.name not in fields]
        assert not missing, (table, missing)


def test_record_docstrings_come_from_the_registry():
    for table, record in RECORDS.items():
        for column in COLUMNS[table]:
            assert f"{column.name}: {column.doc}" in record.__doc__, (table, column.name)


def test_arrow_schemas_carry_type_nullability_and_doc_of_each_column():
    for table, schema in (
        (CHUNKS, chunk_schema(384)),
        (DOCUMENTS, DOCUMENT_SCHEMA),
        (REJECTS, REJECT_SCHEMA),
    ):
        assert schema.names == [c.name for c in COLUMNS[table]]
        for field, column in zip(schema, COLUMNS[table], strict=True):
            assert field.nullable == column.nullable
            assert field.metadata[b"doc"].decode() == column.doc
    assert chunk_schema(384).field("embedding").type == pa.list_(pa.float32(), 384)
    assert chunk_schema(None).field("embedding").type == pa.list_(pa.float32())


def test_a_column_shared_by_two_tables_is_declared_once():
    # Two tables holding the same column (name, type, nullability, doc) hold one declaration;
    # a name that means something else in another table (rejects' nullable doc_id) is its own.
    declarations: dict[tuple, set[int]] = {}
    for table in TABLES:
        for c in COLUMNS[table]:
            declarations.setdefault((c.name, str(c.type), c.nullable, c.doc), set()).add(id(c))
    assert all(len(ids) == 1 for ids in declarations.values())
    shared = [
        key[0]
        for key in declarations
        if sum(key[0] == c.name for t in TABLES for c in COLUMNS[t]) > 1
    ]
    assert {"doc_id", "doc_type", "language"} <= set(shared)


def test_docs_output_md_shows_the_registry():
    with open(os.path.join(ROOT, "docs", "output.md"), encoding="utf-8") as f:
        page = f.read()
    for table in TABLES:
        assert markdown_table(table) in page, (
            f"docs/output.md's {table}/ table differs: run python -m schemas.columns"
        )
