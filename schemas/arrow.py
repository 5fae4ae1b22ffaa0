"""The explicit Arrow schema of every Parquet table the job writes; each column documented once."""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from schemas.records import Chunk, Document, Reject


def _f(name: str, type_: pa.DataType, doc: str, nullable: bool = True) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={"doc": doc})


def chunk_schema(embedding_dim: int | None) -> pa.Schema:
    """`chunks/`: one row per chunk. `embedding_dim=None` when the run embeds nothing."""
    embedding_type = (
        pa.list_(pa.float32(), embedding_dim) if embedding_dim else pa.list_(pa.float32())
    )
    return pa.schema(
        [
            _f("chunk_id", pa.string(), "stable hash of content_hash, offsets and config", False),
            _f("doc_id", pa.string(), "stable hash of the source URI or the record id", False),
            _f("source", pa.string(), "input path or URI (JSONL records: path#L<line>)", False),
            _f("doc_type", pa.string(), "html, markdown, code or text", False),
            _f("language", pa.string(), "programming language of code; null otherwise"),
            _f("title", pa.string(), "document title, when known"),
            _f("chunk_index", pa.int32(), "0-based position of the chunk in its document", False),
            _f("text", pa.string(), "the chunk: documents.text[start_char:end_char]", False),
            _f("context", pa.string(), "contextual header embedded before the text; null if none"),
            _f("context_source", pa.string(), "path, llm or path_fallback; null if none"),
            _f("start_char", pa.int64(), "start offset (characters) in documents.text", False),
            _f("end_char", pa.int64(), "end offset (exclusive) in documents.text", False),
            _f("token_count", pa.int32(), "tokens of text alone in --tokenizer", False),
            _f("embed_tokens", pa.int32(), "tokens of context+text in --pricing_tokenizer", False),
            _f("model_tokens", pa.int32(), "word pieces of context+text in the model tokenizer"),
            _f(
                "section_path", pa.list_(pa.string()), "enclosing headings or class/function", False
            ),
            _f("parent_id", pa.string(), "chunk_id of the parent chunk (small-to-big); null"),
            _f("is_parent", pa.bool_(), "true for a parent chunk of --parent_chunk_size", False),
            _f("strategy", pa.string(), "chunking strategy that produced the chunk", False),
            _f("embedding", embedding_type, "normalised float32 embedding of context+text"),
            _f("embedding_model", pa.string(), "model that produced the embedding; null if none"),
            _f(
                "config_fingerprint",
                pa.string(),
                "hash of every setting that changes output",
                False,
            ),
            _f(
                "content_hash",
                pa.string(),
                "sha256 of the document text the chunk came from",
                False,
            ),
        ]
    )


CHUNK_COLUMNS = tuple(chunk_schema(None).names)

DOCUMENT_SCHEMA = pa.schema(
    [
        _f("doc_id", pa.string(), "stable hash of the source URI or the record id", False),
        _f("source", pa.string(), "input path or URI", False),
        _f("doc_type", pa.string(), "html, markdown, code or text", False),
        _f("language", pa.string(), "programming language of code; null otherwise"),
        _f("title", pa.string(), "title from HTML metadata, the first heading, or the record"),
        _f("url", pa.string(), "canonical URL from HTML metadata or the record"),
        _f("date", pa.string(), "date from HTML metadata"),
        _f("lang", pa.string(), "natural language from HTML metadata (e.g. en)"),
        _f("text", pa.string(), "the extracted text that chunk offsets point into", False),
        _f("content_hash", pa.string(), "sha256 of text", False),
        _f("boilerplate_lines_removed", pa.int32(), "lines dropped as corpus boilerplate", False),
        _f("boilerplate_tokens_removed", pa.int32(), "cl100k tokens in those lines", False),
    ]
)

REJECT_SCHEMA = pa.schema(
    [
        _f("source", pa.string(), "input path or URI (JSONL records: path#L<line>)", False),
        _f("doc_id", pa.string(), "document id when one was assigned"),
        _f("chunk_id", pa.string(), "chunk id, for rejects of one chunk (embedding)"),
        _f("stage", pa.string(), "read, extract, chunk or embed", False),
        _f("reason", pa.string(), "short machine-readable reason, e.g. invalid_utf8", False),
        _f("error", pa.string(), "excerpt of the error message", False),
    ]
)


def document_row(doc: Document) -> dict:
    return {name: getattr(doc, name) for name in DOCUMENT_SCHEMA.names}


def reject_row(reject: Reject) -> dict:
    return {name: getattr(reject, name) for name in REJECT_SCHEMA.names}


def chunk_row(chunk: Chunk) -> dict:
    row = {f.name: getattr(chunk, f.name) for f in dataclasses.fields(chunk)}
    row["section_path"] = list(chunk.section_path)
    row["embedding"] = list(chunk.embedding) if chunk.embedding is not None else None
    return {name: row[name] for name in CHUNK_COLUMNS}
