"""The one registry of the job's tables and columns: name, Arrow type, nullability and doc.

The Arrow schemas (`schemas.arrow`) and the record types' docstrings (`schemas.records`) are
both made from it, so a column is declared, and documented, exactly once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

# The Parquet tables of a run folder.
CHUNKS = "chunks"
DOCUMENTS = "documents"
REJECTS = "rejects"
CHANGES = "changes"
# Each group's boilerplate line counts: what a rebuild updates with the lines of the documents
# that changed, instead of counting every document again (transforms/boilerplate_delta.py).
BOILERPLATE = "boilerplate"
TABLES = (CHUNKS, DOCUMENTS, REJECTS, CHANGES, BOILERPLATE)
# The --embedding_cache folder's files (not a table of a run folder).
EMBEDDING_CACHE = "embedding_cache"
# What a run took from the embedding cache: one row per text whose cached vector it used.
EMBEDDING_CACHE_USE = "embedding_cache_use"

# What a row of changes/ says of its document, against --previous_output (without one, every
# document is added).
ADDED = "added"  # not in the previous run
CHANGED = "changed"  # in it, with other text: its chunks were made again
UNCHANGED = "unchanged"  # in it, with the same text: its chunks were copied
REMOVED = "removed"  # in it, not among this run's inputs
REJECTED = "rejected"  # in it, among this run's inputs, rejected this time
# in it, among this run's inputs, rejected this time for a reason that may pass (a time limit on
# a busy machine): its text and chunks are carried over from the previous run
KEPT = "kept"
CHANGE_KINDS = (ADDED, CHANGED, UNCHANGED, REMOVED, REJECTED, KEPT)


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    doc: str
    nullable: bool = True

    def field(self, type_: pa.DataType | None = None) -> pa.Field:
        return pa.field(
            self.name, type_ or self.type, nullable=self.nullable, metadata={"doc": self.doc}
        )


def _c(name: str, type_: pa.DataType, doc: str, nullable: bool = True) -> Column:
    return Column(name, type_, doc, nullable)


_SHARED = {
    c.name: c
    for c in (
        _c("doc_id", pa.string(), "stable hash of the source URI or the record id", False),
        _c("doc_type", pa.string(), "html, markdown, code, text, pdf, docx or pptx", False),
        _c("language", pa.string(), "programming language of code; null otherwise"),
        _c("source", pa.string(), "input path or URI (JSONL records: path#L<line>)", False),
    )
}

# Columns in table order. A column that two tables hold alike is one entry of _SHARED; a name
# that means something else in another table (rejects' nullable doc_id) is declared there.
COLUMNS: dict[str, tuple[Column, ...]] = {
    CHUNKS: (
        _c(
            "chunk_id",
            pa.string(),
            "stable hash of doc_id, chunk text, its occurrence and config",
            False,
        ),
        _SHARED["doc_id"],
        _SHARED["source"],
        _SHARED["doc_type"],
        _SHARED["language"],
        _c("title", pa.string(), "document title, when known"),
        _c("chunk_index", pa.int32(), "0-based position of the chunk in its document", False),
        _c("text", pa.string(), "the chunk: documents.text[start_char:end_char]", False),
        _c("context", pa.string(), "contextual header embedded before the text; null if none"),
        _c("context_source", pa.string(), "path, llm or path_fallback; null if none"),
        _c("start_char", pa.int64(), "start offset (characters) in documents.text", False),
        _c("end_char", pa.int64(), "end offset (exclusive) in documents.text", False),
        _c("page_start", pa.int32(), "1-based physical page (pptx: slide) of start_char; null"),
        _c("page_end", pa.int32(), "1-based physical page of the chunk's last character; null"),
        _c("page_label", pa.string(), "the PDF's own label of page_start (e.g. iv); null"),
        _c("token_count", pa.int32(), "tokens of text alone in --tokenizer", False),
        _c("embed_tokens", pa.int32(), "tokens of context+text in --pricing_tokenizer", False),
        _c("model_tokens", pa.int32(), "word pieces of context+text in the model tokenizer"),
        _c("section_path", pa.list_(pa.string()), "enclosing headings or class/function", False),
        _c("parent_id", pa.string(), "chunk_id of the parent chunk (small-to-big); null"),
        _c(
            "is_parent",
            pa.bool_(),
            "true for a parent chunk (--parent_chunk_size, or a sentence window)",
            False,
        ),
        _c("strategy", pa.string(), "chunking strategy that produced the chunk", False),
        # The list's fixed size is the model's dimension, known only per run: see chunk_schema.
        _c("embedding", pa.list_(pa.float32()), "normalised float32 embedding of context+text"),
        _c(
            "embedding_model",
            pa.string(),
            "model id of the embedding: the --embedding_model value for torch, else "
            "model|backend|settings|sha256:<file hash>; null if none",
        ),
        _c("config_fingerprint", pa.string(), "hash of every setting that changes output", False),
        _c("content_hash", pa.string(), "sha256 of the document text the chunk came from", False),
    ),
    DOCUMENTS: (
        _SHARED["doc_id"],
        _c("source", pa.string(), "input path or URI", False),
        _SHARED["doc_type"],
        _SHARED["language"],
        _c("title", pa.string(), "title from HTML metadata, the first heading, or the record"),
        _c("url", pa.string(), "canonical URL from HTML metadata or the record"),
        _c("date", pa.string(), "date from HTML metadata"),
        _c("lang", pa.string(), "natural language from HTML metadata (e.g. en)"),
        _c("text", pa.string(), "the extracted text that chunk offsets point into", False),
        _c("content_hash", pa.string(), "sha256 of text", False),
        _c("boilerplate_lines_removed", pa.int32(), "lines dropped as corpus boilerplate", False),
        _c(
            "boilerplate_tokens_removed",
            pa.int32(),
            "tokens in those lines, in --pricing_tokenizer",
            False,
        ),
        _c("page_count", pa.int32(), "pages of a PDF, slides of a PPTX; null otherwise"),
        _c(
            "page_starts",
            pa.list_(pa.int64()),
            "offset in text where each page starts (an empty page: where the next starts)",
        ),
        _c("page_labels", pa.list_(pa.string()), "the PDF's label of each page, when it has"),
        _c(
            "extracted_hash",
            pa.string(),
            "sha256 of the document as extracted, before boilerplate removal (what a rebuild "
            "compares)",
            False,
        ),
        _c(
            "boilerplate_digest",
            pa.string(),
            "digest of the boilerplate lines of the document's group when it was cleaned; "
            "empty for HTML, PDF, DOCX and PPTX, which keep their lines",
            False,
        ),
        _c(
            "line_digests",
            pa.binary(),
            "the 8-byte digests of its distinct line keys as extracted, sorted, end to end "
            "(empty: none could be boilerplate): what it adds to its group's boilerplate "
            "counts, besides 1 to the group's size; null when it is not counted (HTML, PDF, "
            "DOCX, PPTX, --boilerplate off, or a row kept after a transient reject)",
        ),
    ),
    REJECTS: (
        _SHARED["source"],
        _c("doc_id", pa.string(), "document id when one was assigned"),
        _c("chunk_id", pa.string(), "chunk id, for rejects of one chunk (embedding)"),
        _c("stage", pa.string(), "read, extract, chunk or embed", False),
        _c("reason", pa.string(), "short machine-readable reason, e.g. invalid_utf8", False),
        _c("error", pa.string(), "excerpt of the error message", False),
        _c(
            "line_digests",
            pa.binary(),
            "a document rejected (or kept after a transient reject) after its lines were "
            "counted for boilerplate (at chunking, or read again when its group's lines "
            "changed): those lines, as documents.line_digests; null otherwise",
        ),
    ),
    CHANGES: (
        _SHARED["doc_id"],
        _c("source", pa.string(), "input path or URI (the previous run's, if removed)", False),
        _c("change", pa.string(), "added, changed, unchanged, removed, rejected or kept", False),
        _c("content_hash", pa.string(), "sha256 of the text in this run; null if none"),
        _c("previous_content_hash", pa.string(), "sha256 of the text in --previous_output"),
        _c(
            "chunks_added",
            pa.list_(pa.string()),
            "chunk ids of this run's chunks that the previous run does not hold",
            False,
        ),
        _c(
            "chunks_removed",
            pa.list_(pa.string()),
            "chunk ids of the previous run's chunks that this run does not hold",
            False,
        ),
        _c(
            "chunks_updated",
            pa.list_(pa.string()),
            "chunk ids of a changed document that both runs hold (same text, so the same id; "
            "offsets, section path or header may differ): a store upserts them too",
            False,
        ),
    ),
    BOILERPLATE: (
        _c(
            "group",
            pa.binary(),
            "8-byte digest of a boilerplate group: a folder, or a JSONL file",
            False,
        ),
        _c(
            "line",
            pa.binary(),
            "8-byte digest of a line key; empty: the row counts the group's documents",
            False,
        ),
        _c(
            "docs",
            pa.int64(),
            "documents of the group that hold the line (empty line: documents of the group "
            "counted; HTML, PDF, DOCX and PPTX never are)",
            False,
        ),
    ),
    EMBEDDING_CACHE: (
        _c(
            "model",
            pa.string(),
            "the model's cache key: its id and the sha256 of its weights (or ONNX file)",
            False,
        ),
        _c("text_sha256", pa.string(), "sha256 of the embedded text (context+text)", False),
        _c("embedding", pa.list_(pa.float32()), "the normalised float32 vector", False),
        _c("model_tokens", pa.int32(), "word pieces of the text in the model tokenizer"),
        _c(
            "last_used",
            pa.int64(),
            "when a run last made or used the vector, in seconds since 1970 (written by "
            "compaction; a run's own files are dated by their modification time)",
        ),
    ),
    EMBEDDING_CACHE_USE: (
        _c("model", pa.string(), "the model's cache key", False),
        _c("text_sha256", pa.string(), "sha256 of the embedded text whose vector was used", False),
    ),
}


def column_names(table: str) -> tuple[str, ...]:
    return tuple(c.name for c in COLUMNS[table])


def schema(table: str, override: Callable[[Column], pa.DataType | None] | None = None) -> pa.Schema:
    """The Arrow schema of `table`; `override` may give a column another (narrower) type."""
    return pa.schema([c.field(override(c) if override else None) for c in COLUMNS[table]])


def documented(table: str) -> Callable[[type], type]:
    """Class decorator: append the table's column docs to a record type's docstring."""

    def decorate(cls: type) -> type:
        lines = [f"    {c.name}: {c.doc}" for c in COLUMNS[table]]
        cls.__doc__ = f"{cls.__doc__ or ''}\n\n    Columns of `{table}/`:\n" + "\n".join(lines)
        return cls

    return decorate


def _type_name(column: Column) -> str:
    if column.name == "embedding":
        return "fixed_size_list<float>[384]"  # the default model's dimension (see chunk_schema)
    name = str(column.type).replace("list<item: string>", "list<string>")
    return name if column.nullable else f"{name}, not null"


def markdown_table(table: str) -> str:
    """The columns of `table` as the README shows them (a test keeps the README in step)."""
    lines = ["| column | type | meaning |", "|---|---|---|"]
    lines += [
        f"| `{c.name}` | {_type_name(c)} | {c.doc.replace('|', chr(92) + '|')} |"
        for c in COLUMNS[table]
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    for name in TABLES:
        print(f"### `{name}/`\n\n{markdown_table(name)}\n")
