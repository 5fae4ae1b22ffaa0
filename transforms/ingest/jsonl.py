"""JSONL records: a line of a `.jsonl` file -> a RawDocument (its id, its fields), and the
file's lines read with a bound on each."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator

from schemas.records import RawDocument, stable_hash
from transforms.ingest.matching import relative_source
from transforms.stage_base import Rejection


def document_id(source: str, root: str = "") -> str:
    """A file's doc_id: a stable hash of its path under the input root."""
    return stable_hash("file", relative_source(source, root))


def record_id(path: str, line_no: int, record: dict, root: str = "") -> str:
    """A JSONL record's doc_id: its own id when it has one, which names the document across
    the corpus (a record that moves to another file keeps its id and so its chunks; a second
    record with the id is a duplicate), else its file and line."""
    key = record.get("id")
    if key not in (None, ""):
        return stable_hash("record", type(key).__name__, key)
    return stable_hash("record", relative_source(path, root), "line", line_no)


RECORD_FIELDS = ("id", "text", "title", "url", "doc_type")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(value: object) -> int | None:
    """Where a string holds a lone surrogate (which cannot be encoded as UTF-8), else None."""
    if not isinstance(value, str) or value.isascii():
        return None
    m = _SURROGATE.search(value)
    return m.start() if m else None


def parse_jsonl_line(path: str, line_no: int, line: str, root: str = "") -> RawDocument:
    """One JSONL line: a record {"id", "text", "title"?, "url"?, "doc_type"?}; a line that is
    not one raises Rejection, naming the line (its source) and the reason."""
    source = f"{path}#L{line_no}"
    try:
        record = json.loads(line)
    except RecursionError:
        raise Rejection(
            "too_deep",
            f"line {line_no}: JSON nested deeper than Python's recursion limit "
            f"({sys.getrecursionlimit()})",
            source,
            record_id(path, line_no, {}, root),
        ) from None
    except ValueError as e:  # JSONDecodeError, and integers past Python's digit limit
        raise Rejection("invalid_json", f"line {line_no}: {e}", source) from None
    if not isinstance(record, dict):
        raise Rejection("record_not_object", f"line {line_no}: {line[:200]}", source)
    for field in RECORD_FIELDS:
        at = lone_surrogate(record.get(field))
        if at is not None:
            # JSON's "\ud800" escapes decode to text no UTF-8 writer (Beam's coders, Parquet)
            # can encode: one record rejected here, rather than a failed job downstream.
            raise Rejection(
                "invalid_unicode",
                f"line {line_no}: field {field!r} holds a lone surrogate "
                f"(U+{ord(record[field][at]):04X}) at character {at}",
                source,
                record_id(path, line_no, {} if field == "id" else record, root),
            )
    text = record.get("text")
    doc_id = record_id(path, line_no, record, root)
    if not isinstance(text, str):
        reason = "missing_text" if text is None else "text_not_string"
        raise Rejection(reason, f"line {line_no}: no string 'text' field", source, doc_id)
    hint = record.get("doc_type")
    return RawDocument(
        source=source,
        doc_id=doc_id,
        text=text,
        title=record.get("title") if isinstance(record.get("title"), str) else None,
        url=record.get("url") if isinstance(record.get("url"), str) else None,
        hint_type=hint if isinstance(hint, str) else None,
    )


def bounded_lines(f, limit: int, chunk_bytes: int = 1 << 20) -> Iterator[tuple[bytes | None, int]]:
    """(line, its size in bytes) of a binary file, newline kept; a line over `limit` bytes comes
    as (None, size) and is skipped as it is read, never held whole.

    Reads `chunk_bytes` at a time with `read` alone, which Beam's CompressedFile (a .jsonl.gz)
    and plain files both have.
    """
    pending = bytearray()
    skipped = -1  # bytes of an over-long line skipped so far; -1 while not skipping
    while data := f.read(chunk_bytes):
        start = 0
        while start < len(data):
            newline = data.find(b"\n", start)
            end = len(data) if newline < 0 else newline + 1
            if skipped >= 0:
                skipped += end - start
            else:
                pending += data[start:end]
                if len(pending) > limit:
                    skipped = len(pending)
                    pending.clear()
            if newline >= 0:
                if skipped >= 0:
                    yield None, skipped
                    skipped = -1
                else:
                    yield bytes(pending), len(pending)
                    pending.clear()
            start = end
    if skipped >= 0:
        yield None, skipped
    elif pending:
        yield bytes(pending), len(pending)
