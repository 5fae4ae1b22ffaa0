"""Paired significance of one run against the others, question by question.

Every run of a table is scored on the same questions, so two runs are compared on the
per-question difference of a metric (`commands.evaluate` keeps each question's metrics in a
result's "per_question"): a is the baseline (the default), b another run, d_i = a_i - b_i.

- diff: the mean of d, which is the difference of the two rows of the table.
- ci: a paired bootstrap confidence interval of that mean (scipy.stats.bootstrap, percentile
  method, over the questions of the set: resampling d_i resamples the pairs), with a fixed
  seed, so a table is the same each time it is made. With 25-34 questions it is approximate
  (percentile intervals are a little narrow on small samples); the sign test is exact.
- won / lost: questions where a scores more than b / less than b. For Recall@10, which is 1
  or 0 per question when a question has one answer (every question of the development set),
  these are the discordant pairs, and the sign test below is McNemar's exact test.
- p: the exact two-sided sign test of won against lost (scipy.stats.binomtest, p = 1/2 over
  the won + lost questions that differ; ties are left out), 1.0 when none differ. For MRR@10
  it tests only which run ranks the answer higher, not by how much.
- p_randomization: the paired randomization test of the mean difference (Fisher's sign-flip
  test, scipy.stats.permutation_test: each d_i keeps or flips its sign; exact when 2^n is
  at most the resamples, else that many random flips, same seed). It weighs how far apart
  the two runs rank an answer, which the sign test does not; on a 1-or-0 metric it is the
  sign test again (up to its sampling). It is the test the table shows beside MRR@10's.

No correction for multiple comparisons is made: a table of 8 corpora x 2 halves x 3 runs x 2
metrics holds about 5 rows under p = 0.05 by chance alone when nothing differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

from commands.questions import RANK_DEPTH, Question, question_groups

RESAMPLES = 10_000
SEED = 0
LEVEL = 0.95
METRICS = ("recall@10", f"mrr@{RANK_DEPTH}")
# a difference this small is a tie (the metrics are ratios of small integers, computed alike)
TIE = 1e-12


@dataclass(frozen=True)
class PairedDifference:
    """One metric of run a against run b on one set of questions (module docstring)."""

    questions: int
    diff: float  # mean of a - b
    ci: tuple[float, float] | None  # None below two questions
    won: int  # questions where a > b
    lost: int  # questions where a < b
    p: float  # exact two-sided sign test of won against lost
    p_randomization: float  # two-sided paired randomization test of the mean difference


def sign_test(won: int, lost: int) -> float:
    """Exact two-sided sign test (McNemar's exact test on discordant pairs): the p-value of
    `won` successes in `won + lost` trials at p = 1/2; 1.0 when there is no trial."""
    if won < 0 or lost < 0:
        raise ValueError(f"counts must be non-negative, got {won} and {lost}")
    if won + lost == 0:
        return 1.0
    return float(stats.binomtest(won, won + lost, 0.5).pvalue)


def bootstrap_ci(
    diffs: Sequence[float] | np.ndarray,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of paired differences; None under two."""
    values = np.asarray(diffs, dtype=np.float64)
    if len(values) < 2:
        return None
    if np.all(values == values[0]):  # every resample has the same mean
        return (float(values[0]), float(values[0]))
    result = stats.bootstrap(
        (values,),
        np.mean,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    interval = result.confidence_interval
    return (float(interval.low), float(interval.high))


def randomization_p(
    diffs: Sequence[float] | np.ndarray, resamples: int = RESAMPLES, seed: int = SEED
) -> float:
    """Two-sided p-value of the mean of paired differences by sign flips (module docstring);
    1.0 when every difference is zero, or for one question (either sign is as far)."""
    values = np.asarray(diffs, dtype=np.float64)
    if len(values) < 2 or not np.any(np.abs(values) > TIE):
        return 1.0
    result = stats.permutation_test(
        (values,),
        np.mean,
        permutation_type="samples",
        n_resamples=resamples,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    return float(result.pvalue)


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> PairedDifference:
    """Run a against run b, given their scores on the same questions in the same order."""
    if len(a) != len(b):
        raise ValueError(f"paired scores need equal lengths, got {len(a)} and {len(b)}")
    if not len(a):
        raise ValueError("no questions to compare")
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    won, lost = int((d > TIE).sum()), int((d < -TIE).sum())
    return PairedDifference(
        questions=len(d),
        diff=float(d.mean()),
        ci=bootstrap_ci(d, resamples, seed, level),
        won=won,
        lost=lost,
        p=sign_test(won, lost),
        p_randomization=randomization_p(d, resamples, seed),
    )


def _reported(name: str, halves: bool) -> bool:
    """The sets compared: all questions, each half, and each corpus's halves; without halves,
    all questions and each corpus."""
    if not halves:
        return name == "all" or name.startswith("corpus=")
    return (
        name == "all"
        or name.startswith("split=")
        or (name.startswith("corpus=") and " split=" in name)
    )


def compare_runs(
    evaluation: Mapping[str, Any],
    questions: Sequence[Question],
    baseline: str = "default",
    metrics: Sequence[str] = METRICS,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> dict[str, Any]:
    """The baseline run (by label) against every other result of `evaluation` that scored
    some of the same question ids, on each set of `question_groups(questions)` that is all
    questions, a half, or a corpus's half. Results on other question files (the PDF pairs)
    share no id and are left out; no baseline, no comparison."""
    results = evaluation["results"]
    base = next((r for r in results if r["label"] == baseline), None)
    out: dict[str, Any] = {
        "baseline": baseline,
        "method": "paired bootstrap (percentile) of the mean difference; exact sign test; "
        "paired randomization (sign-flip) test",
        "resamples": resamples,
        "seed": seed,
        "level": level,
        "comparisons": [],
    }
    if base is None:
        return out
    ids = [q.id for q in questions]
    sets = question_groups(questions)
    halves = any(n.startswith("split=") for n in sets)
    groups = {n: [ids[i] for i in m] for n, m in sets.items() if _reported(n, halves)}
    for other in results:
        if other is base:
            continue
        shared = base["per_question"].keys() & other["per_question"].keys()
        if not shared:
            continue
        for name, members in groups.items():
            members = [i for i in members if i in shared]
            if not members:
                continue
            row: dict[str, Any] = {"set": name, "run": other["label"], "questions": len(members)}
            for metric in metrics:
                a = [base["per_question"][i][metric] for i in members]
                b = [other["per_question"][i][metric] for i in members]
                row[metric] = asdict(paired_difference(a, b, resamples, seed, level))
            out["comparisons"].append(row)
    return out


def _signed(value: float) -> str:
    return f"{value:+.3f}".replace("+0.000", "0.000").replace("-0.000", "0.000")


def _p(value: float) -> str:
    return "<0.001" if value < 0.0005 else f"{value:.3f}"


def _cells(d: Mapping[str, Any], randomization: bool) -> list[str]:
    ci = f"[{_signed(d['ci'][0])}, {_signed(d['ci'][1])}]" if d["ci"] else "–"
    cells = [f"{_signed(d['diff'])} {ci}", f"{d['won']} / {d['lost']}", _p(d["p"])]
    return [*cells, _p(d["p_randomization"])] if randomization else cells


def significance_table(paired: Mapping[str, Any], split: str | None) -> str:
    """One row per corpus and run on the `split` half (the whole half last; `split` None: a
    question file without halves, each corpus and then all): the baseline minus the run, per
    question, R@10 and MRR@10, with interval, won / lost and sign-test p, and for MRR@10 the
    randomization test's p too (on R@10 it is the sign test's)."""
    if split is None:
        rows = [c for c in paired["comparisons"] if " split=" not in c["set"]]
        rows = [c for c in rows if c["set"] == "all" or c["set"].startswith("corpus=")]
        rows.sort(key=lambda c: (c["set"] == "all", c["set"]))
    else:
        rows = [
            c
            for c in paired["comparisons"]
            if c["set"] == f"split={split}" or c["set"].endswith(f" split={split}")
        ]
        rows.sort(key=lambda c: (c["set"].startswith("split="), c["set"]))
    pct = round(paired["level"] * 100)
    metrics = [m for m in METRICS if rows and m in rows[0]]
    header = ["corpus", "run", "n"]
    for m in metrics:
        name = m.replace("recall", "R").replace("mrr", "MRR")
        header += [f"Δ{name} [{pct}% CI]", "won / lost", "p"]
        header += ["p rand."] if m.startswith("mrr") else []
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for c in rows:
        whole = c["set"] == "all" or c["set"].startswith("split=")
        corpus = "all" if whole else c["set"].split(" ")[0][7:]
        cells = [corpus, c["run"], str(c["questions"])]
        for m in metrics:
            cells += _cells(c[m], m.startswith("mrr"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paired_report(
    paired: Mapping[str, Any], splits: Sequence[str | None], called: str | None = None
) -> str:
    """`significance_table` for each of `splits` (None: a question file without halves), each
    under a line saying what it holds; `called` is how that line speaks of the baseline
    (default: its label)."""
    label = paired["baseline"]
    intro = (
        f"{label} minus each run per question (paired bootstrap {paired['resamples']:,} "
        f"resamples, seed {paired['seed']}; won / lost: questions where {called or label} "
        "scores more / less; p: exact two-sided sign test; p rand.: paired randomization test)"
    )
    return "\n\n".join(
        f"{'' if split is None else f'{split} half, '}{intro}:\n\n"
        f"{significance_table(paired, split)}"
        for split in splits
    )
