"""Cost accounting through the real report code path, and the CombineFn's arithmetic."""

import json

import pytest

from pipelines.chunk_corpus import run
from tests.tables import report, rows
from transforms.accounting import (
    ChunkMade,
    CostReportFn,
    DocumentChunked,
    DocumentIn,
    LLMUsage,
    Pricing,
    Rejected,
    build_report,
    report_markdown,
)


@pytest.fixture(scope="module")
def worked_example(tmp_path_factory):
    """The textbook document: 26,666 tokens, fixed 512-token windows with 76 tokens overlap."""
    folder = tmp_path_factory.mktemp("worked")
    corpus = folder / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "doc-1", "text": " word" * 26_666}) + "\n")
    out = str(folder / "out")
    flags = [
        "--input",
        str(corpus),
        "--strategy_text=fixed",
        "--chunk_size=512",
        "--chunk_overlap=76",
        "--context=none",
        "--embedding_model=none",
        "--price_per_million_tokens=0.02",
    ]
    run([*flags, "--output", out])
    est = str(folder / "estimate")
    run([*flags, "--output", est, "--estimate"])
    return out, est


def test_worked_example_costs(worked_example):
    r = report(worked_example[0])
    assert r["documents_in"] == r["documents_chunked"] == 1
    assert r["document_tokens"] == 26_666
    assert r["chunks"] == 61
    assert r["embedded_tokens"] == 31_226
    assert r["overlap_inflation"] == pytest.approx(1.171, abs=5e-4)
    assert round(r["cost_usd"], 6) == 0.000625
    # at 100,000 such documents: about $62
    assert r["cost_per_document_usd"] * 100_000 == pytest.approx(62.45, abs=0.01)
    assert r["rechunk_cost_usd"] == r["cost_usd"]
    assert r["by_strategy"]["fixed"]["chunks"] == 61
    assert len(rows(worked_example[0], "chunks")) == 61


def test_estimate_and_run_agree_exactly(worked_example):
    real, est = (report(o) for o in worked_example)
    assert est["mode"] == "estimate" and real["mode"] == "run"
    for key in ("chunks", "document_tokens", "embedded_tokens", "cost_usd", "overlap_inflation"):
        assert est[key] == real[key]


def _acc(events):
    fn = CostReportFn()
    acc = fn.create_accumulator()
    for e in events:
        acc = fn.add_input(acc, e)
    return acc


EVENTS = [
    DocumentIn(),
    DocumentIn(),
    DocumentIn(),
    DocumentChunked("text", "recursive", 100, 3, 12),
    DocumentChunked("code", "code", 50, 0, 0),
    ChunkMade("text", "recursive", 60, 70, 10, False, False, 0.5, "path"),
    ChunkMade("text", "recursive", 50, 55, 5, False, False, 0.25, "path"),
    ChunkMade("code", "code", 50, 58, 8, False, True, 0.25, "llm"),
    ChunkMade("code", "code", 50, 0, 0, True, False, 0.0, None),
    Rejected("extract", "binary", False),
    Rejected("embed", "embedding_failed", True),
    LLMUsage(1000, 20, 2, 0),
]


def test_an_event_of_an_unknown_type_is_refused():
    with pytest.raises(ValueError, match="unknown stat event"):
        _acc([("input",)])


def test_report_arithmetic():
    r = build_report(_acc(EVENTS), Pricing(0.02, llm_price_in=3.0, llm_price_out=15.0), "run")
    assert r["documents_in"] == 3 and r["documents_chunked"] == 2 and r["documents_rejected"] == 1
    assert r["balanced"]
    assert r["chunks"] == 3 and r["parent_chunks"] == 1 and r["chunks_rejected"] == 1
    assert r["embedded_tokens"] == 183 and r["header_tokens"] == 23
    assert (r["boilerplate_lines_removed"], r["boilerplate_tokens_removed"]) == (3, 12)
    assert r["overlap_inflation"] == pytest.approx(183 / 150, abs=1e-4)
    assert r["chunks_truncated"] == 1
    assert r["embedding_seconds"] == 1.0
    assert r["llm_context"]["cost_usd"] == pytest.approx((1000 * 3.0 + 20 * 15.0) / 1e6)
    assert r["total_cost_usd"] == pytest.approx(183 * 0.02 / 1e6 + r["llm_context"]["cost_usd"])
    assert r["by_doc_type"]["code"]["overlap_inflation"] == pytest.approx(58 / 50)
    assert r["by_strategy"]["recursive"]["documents"] == 1
    assert r["rejects"] == {"embed:embedding_failed": 1, "extract:binary": 1}
    assert "| code |" in report_markdown(r)


def test_merge_equals_single_pass():
    fn = CostReportFn()
    whole = _acc(EVENTS)
    merged = fn.merge_accumulators([_acc(EVENTS[:5]), _acc(EVENTS[5:9]), _acc(EVENTS[9:])])
    assert build_report(merged, Pricing(), "run") == build_report(whole, Pricing(), "run")


def test_totals_folded_elsewhere_count_as_their_events():
    # The job folds its chunk events where the chunks are made and adds only their totals.
    chunk_totals = _acc(EVENTS[5:9])
    mixed = _acc([*EVENTS[:5], chunk_totals, *EVENTS[9:]])
    assert build_report(mixed, Pricing(), "run") == build_report(_acc(EVENTS), Pricing(), "run")
    assert build_report(mixed, Pricing(), "run")["chunks"] == 3


def test_sample_projection():
    r = build_report(_acc(EVENTS), Pricing(0.02, sample_fraction=0.25), "estimate")
    assert r["projection"]["documents"] == 12
    assert r["projection"]["embedded_tokens"] == 183 * 4
