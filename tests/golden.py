"""A run's output reduced to what must not change across a refactor: chunk ids, texts, contexts,
counts, rejects and the cost report's counts. `python -m tests.golden OUT` prints it as JSON."""

from __future__ import annotations

import hashlib
import json
import os
import sys

from tests.tables import report, rows

# Report keys that vary between runs of the same job (timings) or with the machine.
_VOLATILE = ("seconds", "wall", "started", "finished", "rate", "per_second")


def _h(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()[:16]


def _relative(source: str, root: str) -> str:
    return os.path.relpath(source, root) if source.startswith(root) else source


def _stable(value: object) -> object:
    if isinstance(value, dict):
        return {
            k: _stable(v)
            for k, v in sorted(value.items())
            if not any(word in k for word in _VOLATILE)
        }
    if isinstance(value, float):
        return round(value, 9)
    return value


def snapshot(output: str, root: str) -> dict:
    """Everything a reader of `output` sees, minus embeddings' floats and timings."""
    chunks = sorted(rows(output, "chunks"), key=lambda c: (c["source"], c["chunk_index"]))
    return {
        "chunks": [
            [
                c["chunk_id"],
                _relative(c["source"], root),
                c["chunk_index"],
                c["start_char"],
                c["end_char"],
                _h(c["text"]),
                _h(c["context"]),
                c["context_source"],
                c["token_count"],
                c["embed_tokens"],
                c["model_tokens"],
                list(c["section_path"]),
                c["parent_id"],
                c["strategy"],
            ]
            for c in chunks
        ],
        "documents": sorted(
            [d["doc_id"], _relative(d["source"], root), d["content_hash"], d["title"]]
            for d in rows(output, "documents")
        ),
        "rejects": sorted(
            [_relative(r["source"], root), r["stage"], r["reason"]] for r in rows(output, "rejects")
        ),
        "report": _stable(report(output)),
    }


GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "golden")


def assert_matches_golden(output: str, name: str, root: str) -> None:
    """The run at `output` gives the recorded snapshot `name`: the same chunk ids, offsets,
    texts, headers, counts, documents and rejects, and the same value for every report key the
    snapshot holds (a report may gain keys). After a change meant to alter the output, record
    it again with `python -m tests.golden OUT > tests/data/golden/NAME.json` and say why in
    the commit."""
    with open(os.path.join(GOLDEN_DIR, f"{name}.json")) as f:
        expected = json.load(f)
    actual = snapshot(output, root)
    for table in ("documents", "rejects", "chunks"):
        assert len(actual[table]) == len(expected[table]), table
        for got, want in zip(actual[table], expected[table], strict=True):
            assert got == want, (table, want)
    for key, want in expected["report"].items():
        assert actual["report"].get(key) == want, ("report", key)


if __name__ == "__main__":
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    json.dump(snapshot(sys.argv[1], os.path.join(root, "samples")), sys.stdout, indent=0)
    sys.stdout.write("\n")
