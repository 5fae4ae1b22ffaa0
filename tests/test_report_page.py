"""The inspection page stays small whatever the run (issue 22: 9.6 MB for 430 KB of input).

The run is generated: its tables are written with the project's schemas, no job is run (the
page reads only the tables, the manifest and the cost report).
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from commands.inspect import PAGE_MAX_BYTES, main
from runs.run_folder import RunFolder
from schemas.arrow import DOCUMENT_SCHEMA, REJECT_SCHEMA, chunk_schema
from schemas.records import DOC_TYPES
from transforms.fingerprint import CONFIG_VERSION

# Every value long and made of what HTML escapes (to 5 bytes a character: the worst case).
ESCAPED = '"&<'
HEADING = ESCAPED * 1_700  # 5 KB: four make each chunk's section path 20 KB
SETTINGS = {
    "config_version": CONFIG_VERSION,
    "chunk_size": 192,
    "chunk_text_room": 158,
    "tokenizer": "cl100k_base",
}


def _write(folder: Path, table: str, rows: list[dict], schema: pa.Schema) -> None:
    """The rows as the table's one shard; a required column they leave out gets 0 or []."""
    for f in schema:
        if not f.nullable and f.name not in rows[0]:
            default = [] if pa.types.is_list(f.type) else 0
            for row in rows:
                row[f.name] = default
    (folder / table).mkdir(parents=True)
    shard = folder / table / "part-0-of-1.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), shard)


def _document(doc_type: str, n: int, chunk_chars: int, chunks: int) -> tuple[dict, list[dict]]:
    """A document of `chunks` chunks of `chunk_chars` characters each (text full of what HTML
    escapes), each under a long section path and header."""
    doc_id = f"{doc_type}-{n}"
    piece = (ESCAPED * chunk_chars)[: chunk_chars - 1] + "\n"
    text = piece * chunks
    source = f"gs://bucket/{'&/' * 1_000}{doc_id}.{doc_type}"
    rows = []
    for i in range(chunks):
        rows.append(
            {
                "chunk_id": f"{doc_id}-{i}",
                "doc_id": doc_id,
                "doc_type": doc_type,
                "source": source,
                "title": ESCAPED * 3_000,
                "chunk_index": i,
                "text": piece,
                "context": ESCAPED * 1_500,
                "start_char": i * chunk_chars,
                "end_char": (i + 1) * chunk_chars,
                "token_count": 1 + (i * 7) % 190,
                "embed_tokens": 1 + (i * 7) % 190,
                "section_path": [HEADING] * 4,
                "is_parent": False,
                "strategy": "recursive",
                "config_fingerprint": "f",
                "content_hash": doc_id,
            }
        )
    document = {
        "doc_id": doc_id,
        "source": source,
        "doc_type": doc_type,
        "title": ESCAPED * 3_000,
        "text": text,
        "content_hash": doc_id,
        "extracted_hash": doc_id,
        "boilerplate_digest": "",
    }
    return document, rows


def _generated_run(folder: Path) -> int:
    """A run of every document type, 4,000 rejects and 4,800 chunks; returns the characters
    of all its rows' values (what a page showing everything would hold)."""
    documents, chunks = [], []
    for doc_type in DOC_TYPES:
        for n in range(2):
            doc, rows = _document(doc_type, n, chunk_chars=200, chunks=200)
            documents.append(doc)
            chunks += rows
    doc, rows = _document("text", 99, chunk_chars=2, chunks=2_000)  # tiny chunks
    documents.append(doc)
    chunks += rows
    rejects = [
        {
            "source": f"/data/{ESCAPED * 1_000}/{i}.html",
            "doc_id": None,
            "chunk_id": None,
            "stage": "extract",
            "reason": f"{ESCAPED * 100}{i % 80}",
            "error": ESCAPED * 170,
        }
        for i in range(4_000)
    ]
    _write(folder, "chunks", chunks, chunk_schema(None))
    _write(folder, "documents", documents, DOCUMENT_SCHEMA)
    _write(folder, "rejects", rejects, REJECT_SCHEMA)
    manifest = {"mode": "run", "config": SETTINGS, "config_fingerprint": "f", "run_id": "r"}
    RunFolder(str(folder)).write_manifest(manifest, map(str, folder.glob("*/*.parquet")))
    return sum(len(str(v)) for row in documents + chunks + rejects for v in row.values())


def test_the_page_stays_under_its_bound_whatever_the_run(tmp_path, capsys):
    run = tmp_path / "run"
    run_chars = _generated_run(run)
    assert main([str(run)]) == 0
    capsys.readouterr()
    size = os.path.getsize(run / "report" / "index.html")
    assert run_chars > 20 * PAGE_MAX_BYTES
    assert size <= PAGE_MAX_BYTES, size
    html = (run / "report" / "index.html").read_text(encoding="utf-8")
    # what is left out is said
    assert "3900 more in the rejects table" in html
    assert "30 more stages and reasons" in html
    assert html.count("the first 50 chunks shown") == 14
