"""`corpus-chunker evaluate` on real runs of the job and the model on samples/."""

from __future__ import annotations

import os

import pytest

from commands import evaluate
from commands.evaluate import evaluate_run, load_questions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.slow

SAMPLES = [
    "html/sql-vacuum.html",
    "html/indexes-types.html",
    "markdown/node-path.md",
    "code/bisect.py",
]


BAD_CHUNKING = [
    *(f"--strategy_{t}=fixed" for t in ("html", "markdown", "code", "text")),
    "--chunk_size=24",
    "--chunk_overlap=0",
    "--context=none",
]


def test_a_bad_chunking_scores_lower_than_the_default_on_samples(tmp_path):
    from tests.jobs import run

    root = ROOT
    inputs = [f"--input={os.path.join(root, 'samples', s)}" for s in SAMPLES]
    for name, flags in (("default", []), ("bad", BAD_CHUNKING)):
        # a generous extraction limit: this machine may be busy, and a timeout is a reject
        common = ["--runner=DirectRunner", "--extract_timeout_s=60"]
        run([*inputs, f"--output={tmp_path / name}", *common, *flags])
    questions = os.path.join(root, "tests", "data", "samples_questions.jsonl")
    evaluation = evaluate.evaluate([str(tmp_path / "default"), str(tmp_path / "bad")], questions)
    default, bad = (r["sets"]["all"] for r in evaluation["results"])
    assert default["questions"] == 13 and default["answerable"] == 1.0
    assert default["recall@5"] >= 0.8
    assert bad["chunks"] > 3 * default["chunks"]
    assert bad["recall@5"] < default["recall@5"] and bad["mrr@10"] < default["mrr@10"]


def test_a_real_parent_run_reads_back_and_is_scored_child_to_parent(tmp_path):
    from tests.jobs import run
    from tests.tables import read_table

    source = os.path.join(ROOT, "samples", "markdown", "node-path.md")
    out = tmp_path / "parents"
    run(
        [f"--input={source}", f"--output={out}", "--runner=DirectRunner", "--parent_chunk_size=512"]
    )
    chunks = read_table(str(out), "chunks").to_pylist()  # pyarrow 25 reads it back
    parents = [c for c in chunks if c["is_parent"]]
    children = [c for c in chunks if not c["is_parent"]]
    assert parents and all(c["embedding"] is None for c in parents)
    assert all(len(c["embedding"]) == 384 for c in children)
    questions = os.path.join(ROOT, "tests", "data", "samples_questions.jsonl")
    node = [q for q in load_questions(questions) if q.id.startswith("path-")]
    child_row, parent_row = evaluate_run(str(out), node)
    assert parent_row["label"] == "parents (parent)"
    assert parent_row["sets"]["all"]["chunks"] == len(parents)
    assert parent_row["sets"]["all"]["answerable"] == 1.0
    # at most 10 parents and under 50 children: every parent, counted once, is in the top 10
    assert len(parents) <= 10 and len(children) < 50
    assert parent_row["sets"]["all"]["recall@10"] == 1.0
    assert child_row["sets"]["all"]["chunks"] == len(children)
