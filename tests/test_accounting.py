"""Cost accounting: the CombineFn's arithmetic and the report it builds from events (the cost
report of real runs is in tests/e2e/test_cost_report.py)."""

import dataclasses
import json
import math
import os

import pytest

from transforms.cost_combine import CostReportFn
from transforms.cost_report import CostReport, Pricing, build_report
from transforms.stat_events import (
    ChunkDeduplicated,
    ChunkMade,
    ChunkReused,
    DocumentChange,
    DocumentChunked,
    DocumentIn,
    DocumentUnchanged,
    EmbeddingReused,
    FileChunk,
    FileMatched,
    FileSkipped,
    LLMUsage,
    Rejected,
)


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
    assert r.documents_in == 3 and r.documents_chunked == 2 and r.documents_rejected == 1
    assert r.balanced
    assert r.chunks == 3 and r.parent_chunks == 1 and r.chunks_rejected == 1
    assert r.embedded_tokens == 183 and r.header_tokens == 23
    assert (r.boilerplate_lines_removed, r.boilerplate_tokens_removed) == (3, 12)
    assert r.overlap_inflation == pytest.approx(183 / 150, abs=1e-4)
    assert r.chunks_truncated == 1
    assert r.embedding_seconds == 1.0
    assert r.llm_context.cost_usd == pytest.approx((1000 * 3.0 + 20 * 15.0) / 1e6)
    assert r.total_cost_usd == pytest.approx(183 * 0.02 / 1e6 + r.llm_context.cost_usd)
    assert r.by_doc_type["code"].overlap_inflation == pytest.approx(58 / 50)
    assert r.by_strategy["recursive"].documents == 1
    assert r.rejects == {"embed:embedding_failed": 1, "extract:binary": 1}
    assert "| code |" in r.markdown()


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
    assert build_report(mixed, Pricing(), "run").chunks == 3


def test_sample_projection():
    r = build_report(_acc(EVENTS), Pricing(0.02, sample_fraction=0.25), "estimate")
    assert r.projection.documents == 12
    assert r.projection.embedded_tokens == 183 * 4


def test_projection_ratio_estimator():
    # three sampled files of 100, 200 and 300 bytes with 10, 20 and 33 tokens, out of 10
    # files and 3,000 bytes matched
    events = [FileMatched(f"f{i}", 100 * (i % 3 + 1), i < 3) for i in range(10)]
    events[9] = FileMatched("f9", 800, False)
    tokens = {"f0": 10, "f1": 20, "f2": 33}
    for name, n in tokens.items():
        events += [DocumentIn(name), FileChunk(name, n)]
        events.append(ChunkMade("text", "recursive", n, n, 0, False, False, 0.0, None))
    r = build_report(_acc(events), Pricing(1e6, sample_fraction=0.3), "estimate")
    p = r.projection
    ratio = 63 / 600
    matched = sum(e.size for e in events if isinstance(e, FileMatched))
    assert p.bytes_matched == matched and p.bytes_sampled == 600
    assert p.embedded_tokens == round(ratio * matched)
    assert p.documents == 10 and p.interval_95["documents"] == [10, 10]
    residuals = [n - ratio * x for n, x in zip((10, 20, 33), (100, 200, 300), strict=True)]
    se = 10 * math.sqrt((1 - 3 / 10) * sum(e * e for e in residuals) / 2 / 3)
    low, high = p.interval_95["embedded_tokens"]
    assert high == round(ratio * matched + 1.959964 * se)
    assert low == max(63, round(ratio * matched - 1.959964 * se))
    assert p.cost_usd == pytest.approx(p.embedded_tokens)
    assert "95% interval" in r.markdown()


# Every kind of event, for the recorded reports of tests/data/cost_reports.json.
ALL_EVENTS = [
    DocumentIn(),
    DocumentIn(),
    DocumentIn(),
    DocumentIn(),
    DocumentChunked("text", "recursive", 100, 3, 12),
    DocumentChunked("code", "code", 50, 0, 0),
    ChunkMade("text", "recursive", 60, 70, 10, False, False, 0.5, "path"),
    ChunkMade("text", "recursive", 50, 55, 5, False, False, 0.25, "path_fallback"),
    ChunkMade("code", "code", 50, 58, 8, False, True, 0.25, "llm"),
    ChunkMade("code", "code", 50, 0, 0, True, False, 0.0, None),
    Rejected("extract", "binary", False),
    Rejected("embed", "embedding_failed", True),
    LLMUsage(1000, 20, 2, 0),
    DocumentUnchanged("text"),
    ChunkReused(40),
    DocumentChange("added", 3, 0),
    DocumentChange("changed", 2, 1, 1),
    DocumentChange("removed", 0, 4),
    DocumentChange("kept", 0, 0),
    EmbeddingReused(20),
    ChunkDeduplicated(7),
    FileSkipped("hidden"),
    FileSkipped("hidden"),
    FileSkipped("fifo"),
]
SAMPLED = [FileMatched(f"f{i}", 100 * (i % 3 + 1), i < 3) for i in range(10)]
for _name, _n in {"f0": 10, "f1": 20, "f2": 33}.items():
    SAMPLED += [
        DocumentIn(_name),
        FileChunk(_name, _n),
        ChunkMade("text", "recursive", _n, _n, 0, False, False, 0.0, None),
    ]
# name -> (events, pricing, mode, previous_output, files_written)
RECORDED = {
    "run": (ALL_EVENTS, Pricing(0.02, 3.0, 15.0), "run", "/prev", 7),
    "empty": ([], Pricing(), "run", None, 0),
    "fallback": (ALL_EVENTS, Pricing(0.02, sample_fraction=0.25), "estimate", None, 3),
    "ratio": (SAMPLED, Pricing(1e6, sample_fraction=0.3), "estimate", None, 2),
    "one_file": (
        SAMPLED[:1] + SAMPLED[10:13],
        Pricing(0.5, sample_fraction=0.3),
        "estimate",
        None,
        2,
    ),
}


def _recorded(name: str) -> tuple[CostReport, dict[str, str]]:
    with open(os.path.join(os.path.dirname(__file__), "data", "cost_reports.json")) as f:
        files = json.load(f)[name]
    events, pricing, mode, previous, written = RECORDED[name]
    report = dataclasses.replace(
        build_report(_acc(events), pricing, mode), previous_output=previous, files_written=written
    )
    return report, files


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_the_report_files_are_the_recorded_ones(name):
    # What cost_report.json and .md held before the report was typed, byte for byte: a run
    # folder's readers (a vector store's loader, a dashboard) see no change.
    report, files = _recorded(name)
    assert report.to_json() == files["json"]
    assert report.markdown() == files["md"]


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_the_report_reads_back_as_written(name):
    report, files = _recorded(name)
    again = CostReport.from_json(files["json"])
    assert again == report
    assert again.to_json() == files["json"]


def test_a_report_with_a_key_missing_or_unknown_is_refused():
    _, files = _recorded("run")
    data = json.loads(files["json"])
    del data["by_doc_type"]["code"]["cost_usd"]
    with pytest.raises(ValueError, match=r"by_doc_type\.code: missing key 'cost_usd'"):
        CostReport.from_dict(data)
    data = json.loads(files["json"])
    data["surprise"] = 1
    with pytest.raises(ValueError, match="unknown key 'surprise'"):
        CostReport.from_dict(data)


def test_the_report_is_read_from_a_run_folder(tmp_path):
    report, files = _recorded("ratio")
    (tmp_path / "cost_report.json").write_text(files["json"])
    assert CostReport.read(str(tmp_path)) == report
    assert CostReport.read(str(tmp_path / "elsewhere")) is None


def test_contents_and_index_pages_left_out_are_counted():
    events = [
        DocumentIn(),
        DocumentIn(),
        DocumentChunked("pdf", "markdown", 900, 28, 0, 2, 1),
        DocumentChunked("pdf", "markdown", 500, 0, 0, 1, 0),
    ]
    fn = CostReportFn()
    halves = [_acc(events[:3]), _acc(events[3:])]
    for acc in (_acc(events), fn.merge_accumulators(halves)):
        r = build_report(acc, Pricing(), "run")
        assert (r.contents_pages_removed, r.index_pages_removed) == (3, 1)
        assert "- PDF pages left out: 3 of contents, 1 of back-of-book index" in r.markdown()


def test_a_pdf_documents_contents_and_index_pages_reach_its_event():
    pytest.importorskip("reportlab")
    from schemas.records import RawDocument
    from tests.paged.make import contents_and_index_pdf
    from transforms.ingest.extraction import extract_document
    from transforms.stat_events import doc_event

    doc = extract_document(RawDocument("c.pdf", "id", contents_and_index_pdf()), None)
    event = doc_event(doc, "markdown", 100)
    assert (event.contents_pages, event.index_pages) == (1, 1)
