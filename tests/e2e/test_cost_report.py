"""The cost report of real runs: the worked example, its estimate, and a sample's projection."""

import json

import pytest

from tests.jobs import run
from tests.tables import report, rows
from transforms.cost_report import CostReport

pytestmark = pytest.mark.slow


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
    assert "| embedded_tokens |" in CostReport.from_dict(sample).markdown()
