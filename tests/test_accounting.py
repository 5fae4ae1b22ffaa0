"""Cost accounting through the real report code path, and the CombineFn's arithmetic."""

import json
import math

import pytest

from pipelines.chunk_corpus import run
from tests.tables import report, rows
from transforms.accounting import (
    ChunkMade,
    CostReportFn,
    DocumentChunked,
    DocumentIn,
    FileChunk,
    FileMatched,
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


def _skewed_corpus(folder) -> None:
    """40 text files of 1.5 KB to 192 KB, their words drawn from two vocabularies (about 0.144
    and 0.150 tokens a byte) or both; the files --estimate_sample=0.2 reads (8, by the hash of
    their names) are the larger ones, so 1/0.2 projects 57% too many bytes."""
    import random

    rng = random.Random(14)
    prose = ["river", "stone", "market", "window", "garden", "letter", "morning", "silver"]
    tech = ["buffer", "parser", "socket", "thread", "kernel", "module", "vector", "schema"]
    vocabularies = (prose, tech, prose + tech)
    for i in range(40):
        words = vocabularies[i % 3]
        size, parts = 1500 * 2 ** (i % 8), []
        while sum(map(len, parts)) < size:
            parts.append(" ".join(rng.choice(words) for _ in range(rng.randint(20, 60))) + ".\n\n")
        (folder / f"part{i:02d}.txt").write_text("".join(parts))


@pytest.fixture(scope="module")
def skewed_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("skewed")
    corpus = folder / "corpus"
    corpus.mkdir()
    _skewed_corpus(corpus)
    flags = [
        "--input",
        str(corpus / "*.txt"),
        "--context=none",
        "--embedding_model=none",
        "--estimate",
        "--quiet",
    ]
    run([*flags, "--output", str(folder / "full")])
    run([*flags, "--output", str(folder / "sample"), "--estimate_sample=0.2"])
    return report(str(folder / "full")), report(str(folder / "sample"))


def test_a_sample_projects_the_whole_corpus_from_the_bytes_matched(skewed_runs):
    full, sample = skewed_runs
    p = sample["projection"]
    assert (p["files_matched"], p["files_sampled"]) == (40, 8)
    # 1/0.2 would be far off: the sample holds the larger files
    naive = sample["embedded_tokens"] / 0.2
    assert naive > 1.4 * full["embedded_tokens"]
    assert p["documents"] == full["documents_in"] == 40
    for key in ("chunks", "embedded_tokens", "cost_usd"):
        truth = full[key]
        assert p[key] == pytest.approx(truth, rel=0.05), key
        low, high = p["interval_95"][key]
        assert low <= truth <= high, key
    assert "| embedded_tokens |" in report_markdown(sample)


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
    p = r["projection"]
    ratio = 63 / 600
    matched = sum(e.size for e in events if isinstance(e, FileMatched))
    assert p["bytes_matched"] == matched and p["bytes_sampled"] == 600
    assert p["embedded_tokens"] == round(ratio * matched)
    assert p["documents"] == 10 and p["interval_95"]["documents"] == [10, 10]
    residuals = [n - ratio * x for n, x in zip((10, 20, 33), (100, 200, 300), strict=True)]
    se = 10 * math.sqrt((1 - 3 / 10) * sum(e * e for e in residuals) / 2 / 3)
    low, high = p["interval_95"]["embedded_tokens"]
    assert high == round(ratio * matched + 1.959964 * se)
    assert low == max(63, round(ratio * matched - 1.959964 * se))
    assert p["cost_usd"] == pytest.approx(p["embedded_tokens"])
    assert "95% interval" in report_markdown(r)
