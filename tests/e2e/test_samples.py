"""The whole job on samples/ with the real model, read back with pyarrow."""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.golden import assert_matches_golden
from tests.jobs import run
from tests.tables import manifest, read_table, report, rows
from transforms.context.path import text_opens_with_title

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples", "*", "*")
CHUNK_SIZE = 192

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(job_run):
    """The run that `make demo` makes, and that tests/data/golden/samples_default.json records."""
    return job_run("samples").output


@pytest.fixture(scope="module")
def duplicated(tmp_path_factory):
    """A sample file and a copy of it elsewhere: a duplicated file, as corpora have (a vendored
    copy under the same folder and file name, so with the same path header)."""
    copies = tmp_path_factory.mktemp("copies") / "markdown"
    copies.mkdir()
    shutil.copy(os.path.join(ROOT, "samples", "markdown", "node-path.md"), copies / "node-path.md")
    out = str(tmp_path_factory.mktemp("duplicated"))
    run([*_duplicated_inputs(copies), "--output", out, "--quiet"])
    return out


def _duplicated_inputs(copies) -> list[str]:
    original = os.path.join(ROOT, "samples", "markdown", "node-path.md")
    return ["--input", original, "--input", str(copies / "*")]


# What only a run that embeds has: its mode, its model time and its data files.
_RUN_ONLY = {"mode", "embedding_seconds", "files_written"}


def _what_an_estimate_counts(report_: dict) -> dict:
    """A cost report without what only a real run has: every count, token and price stays."""
    out = {k: v for k, v in report_.items() if k not in _RUN_ONLY}
    for group in ("by_doc_type", "by_strategy"):
        out[group] = {
            name: {k: v for k, v in row.items() if k not in _RUN_ONLY}
            for name, row in report_[group].items()
        }
    return out


def test_a_duplicated_file_is_embedded_once_and_counted(duplicated):
    chunks = rows(duplicated, "chunks")
    original = [c for c in chunks if c["source"].endswith("samples/markdown/node-path.md")]
    copy = [c for c in chunks if "copies" in c["source"]]
    assert len(copy) == len(original) > 5
    key = lambda c: (c["start_char"], c["end_char"])  # noqa: E731
    for a, b in zip(sorted(original, key=key), sorted(copy, key=key), strict=True):
        assert (a["context"], a["text"]) == (b["context"], b["text"])
        assert a["embedding"] == b["embedding"]  # one vector, copied
    r = report(duplicated)
    assert r["chunks_deduplicated"] == len(copy)
    assert r["deduplicated_embedded_tokens"] == sum(c["embed_tokens"] for c in copy)


def test_the_estimate_counts_the_duplicated_texts_the_run_embeds_once(duplicated, tmp_path):
    """Issue 22: --estimate counted 0 deduplicated chunks where the run counted 2, so its
    model-read tokens (and price) were over the run's."""
    copies = next(
        os.path.dirname(c["source"])
        for c in rows(duplicated, "documents")
        if "copies" in c["source"]
    )
    est = str(tmp_path / "estimate")
    run([*_duplicated_inputs(Path(copies)), "--output", est, "--estimate", "--quiet"])
    real, projected = report(duplicated), report(est)
    assert real["chunks_deduplicated"] > 5
    assert _what_an_estimate_counts(projected) == _what_an_estimate_counts(real)


def test_every_chunk_is_embedded_whole_and_within_the_limit(demo):
    chunks = rows(demo, "chunks")
    assert len(chunks) > 300
    # The default backend's id, hash of the int8 file included, as in the fingerprint.
    model_id = manifest(demo)["config"]["embedding_model"]
    assert (
        model_id.startswith("default|onnx-int8|int8-dynamic,per-channel") and "sha256:" in model_id
    )
    for c in chunks:
        vec = np.asarray(c["embedding"], dtype=np.float32)
        assert vec.shape == (384,)
        assert abs(float(np.linalg.norm(vec)) - 1.0) < 1e-3
        assert c["embedding_model"] == model_id
        assert c["token_count"] <= CHUNK_SIZE
        assert c["embed_tokens"] <= CHUNK_SIZE  # the header is inside the budget
        assert c["model_tokens"] <= 256  # the model reads every chunk whole
    assert read_table(demo, "chunks").schema.field("embedding").type.list_size == 384
    assert report(demo)["chunks_truncated"] == 0


def test_offsets_point_into_the_documents_table(demo):
    docs = {d["doc_id"]: d for d in rows(demo, "documents")}
    chunks = rows(demo, "chunks")
    for c in chunks:
        doc = docs[c["doc_id"]]
        assert doc["text"][c["start_char"] : c["end_char"]] == c["text"]
        assert c["content_hash"] == doc["content_hash"]
    # every document's non-whitespace text is in some chunk
    by_doc: dict[str, list] = {}
    for c in chunks:
        by_doc.setdefault(c["doc_id"], []).append((c["start_char"], c["end_char"]))
    for doc_id, doc in docs.items():
        covered = np.zeros(len(doc["text"]), dtype=bool)
        for s, e in by_doc[doc_id]:
            covered[s:e] = True
        missing = [ch for ch, ok in zip(doc["text"], covered, strict=True) if not ok]
        assert "".join(missing).strip() == "", doc["source"]


def test_bad_inputs_are_rejected_with_reasons(demo):
    rejects = {
        os.path.relpath(r["source"], os.path.join(ROOT, "samples")): r
        for r in rows(demo, "rejects")
    }
    expected = {
        "bad/image.txt": ("extract", "binary"),
        "bad/latin1.md": ("extract", "invalid_utf8"),
        "bad/empty.txt": ("extract", "empty"),
        "bad/blank.md": ("extract", "empty"),
        "jsonl/records.jsonl#L5": ("read", "invalid_json"),
        "jsonl/records.jsonl#L9": ("extract", "empty"),
        "jsonl/records.jsonl#L13": ("read", "missing_text"),
    }
    for source, (stage, reason) in expected.items():
        assert (rejects[source]["stage"], rejects[source]["reason"]) == (stage, reason)
        assert rejects[source]["error"]
    assert len(rejects) == len(expected)


def test_documents_in_equal_chunked_plus_rejected(demo):
    r = report(demo)
    docs = rows(demo, "documents")
    rejects = rows(demo, "rejects")
    assert r["documents_in"] == r["documents_chunked"] + r["documents_rejected"]
    assert r["documents_chunked"] == len(docs)
    assert r["documents_rejected"] == len(rejects)
    assert r["balanced"] is True
    assert r["chunks"] == len(rows(demo, "chunks"))
    assert r["embedded_tokens"] == sum(c["embed_tokens"] for c in rows(demo, "chunks"))
    # the bill is what the model read: identical texts were embedded once
    assert r["model_read_tokens"] == r["embedded_tokens"] - r["deduplicated_embedded_tokens"]
    assert r["cost_usd"] == pytest.approx(r["model_read_tokens"] * 0.02 / 1e6)
    assert r["saved_usd"] == pytest.approx(r["deduplicated_embedded_tokens"] * 0.02 / 1e6)
    assert set(r["by_doc_type"]) == {"code", "html", "markdown", "text", "pdf", "docx", "pptx"}


def test_each_type_gets_its_strategy_and_sections(demo):
    chunks = rows(demo, "chunks")
    strategies = {(c["doc_type"], c["strategy"]) for c in chunks}
    assert {("code", "code"), ("markdown", "markdown"), ("html", "markdown")} <= strategies
    assert ("text", "recursive") in strategies
    vacuum = [c for c in chunks if c["source"].endswith("sql-vacuum.html")]
    assert any("Parameters" in c["section_path"] for c in vacuum)
    # --context=path by default: a header on every chunk but a page's opening (its title
    # heading first), which names itself
    openings = [
        c
        for c in chunks
        if text_opens_with_title(c["text"], c["title"], c["doc_type"], c["section_path"])
    ]
    assert openings and all(c["context"] is None for c in openings)
    assert all(c["context"] for c in chunks if c not in openings)
    assert vacuum[0]["context"] is None and vacuum[1]["context"].startswith("sql-vacuum.html > ")
    # a Sphinx title heading with inline code ("# `sphinx.ext.todo` – ...") is the title too
    todo = [c for c in chunks if c["source"].endswith("sphinx-todo.html")]
    assert todo[0]["text"].startswith("# `sphinx.ext.todo`") and todo[0]["context"] is None


def test_manifest_is_written_last_and_complete(demo):
    m = manifest(demo)
    assert m["counts"]["chunks"] == report(demo)["chunks"]
    assert len(m["config_fingerprint"]) == 16
    last = os.path.getmtime(os.path.join(demo, "run_manifest.json"))
    for name in ("cost_report.json", "cost_report.md"):
        assert os.path.getmtime(os.path.join(demo, name)) <= last
    for table in ("chunks", "documents", "rejects"):
        for f in os.listdir(os.path.join(demo, table)):
            assert os.path.getmtime(os.path.join(demo, table, f)) <= last


def test_estimate_agrees_with_the_real_run(demo, tmp_path):
    est = str(tmp_path / "estimate")
    run(["--input", SAMPLES, "--output", est, "--estimate"])
    real, projected = report(demo), report(est)
    assert projected["mode"] == "estimate"
    # Every count, token and price of the run (deduplicated chunks and model-read tokens too),
    # not a few chosen ones.
    assert _what_an_estimate_counts(projected) == _what_an_estimate_counts(real)
    assert not os.path.exists(os.path.join(est, "chunks"))


def test_the_output_is_the_recorded_one(demo):
    # Chunk ids, offsets, texts, headers, counts, rejects and report counts as recorded before
    # the code was restructured (tests/golden.py says how to record a deliberate change), on
    # samples/ alone: ids are relative to the inputs' common folder.
    assert_matches_golden(demo, "samples_default", os.path.join(ROOT, "samples"))


def test_parents_without_embedding_give_the_recorded_output(job_run):
    out = job_run("samples_parents").output
    assert_matches_golden(out, "samples_parents", os.path.join(ROOT, "samples"))


def test_the_header_ablation_rebuilds_the_job_s_own_headers(demo, tmp_path):
    """eval.header_ablation with the job's own parts rebuilds every header the job wrote, so
    that its rows differ from the default only by the parts they drop: the job's budget in
    the model's word pieces too (headers shortened for the model), a split table's column
    line, the reference page's name line, and a title that holds " > " (Doxygen's
    "Json::SecureAllocator< T >::rebind< U >") kept one entry. 24 of samples/' headers
    differed before."""
    from eval.header_ablation import ablate

    done = ablate(demo, str(tmp_path / "ablated"), {"file", "title", "sections", "term"})
    assert done["full_header_mismatches"] == 0
    assert done["reembedded_chunks"] == 0 and done["chunks"] == len(rows(demo, "chunks"))
