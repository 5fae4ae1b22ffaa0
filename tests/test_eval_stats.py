"""commands.paired: paired differences of two runs, their bootstrap interval and sign test."""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np
import pytest

from commands.evaluate import Answer, Question, evaluate_run, load_questions
from commands.paired import (
    bootstrap_ci,
    compare_runs,
    paired_difference,
    randomization_p,
    sign_test,
    significance_table,
)
from commands.relevance import Passage
from tests.test_evaluate import A1, B1, DOC_A, DOC_B, E, _chunk, _write_jsonl, _write_run


def _binomial_two_sided(won: int, lost: int) -> float:
    """The sign test by hand: twice the smaller tail of Binomial(won + lost, 1/2), at most 1."""
    n, k = won + lost, min(won, lost)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


# --- sign test -------------------------------------------------------------------------------


def test_the_sign_test_gives_known_p_values():
    assert sign_test(1, 9) == pytest.approx(22 / 1024)  # 2 * (1 + 10) / 2^10
    assert sign_test(0, 6) == pytest.approx(2 / 64)
    assert sign_test(0, 2) == pytest.approx(0.5)  # two questions lost: no evidence
    assert sign_test(2, 0) == sign_test(0, 2)  # two-sided
    assert sign_test(5, 5) == 1.0
    assert sign_test(0, 0) == 1.0  # no discordant question


@pytest.mark.parametrize("won, lost", [(0, 1), (3, 7), (12, 4), (0, 20), (9, 10)])
def test_the_sign_test_is_the_binomial_by_hand(won, lost):
    assert sign_test(won, lost) == pytest.approx(_binomial_two_sided(won, lost))


def test_negative_counts_are_refused():
    with pytest.raises(ValueError, match="non-negative"):
        sign_test(-1, 3)


# --- bootstrap and paired differences --------------------------------------------------------


def test_identical_runs_differ_by_nothing():
    scores = [1.0, 0.0, 1.0, 1.0, 0.0, 0.5, 1 / 3]
    d = paired_difference(scores, scores)
    assert (d.diff, d.ci, d.won, d.lost, d.p) == (0.0, (0.0, 0.0), 0, 0, 1.0)
    assert d.p_randomization == 1.0
    assert d.questions == 7


def test_a_clearly_better_run_has_an_interval_above_zero():
    a = [1.0] * 30
    b = [1.0] * 10 + [0.0] * 20
    d = paired_difference(a, b)
    assert d.diff == pytest.approx(20 / 30)
    assert d.ci is not None and 0 < d.ci[0] <= d.diff <= d.ci[1] <= 1
    assert (d.won, d.lost) == (20, 0)
    assert d.p == pytest.approx(2 * 0.5**20)
    assert d.p_randomization < 0.001
    worse = paired_difference(b, a)  # the other way round: the mirror image
    assert worse.diff == pytest.approx(-d.diff) and (worse.won, worse.lost) == (0, 20)
    assert worse.ci is not None and worse.ci[1] < 0


def test_two_questions_of_thirty_are_within_the_noise():
    # the default misses two questions LangChain finds, and finds nothing it misses
    a = [1.0] * 26 + [0.0] * 4
    b = [1.0] * 28 + [0.0] * 2
    d = paired_difference(a, b)
    assert d.diff == pytest.approx(-2 / 30)
    assert d.ci is not None and d.ci[0] < d.diff < d.ci[1] == 0.0  # reaches zero, not past
    assert (d.won, d.lost, d.p) == (0, 2, 0.5)


def test_the_interval_is_the_same_each_time_and_moves_with_the_seed():
    diffs = np.random.default_rng(7).normal(0.1, 0.3, size=30)  # MRR-like: many values
    first = bootstrap_ci(diffs)
    assert first == bootstrap_ci(diffs)  # fixed seed
    assert first is not None and first[0] <= diffs.mean() <= first[1]
    assert bootstrap_ci(diffs, seed=1) != first
    wider = bootstrap_ci(diffs, level=0.99)
    assert wider is not None and wider[0] <= first[0] and wider[1] >= first[1]


def test_the_interval_of_a_binary_difference_is_a_percentile_of_resampled_means():
    diffs = np.array([1.0] * 5 + [0.0] * 20 + [-1.0] * 2)
    low, high = bootstrap_ci(diffs)
    # every resampled mean of 27 values in {-1, 0, 1} is a multiple of 1/27
    for end in (low, high):
        assert end * 27 == pytest.approx(round(end * 27))
    assert low < 3 / 27 < high


def test_the_randomization_test_counts_sign_flips():
    # three equal gains: of the 8 sign patterns only all-plus and all-minus reach |mean| 1
    assert randomization_p([1.0, 1.0, 1.0]) == pytest.approx(2 / 8)
    # 16 patterns; |sum| >= 2.5 only where the three 1s share a sign (2 of 8) x either 0.5
    assert randomization_p([1.0, 1.0, 1.0, -0.5]) == pytest.approx(4 / 16)
    assert randomization_p([0.0] * 20) == 1.0
    # a 1-or-0 metric: the sign test again, up to the random flips of 30 questions
    a = [1.0] * 26 + [0.0] * 4
    b = [0.0] * 7 + [1.0] * 23
    d = paired_difference(a, b)
    assert abs(d.p_randomization - d.p) < 0.02
    # many small MRR gains beat a sign test that sees 8 wins against 3 losses as noise
    mrr = paired_difference([1.0] * 8 + [0.5] * 3 + [0.0] * 17, [0.2] * 8 + [1.0] * 3 + [0.0] * 17)
    assert mrr.p > 0.2 and mrr.p_randomization < 0.05


def test_one_question_has_no_interval_and_unequal_lengths_are_refused():
    d = paired_difference([1.0], [0.0])
    assert d.ci is None and (d.won, d.lost, d.p, d.p_randomization) == (1, 0, 1.0, 1.0)
    with pytest.raises(ValueError, match="equal lengths"):
        paired_difference([1.0, 0.0], [1.0])
    with pytest.raises(ValueError, match="no questions"):
        paired_difference([], [])


# --- comparing the runs of a table -----------------------------------------------------------


def _questions() -> list[Question]:
    answer = Answer("some words of an answer", "x/a.md", Passage.of("some words of an answer"))
    out = []
    for corpus in ("alpha", "beta"):
        for i in range(10):
            split = "confirm" if i < 6 else "tune"
            out.append(Question(f"{corpus}-{i}", "q?", (answer,), corpus, "markdown", split))
    return out


def _result(label: str, recall: dict[str, float], mrr: dict[str, float]) -> dict:
    return {
        "label": label,
        "per_question": {q: {"recall@10": recall[q], "mrr@10": mrr[q]} for q in recall},
    }


def test_compare_runs_pairs_the_default_with_each_run_per_corpus_and_half():
    questions = _questions()
    ids = [q.id for q in questions]
    default = _result("default", dict.fromkeys(ids, 1.0), dict.fromkeys(ids, 0.5))
    # "other" misses alpha-0 and alpha-1 (confirm) and ranks beta-7 (tune) higher
    recall = {i: 0.0 if i in ("alpha-0", "alpha-1") else 1.0 for i in ids}
    mrr = {i: 1.0 if i == "beta-7" else 0.0 if recall[i] == 0 else 0.5 for i in ids}
    other = _result("other", recall, mrr)
    pdf = {"label": "pdf-default", "per_question": {"p1": {"recall@10": 1.0, "mrr@10": 1.0}}}
    paired = compare_runs({"results": [default, other, pdf]}, questions)
    assert paired["baseline"] == "default" and paired["resamples"] == 10_000
    rows = {(c["run"], c["set"]): c for c in paired["comparisons"]}
    assert {run for run, _ in rows} == {"other"}  # the PDF run shares no question
    assert set(s for _, s in rows) == {
        "all",
        "split=tune",
        "split=confirm",
        "corpus=alpha split=tune",
        "corpus=alpha split=confirm",
        "corpus=beta split=tune",
        "corpus=beta split=confirm",
    }
    alpha = rows["other", "corpus=alpha split=confirm"]
    assert alpha["questions"] == 6
    assert alpha["recall@10"]["diff"] == pytest.approx(2 / 6)
    assert (alpha["recall@10"]["won"], alpha["recall@10"]["lost"]) == (2, 0)
    assert alpha["recall@10"]["p"] == pytest.approx(0.5)
    beta = rows["other", "corpus=beta split=tune"]
    assert beta["recall@10"]["ci"] == (0.0, 0.0) and beta["recall@10"]["p"] == 1.0
    assert beta["mrr@10"]["diff"] == pytest.approx(-0.5 / 4)
    assert (beta["mrr@10"]["won"], beta["mrr@10"]["lost"]) == (0, 1)
    assert rows["other", "all"]["questions"] == 20

    table = significance_table(paired, "confirm").splitlines()
    assert table[0].startswith("| corpus | run | n | ΔR@10 [95% CI] | won / lost | p |")
    assert table[0].endswith("| ΔMRR@10 [95% CI] | won / lost | p | p rand. |")
    assert [line.split(" | ")[0] for line in table[2:]] == ["| alpha", "| beta", "| all"]
    assert table[2].startswith("| alpha | other | 6 | +0.333 [") and "| 2 / 0 | 0.500 |" in table[2]
    assert "| beta | other | 6 | 0.000 [0.000, 0.000] | 0 / 0 | 1.000 |" in table[3]


def test_p_values_under_a_thousandth_are_shown_as_such():
    gained = asdict(paired_difference([1.0] * 20, [0.0] * 20))
    assert gained["p"] == pytest.approx(2 / 2**20)
    row = {"set": "split=confirm", "run": "r", "questions": 20}
    paired = {"level": 0.95, "comparisons": [{**row, "recall@10": gained, "mrr@10": gained}]}
    assert significance_table(paired, "confirm").splitlines()[-1] == (
        "| all | r | 20 | +1.000 [+1.000, +1.000] | 20 / 0 | <0.001 "
        "| +1.000 [+1.000, +1.000] | 20 / 0 | <0.001 | <0.001 |"
    )


def test_without_the_baseline_there_is_nothing_to_compare():
    questions = _questions()
    ids = [q.id for q in questions]
    run = _result("context-none", dict.fromkeys(ids, 1.0), dict.fromkeys(ids, 1.0))
    paired = compare_runs({"results": [run]}, questions)
    assert paired["comparisons"] == []
    assert significance_table(paired, "confirm").count("\n") == 1  # the header alone


def test_evaluate_run_keeps_each_questions_metrics_and_they_average_to_the_row(tmp_path):
    path = _write_jsonl(
        tmp_path / "q.jsonl",
        [
            {"id": "q1", "question": "fox?", "answers": [{"text": A1, "source": DOC_A}]},
            {"id": "q2", "question": "callers?", "answers": [{"text": B1, "source": DOC_B}]},
        ],
    )
    questions = load_questions(path)
    run = _write_run(
        tmp_path / "run",
        [[_chunk("a1", "/data/" + DOC_A, A1, E[0]), _chunk("b1", "/data/" + DOC_B, B1, E[1])]],
    )
    # q1 ranks b1 then a1 (its answer second); q2 ranks b1 first
    vectors = np.array([[0.5, 0.8, 0.0, 0.0], [0.1, 0.9, 0.0, 0.0]], dtype=np.float32)
    [result] = evaluate_run(run, questions, vectors=vectors)
    per_q = result["per_question"]
    assert per_q["q1"]["mrr@10"] == 0.5 and per_q["q2"]["mrr@10"] == 1.0
    assert per_q["q1"]["recall@1"] == 0.0 and per_q["q1"]["recall@10"] == 1.0
    for metric, value in result["sets"]["all"].items():
        if metric in per_q["q1"]:
            assert value == pytest.approx((per_q["q1"][metric] + per_q["q2"][metric]) / 2)
