"""Nightly rebuilds: unchanged documents keep their chunks, changed ones are re-chunked."""

import json
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runs.manifest import file_inventory
from schemas.arrow import REJECT_SCHEMA
from tests.jobs import run
from tests.tables import manifest, report, rows


@pytest.mark.slow
def test_incremental_rebuild_reuses_unchanged_documents(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Alpha\n\nThe first document. " * 20)
    (corpus / "b.txt").write_text("Second document, plain prose. " * 30)
    (corpus / "c.py").write_text("def f(x):\n    return x + 1\n")
    (corpus / "e.txt").write_text("A document that will be emptied. " * 10)
    flags = ["--input", str(corpus / "*"), "--embedding_model=none", "--boilerplate=off"]
    night1 = str(tmp_path / "night1")
    run([*flags, "--output", night1])
    first = {r["chunk_id"]: r for r in rows(night1, "chunks")}

    (corpus / "b.txt").write_text("Second document, now edited. " * 30)
    (corpus / "c.py").unlink()
    (corpus / "d.txt").write_text("A new document arrives. " * 10)
    (corpus / "e.txt").write_text("   \n")  # still there, but rejected now (empty)
    night2 = str(tmp_path / "night2")
    run([*flags, "--output", night2, "--previous_output", night1])

    r = report(night2)
    assert r["documents_in"] == 4
    assert r["documents_unchanged"] == 1  # a.md
    assert r["documents_chunked"] == 2  # b.txt (edited) and d.txt (new)
    assert r["documents_rejected"] == 1  # e.txt: rejected, not also removed
    assert r["documents_removed"] == 1  # c.py
    assert r["balanced"]
    second = {c["chunk_id"]: c for c in rows(night2, "chunks")}
    reused = [c for c in second.values() if c["source"].endswith("a.md")]
    assert reused and all(first[c["chunk_id"]] == c for c in reused)
    assert r["chunks_reused"] == len(reused)
    assert r["chunks"] + r["chunks_reused"] == len(second)
    assert {d["source"].rsplit("/", 1)[1] for d in rows(night2, "documents")} == {
        "a.md",
        "b.txt",
        "d.txt",
    }
    assert manifest(night2)["previous_output"] == night1
    # re-embedding everything would also pay for the reused chunks
    reused_tokens = sum(c["embed_tokens"] for c in reused)
    assert r["rechunk_cost_usd"] == pytest.approx(
        (r["embedded_tokens"] + reused_tokens) * 0.02 / 1e6
    )

    # a different config rebuilds everything, reusing nothing
    night3 = str(tmp_path / "night3")
    run([*flags, "--output", night3, "--previous_output", night1, "--chunk_size=100"])
    assert report(night3)["documents_unchanged"] == 0
    assert report(night3)["documents_chunked"] == 3


@pytest.mark.slow
def test_documents_with_failed_embeddings_are_rebuilt(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Alpha\n\nThe first document. " * 20)
    flags = ["--input", str(corpus / "*"), "--embedding_model=none"]
    night1 = str(tmp_path / "night1")
    run([*flags, "--output", night1])
    (doc,) = rows(night1, "documents")
    # as if one of a.md's chunks had failed in the embedding stage last night
    failed = {
        "source": doc["source"],
        "doc_id": doc["doc_id"],
        "chunk_id": "c",
        "stage": "embed",
        "reason": "embedding_failed",
        "error": "OOM",
    }
    extra = os.path.join(night1, "rejects", "part-00001-of-00002.parquet")
    pq.write_table(pa.Table.from_pylist([failed], schema=REJECT_SCHEMA), extra)
    # ... and that run had written the shard: its manifest lists it (an unlisted file is ignored)
    path = os.path.join(night1, "run_manifest.json")
    with open(path) as f:
        listed = json.load(f)
    listed["files"].update(file_inventory(night1, [extra]))
    with open(path, "w") as f:
        json.dump(listed, f)
    night2 = str(tmp_path / "night2")
    run([*flags, "--output", night2, "--previous_output", night1])
    assert report(night2)["documents_unchanged"] == 0
    assert report(night2)["documents_chunked"] == 1


def test_previous_output_must_be_a_complete_run(tmp_path):
    (tmp_path / "in.txt").write_text("text")
    with pytest.raises(ValueError, match=r"run_manifest\.json"):
        run(
            [
                "--input",
                str(tmp_path / "in.txt"),
                "--output",
                str(tmp_path / "o"),
                "--previous_output",
                str(tmp_path),
                "--embedding_model=none",
            ]
        )
    shutil.rmtree(tmp_path / "o", ignore_errors=True)
