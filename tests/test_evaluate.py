"""`corpus-chunker evaluate`: the relevance rule, the metrics, a hand-made run scored by hand."""

from __future__ import annotations

import dataclasses
import json
import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from commands import evaluate
from commands.evaluate import evaluate_run, load_questions, markdown_table, score_ranking
from commands.relevance import Passage, is_relevant, relevant, source_matches, words
from runs.run_folder import RunFolder
from schemas.arrow import chunk_schema
from transforms.cost_combine import CostReportFn
from transforms.cost_report import Pricing, build_report
from transforms.fingerprint import CONFIG_VERSION

ANSWER = (
    "VACUUM reclaims storage occupied by dead tuples. In normal PostgreSQL operation, tuples "
    "that are deleted or obsoleted by an update are not physically removed from their table."
)

# --- relevance -------------------------------------------------------------------------------


def test_words_fold_case_drop_markup_and_undo_escapes():
    assert words("**VACUUM** reclaims  `storage`\n- occupied") == (
        "vacuum",
        "reclaims",
        "storage",
        "occupied",
    )
    assert words(r"object.\_\_gt\_\_(*self*, *other*)") == ("object", "__gt__", "self", "other")


def test_the_answer_itself_and_a_chunk_holding_it_are_relevant():
    assert is_relevant(ANSWER, ANSWER)
    long_chunk = "# Description\n\n" + ANSWER + " Therefore it is necessary to do VACUUM."
    assert is_relevant(long_chunk, ANSWER)


def test_a_small_chunk_inside_the_answer_is_relevant():
    assert is_relevant("In normal PostgreSQL operation, tuples that are deleted", ANSWER)


def test_half_of_the_answer_is_the_boundary():
    answer = " ".join(f"w{i}" for i in range(13))  # 10 shingles
    unrelated = " ".join(f"x{i}" for i in range(40))
    # the first 8 words: 5 of the answer's 10 shingles, and 5 of the chunk's 41 shingles
    assert is_relevant(" ".join(f"w{i}" for i in range(8)) + " " + unrelated, answer)
    # the first 7 words: 4 of 10, and 4 of 40
    assert not is_relevant(" ".join(f"w{i}" for i in range(7)) + " " + unrelated, answer)


def test_a_chunk_half_inside_the_answer_is_relevant_and_less_is_not():
    answer = " ".join(f"w{i}" for i in range(100))
    inside = " ".join(f"w{i}" for i in range(50, 60))  # 7 shingles, all in the answer
    assert is_relevant(inside + " x1 x2 x3 x4 x5 x6 x7", answer)  # 7 of 14
    assert not is_relevant(inside + " x1 x2 x3 x4 x5 x6 x7 x8", answer)  # 7 of 15


def test_short_texts_fall_back_to_containment():
    assert is_relevant("see also: os.path.join()", "join")
    assert not is_relevant("see also: os.path.split()", "join")
    assert is_relevant("os.path.join", "Use os.path.join to build paths")
    assert not is_relevant("path join os", "Use os.path.join to build paths")  # order matters
    assert not relevant(Passage.of("***"), Passage.of(ANSWER))


def test_unrelated_text_is_not_relevant():
    assert not is_relevant("CREATE TABLE will create a new, initially empty table.", ANSWER)


def test_source_matches_a_relative_path_as_suffix():
    assert source_matches("/cache/eval/pg/html/sql-vacuum.html", "pg/html/sql-vacuum.html")
    assert source_matches("pg/html/sql-vacuum.html", "./pg/html/sql-vacuum.html")
    assert not source_matches("/cache/eval/pg/html/xsql-vacuum.html", "sql-vacuum.html")


# --- metrics ---------------------------------------------------------------------------------


def test_score_ranking_by_hand():
    one = score_ranking([frozenset(), frozenset({0})], n_answers=1)
    assert one["recall@1"] == 0 and one["recall@5"] == 1 and one["recall@10"] == 1
    assert one["mrr@10"] == 0.5
    assert one["ndcg@10"] == pytest.approx(1 / math.log2(3))
    # two answers: rank 1 covers the first, rank 2 covers it again, rank 3 the second
    two = score_ranking([frozenset({0}), frozenset({0}), frozenset({1})], n_answers=2)
    assert two["recall@1"] == 0.5 and two["recall@5"] == 1
    assert two["mrr@10"] == 1
    assert two["ndcg@10"] == pytest.approx((1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3)))
    none = score_ranking([frozenset()] * 10, n_answers=1)
    assert none == {"recall@1": 0, "recall@5": 0, "recall@10": 0, "mrr@10": 0, "ndcg@10": 0}


def test_a_relevant_result_past_rank_10_counts_for_nothing():
    late = score_ranking([frozenset()] * 10 + [frozenset({0})], n_answers=1, ks=(10, 20))
    assert late["recall@10"] == 0 and late["recall@20"] == 1 and late["mrr@10"] == 0


# --- question files --------------------------------------------------------------------------


def _write_jsonl(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


@pytest.mark.parametrize(
    "record, message",
    [
        ({"id": "a", "question": "q"}, "'answers' must be a non-empty list"),
        ({"id": "a", "question": "", "answers": []}, "'question' must be a non-empty string"),
        ({"id": "a", "question": "q", "answers": [{"text": "x"}]}, "answers[0].source"),
        ({"id": "a", "question": "q", "answers": [{"text": "--", "source": "s"}]}, "no words"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_a_bad_question_names_file_and_line(tmp_path, record, message):
    good = {"id": "g", "question": "q", "answers": [{"text": "t", "source": "s"}]}
    path = _write_jsonl(tmp_path / "q.jsonl", [good, record])
    with pytest.raises(ValueError, match=rf"q\.jsonl:2: .*{__import__('re').escape(message)}"):
        load_questions(path)


def test_duplicate_ids_are_refused(tmp_path):
    good = {"id": "g", "question": "q", "answers": [{"text": "t", "source": "s"}]}
    with pytest.raises(ValueError, match="duplicate id 'g'"):
        load_questions(_write_jsonl(tmp_path / "q.jsonl", [good, good]))


# --- a hand-made run -------------------------------------------------------------------------

DOC_A = "corpus/a.md"
DOC_B = "corpus/b.md"
A1 = "the quick brown fox jumps over the lazy dog near the river bank"
A2 = "a completely different passage about vacuum and dead tuples in tables"
B1 = "python functions return values to their callers when they finish running"


def _chunk(chunk_id, source, text, vector, parent_id=None, is_parent=False, tokens=10):
    return {
        "chunk_id": chunk_id,
        "doc_id": source,
        "source": source,
        "doc_type": "markdown",
        "language": None,
        "title": None,
        "chunk_index": 0,
        "text": text,
        "context": None,
        "context_source": None,
        "start_char": 0,
        "end_char": len(text),
        "token_count": tokens,
        "embed_tokens": tokens,
        "model_tokens": tokens,
        "section_path": [],
        "parent_id": parent_id,
        "is_parent": is_parent,
        "strategy": "recursive",
        "embedding": None if vector is None else [float(x) for x in vector],
        "embedding_model": None if vector is None else "default",
        "config_fingerprint": "f",
        "content_hash": "h",
    }


def _write_run(folder, shards, cost_usd=0.5, dim=4):
    """A run folder as the job writes it; dim=None: the plain list column of a parent run."""
    os.makedirs(folder / "chunks")
    paths = [str(folder / "cost_report.json")]
    for i, rows in enumerate(shards):
        table = pa.Table.from_pylist(rows, schema=chunk_schema(dim))
        paths.append(str(folder / "chunks" / f"part-{i:05d}-of-{len(shards):05d}.parquet"))
        pq.write_table(table, paths[-1])
    empty = build_report(CostReportFn().create_accumulator(), Pricing(), "run")
    report = dataclasses.replace(empty, embedded_tokens=123, cost_usd=cost_usd)
    (folder / "cost_report.json").write_text(report.to_json())
    config = {"config_version": CONFIG_VERSION, "embedding_model": "default"}
    manifest = {"run_id": "r", "mode": "run", "config": config, "config_fingerprint": "f"}
    RunFolder(str(folder)).write_manifest(manifest, paths)
    return str(folder)


E = np.eye(4, dtype=np.float32)


@pytest.fixture
def questions(tmp_path):
    path = _write_jsonl(
        tmp_path / "q.jsonl",
        [
            # its answer is chunk a1, which the question vector ranks second
            {"id": "q1", "question": "fox?", "answers": [{"text": A1, "source": DOC_A}]},
            # two answers: b1 ranks first; the second is in no chunk of the run
            {
                "id": "q2",
                "question": "callers?",
                "answers": [
                    {"text": B1, "source": DOC_B},
                    {"text": "no chunk holds these words at all", "source": DOC_B},
                ],
                "corpus": "other",
            },
        ],
    )
    return load_questions(path)


def test_a_hand_made_run_scores_as_computed_by_hand(tmp_path, questions, monkeypatch):
    monkeypatch.setattr(evaluate, "BATCH_ROWS", 2)  # several batches per shard
    # c1 holds A1's words but is from another document: not relevant to q1
    run = _write_run(
        tmp_path / "run",
        [
            [
                _chunk("a1", "/data/" + DOC_A, A1, E[0], tokens=10),
                _chunk("a2", "/data/" + DOC_A, A2, E[1], tokens=20),
            ],
            [
                _chunk("b1", "/data/" + DOC_B, B1, E[2], tokens=30),
                _chunk("c1", "/data/corpus/c.md", A1, E[3], tokens=40),
            ],
        ],
    )
    # q1 ranks a2 (not relevant), then a1 (relevant); q2 ranks b1 first
    vectors = np.array([[0.5, 0.8, 0.1, 0.3], [0.1, 0.2, 0.9, 0.0]], dtype=np.float32)
    [result] = evaluate_run(run, questions, vectors=vectors)
    row = result["sets"]["all"]
    assert row["recall@1"] == pytest.approx((0 + 0.5) / 2)
    assert row["recall@5"] == pytest.approx((1 + 0.5) / 2)
    assert row["mrr@10"] == pytest.approx((0.5 + 1) / 2)
    ideal_two = 1 + 1 / math.log2(3)
    assert row["ndcg@10"] == pytest.approx((1 / math.log2(3) + 1 / ideal_two) / 2)
    assert row["answerable"] == 1.0
    assert row["chunks"] == 4 and row["mean_tokens"] == 25 and row["p90_tokens"] == 40
    assert result["cost_usd"] == 0.5 and result["answers_without_document"] == 0
    assert list(result["sets"]) == ["all"]  # one corpus named: no rows per corpus
    assert "| all | run | 2 | 0.250 | 0.750 |" in markdown_table(
        {"k": [1, 5, 10], "results": [result]}
    )


def test_a_parent_run_is_also_scored_child_to_parent(tmp_path, questions):
    # each child holds one shingle of A1: not relevant; their parent holds all of A1
    junk = " zzz yyy xxx www vvv uuu"
    run = _write_run(
        tmp_path / "run",
        [
            [
                _chunk("p1", "/data/" + DOC_A, A1, None, is_parent=True, tokens=100),
                _chunk("c1", "/data/" + DOC_A, "the quick brown fox" + junk, E[0], "p1"),
                _chunk("c2", "/data/" + DOC_A, "the lazy dog near" + junk, E[1], "p1"),
                _chunk("b1", "/data/" + DOC_B, B1, E[2], "p2"),
                _chunk("p2", "/data/" + DOC_B, B1, None, is_parent=True, tokens=50),
            ]
        ],
        dim=None,
    )
    vectors = np.array([[0.9, 0.8, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]], dtype=np.float32)
    children, parents = evaluate_run(run, questions, vectors=vectors)
    assert children["scoring"] == "chunk" and parents["scoring"] == "child -> parent"
    assert children["sets"]["all"]["recall@10"] == pytest.approx((0 + 0.5) / 2)
    assert children["sets"]["all"]["answerable"] == 0.5  # only q2's b1 among the children
    # c1 and c2 both return p1, which is counted once, at rank 1
    assert parents["sets"]["all"]["recall@1"] == pytest.approx((1 + 0.5) / 2)
    assert parents["sets"]["all"]["answerable"] == 1.0
    assert parents["sets"]["all"]["chunks"] == 2 and parents["sets"]["all"]["mean_tokens"] == 75


def test_a_chunk_without_a_parent_counts_as_itself_on_the_parent_row(tmp_path, questions):
    # a run whose code keeps the code chunker while its prose has sentence windows
    run = _write_run(
        tmp_path / "run",
        [
            [
                _chunk("p1", "/data/" + DOC_A, A1, None, is_parent=True, tokens=100),
                _chunk("c1", "/data/" + DOC_A, "the quick brown fox zzz yyy", E[0], "p1"),
                _chunk("b1", "/data/" + DOC_B, B1, E[2]),  # no parent
            ]
        ],
        dim=None,
    )
    vectors = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]], dtype=np.float32)
    _, parents = evaluate_run(run, questions, vectors=vectors)
    assert parents["sets"]["all"]["recall@1"] == pytest.approx((1 + 0.5) / 2)
    assert parents["sets"]["all"]["answerable"] == 1.0  # b1 answers q2 as itself


def test_a_run_whose_documents_no_answer_names_is_refused(tmp_path, questions):
    run = _write_run(tmp_path / "run", [[_chunk("x", "/data/elsewhere.md", A1, E[0])]])
    with pytest.raises(ValueError, match="no answer's source names a document of the run"):
        evaluate_run(run, questions, vectors=np.ones((2, 4), dtype=np.float32))


def test_an_unfinished_run_is_refused(tmp_path, questions):
    (tmp_path / "run" / "chunks").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"has no run_manifest\.json"):
        evaluate_run(str(tmp_path / "run"), questions, vectors=np.ones((2, 4), dtype=np.float32))


# --- the real job and model on samples/ --------------------------------------------------------


# --- the question sets -------------------------------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_samples_answers_are_passages_of_their_documents():
    from eval.verify_answers import check

    assert check([os.path.join(ROOT, "tests", "data", "samples_questions.jsonl")], ROOT) == []


def test_a_changed_answer_is_caught(tmp_path):
    from eval.verify_answers import check

    (tmp_path / "doc.html").write_text("<p>VACUUM reclaims <b>storage</b>\n occupied</p>")
    good = {
        "id": "a",
        "question": "q",
        "answers": [{"text": "reclaims storage occupied", "source": "doc.html"}],
    }
    bad = {
        "id": "b",
        "question": "q",
        "answers": [{"text": "reclaims space", "source": "doc.html"}],
    }
    problems = check([_write_jsonl(tmp_path / "q.jsonl", [good, bad])], str(tmp_path))
    assert len(problems) == 1 and "q.jsonl:2 (b)" in problems[0]


def test_the_development_set_spans_two_doc_corpora_and_code():
    questions = [
        q
        for name in ("postgresql", "sqlite_faq", "nodejs", "code")
        for q in load_questions(os.path.join(ROOT, "eval", "questions", f"{name}.jsonl"))
    ]
    assert len(questions) >= 150
    assert len({q.id for q in questions}) == len(questions)
    assert {q.doc_type for q in questions} == {"html", "markdown", "code"}
    assert {q.corpus for q in questions} == {"postgresql", "sqlite", "nodejs", "code"}


def test_corpus_chunker_evaluate_dispatches_to_the_evaluate_command(monkeypatch, capsys, tmp_path):
    from pipelines import chunk_corpus

    missing = str(tmp_path / "none.jsonl")
    monkeypatch.setattr("sys.argv", ["corpus-chunker", "evaluate", "RUN", "--questions", missing])
    with pytest.raises(SystemExit) as exit_:
        chunk_corpus.main()
    assert exit_.value.code == 2
    assert "corpus-chunker evaluate: error: --questions" in capsys.readouterr().err


def test_a_baseline_runs_report_reads_as_the_jobs(tmp_path) -> None:
    """The evaluation's baselines (eval/langchain_run.py, eval/header_ablation.py) write their
    cost_report.json through report_of: the typed reader takes it (a partial dict was refused
    with "missing key 'mode'", and the LangChain row could not be scored)."""
    from transforms.cost_report import CostReport, report_of

    written = report_of(
        price_per_million_tokens=0.02, chunks=3, embedded_tokens=120, cost_usd=120 * 0.02 / 1e6
    )
    (tmp_path / "cost_report.json").write_text(written.to_json())
    read = CostReport.read(str(tmp_path))
    assert read == written
    assert (read.mode, read.chunks, read.embedded_tokens, read.documents_in) == ("run", 3, 120, 0)
    ablation = report_of(chunks=5, embedded_tokens=None, cost_usd=None, header_tokens=40)
    (tmp_path / "cost_report.json").write_text(ablation.to_json())
    assert CostReport.read(str(tmp_path)).header_tokens == 40


def test_evaluate_baseline_prints_the_paired_comparison(tmp_path, monkeypatch, capsys):
    # four questions, each answered by its own chunk; run "a" ranks every answer first, run
    # "b" ranks q1's and q2's answers past rank 10 (by the vectors below) and the others first
    texts = [f"passage number {n} about topic {n} with several words in it" for n in "wxyz"]
    records = [
        {"id": f"q{i}", "question": f"q{i}?", "answers": [{"text": t, "source": DOC_A}],
         "corpus": "c1" if i < 2 else "c2", "split": "confirm"}
        for i, t in enumerate(texts)
    ]  # fmt: skip
    path = _write_jsonl(tmp_path / "q.jsonl", records)
    dim = 16
    basis = np.eye(dim, dtype=np.float32)
    answers = [
        _chunk(f"a{i}", "/data/" + DOC_A, t, basis[i], tokens=10) for i, t in enumerate(texts)
    ]
    # ten distractors that each question's vector prefers in run "b"
    distract = [_chunk(f"d{j}", "/data/" + DOC_B, f"other {j}", basis[4 + j], tokens=5)
                for j in range(10)]  # fmt: skip
    run_a = _write_run(tmp_path / "a", [answers], dim=dim)
    b_rows = [dict(r) for r in answers]
    for r in b_rows[:2]:
        r["embedding"] = [float(x) for x in -basis[int(r["chunk_id"][1])]]
    run_b = _write_run(tmp_path / "b", [b_rows + distract], dim=dim)
    queries = basis[:4] + 0.1 * basis[4:14].sum(axis=0)
    monkeypatch.setattr(evaluate, "embed_questions", lambda model, t: queries[: len(t)])
    evaluate.main([run_a, run_b, "--questions", path, "--baseline", "a"])
    out = capsys.readouterr().out
    assert "a minus each run per question" in out and "confirm half" in out
    paired = out[out.index("a minus each run per question") :]
    rows = [line for line in paired.splitlines() if line.startswith("| ") and "| b |" in line]
    # per corpus (c1: both of its questions won, MRR@10 1 -> 0) and all four questions
    assert rows[0].startswith("| c1 | b | 2 | +1.000 [+1.000, +1.000] | 2 / 0 | 0.500 |")
    assert rows[1].startswith("| c2 | b | 2 | 0.000 [0.000, 0.000] | 0 / 0 | 1.000 |")
    assert rows[2].startswith("| all | b | 4 | +0.500 [")
    assert "| 2 / 0 | 0.500 |" in rows[2]


def test_evaluate_baseline_must_name_one_of_the_runs(tmp_path, capsys):
    with pytest.raises(SystemExit):
        evaluate.parse_args(["r1", "r2", "--questions", "q.jsonl", "--baseline", "r3"])
    assert "--baseline r3 is not one of the runs: r1, r2" in capsys.readouterr().err
    args = evaluate.parse_args(
        ["x/r1/", "r2", "--questions", "q", "--baseline", "x/r1", "--k", "1"]
    )
    assert args.baseline == "r1" and 10 in args.k
