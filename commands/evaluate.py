"""corpus-chunker evaluate: retrieval metrics of finished runs on a labelled question set.

    corpus-chunker evaluate RUN [RUN...] --questions Q.jsonl [--json_out F] [--k 1 5 10]
        [--baseline RUN]
    python -m commands.evaluate ...                                   (the same)

Each question is embedded with its run's own model (the one `run_manifest.json` names) and
scored against every embedded chunk by exact cosine similarity. The chunks table is read in
record batches and only a running top list per question is kept, so memory holds one batch
of embeddings plus the questions, whatever the corpus size. Relevance is the word-shingle
rule of `commands.relevance`, and only chunks of the document an answer names can be
relevant to it. A run with parent chunks (`--parent_chunk_size`) is scored twice: its
children as retrieved, and "retrieve the child, return its parent". With `--baseline RUN`,
that run is compared with each other one question by question (`commands.paired`): is a
difference in the table more than the questions' noise?

Metrics, per question, then averaged (a question's answers are its answer passages), computed
by ir-measures (trec_eval's R@k, RR@10, nDCG@10) with the answers as the relevant documents:
- Recall@k: the fraction of its answers that at least one of the top k results is relevant to
  (a question with one answer scores 1 or 0: the hit rate).
- MRR@10: 1 / the rank of the first result relevant to any answer, 0 past rank 10.
- nDCG@10: each result gains the number of answers it is the first to cover, discounted by
  log2(rank + 1); the ideal covers one answer per rank.
- answerable: the share of questions with at least one relevant chunk anywhere in the index
  (a ceiling of Recall@k).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from commands.questions import (
    RANK_DEPTH,
    SPLITS,
    Answer,
    Question,
    question_groups,
    splits_of,
)
from commands.relevance import Passage, relevant, source_matches
from runs.run_folder import RunFolder
from transforms.cost_report import CostReport

DEFAULT_KS = (1, 5, 10)
PARENT_FANOUT = 5  # children kept per parent slot, to find k distinct parents
BATCH_ROWS = 2048
COLUMNS = ["chunk_id", "source", "doc_type", "text", "token_count", "is_parent", "parent_id"]


# --- questions -------------------------------------------------------------------------------


def load_questions(path: str) -> list[Question]:
    """Read a question file (JSONL); a bad line raises ValueError naming the file and line."""
    if not os.path.isfile(path):
        raise ValueError(f"--questions {path}: no such file")
    out: list[Question] = []
    seen: set[str] = set()
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{where}: not JSON ({e.msg})") from None
            out.append(_question(record, where))
            if out[-1].id in seen:
                raise ValueError(f"{where}: duplicate id {out[-1].id!r}")
            seen.add(out[-1].id)
    if not out:
        raise ValueError(f"--questions {path} holds no questions")
    return out


def _question(record: Any, where: str) -> Question:
    if not isinstance(record, dict):
        raise ValueError(f"{where}: a question must be a JSON object")
    for key in ("id", "question"):
        if not isinstance(record.get(key), str) or not record[key].strip():
            raise ValueError(f"{where}: {key!r} must be a non-empty string")
    answers = record.get("answers")
    if not isinstance(answers, list) or not answers:
        raise ValueError(f"{where}: 'answers' must be a non-empty list")
    parsed = []
    for i, answer in enumerate(answers):
        if not isinstance(answer, dict):
            raise ValueError(f"{where}: answers[{i}] must be an object with text and source")
        for key in ("text", "source"):
            if not isinstance(answer.get(key), str) or not answer[key].strip():
                raise ValueError(f"{where}: answers[{i}].{key} must be a non-empty string")
        passage = Passage.of(answer["text"])
        if not passage.words:
            raise ValueError(f"{where}: answers[{i}].text has no words")
        parsed.append(Answer(answer["text"], answer["source"], passage))
    for key in ("corpus", "doc_type", "split"):
        if record.get(key) is not None and not isinstance(record[key], str):
            raise ValueError(f"{where}: {key!r} must be a string when given")
    if record.get("split") not in (None, *SPLITS):
        raise ValueError(f"{where}: 'split' must be one of {SPLITS}, got {record['split']!r}")
    return Question(
        record["id"],
        record["question"],
        tuple(parsed),
        record.get("corpus"),
        record.get("doc_type"),
        record.get("split"),
    )


# --- metrics ---------------------------------------------------------------------------------


def score_rankings(
    rankings: Sequence[tuple[Sequence[frozenset[int]], int]], ks: Sequence[int] = DEFAULT_KS
) -> list[dict[str, float]]:
    """Metrics of many questions at once, by ir-measures (trec_eval's own code through
    pytrec_eval). Each entry is (ranked, n_answers): `ranked[i]` holds the answers the result
    at rank i+1 is relevant to (indexes in 0..n_answers-1). Definitions in the module
    docstring.

    trec_eval counts documents, these metrics count answers: each question's answers are its
    relevant "documents", and a result is relabelled to the answers it is the first to cover
    (a result that covers none new is a non-relevant one). A result that is the first to cover
    two answers stands for both at consecutive ranks, so Recall@k of such a question can count
    one answer less than the definition (no question of the development set has two answers).
    """
    try:
        import ir_measures
        from ir_measures import RR, R, nDCG
    except ImportError:
        raise ValueError(
            "the metrics need ir-measures: pip install 'corpus-chunker[eval]' "
            "(or pip install ir-measures)"
        ) from None

    measures = {f"recall@{k}": R @ k for k in ks}
    measures[f"mrr@{RANK_DEPTH}"] = RR @ RANK_DEPTH
    measures[f"ndcg@{RANK_DEPTH}"] = nDCG @ RANK_DEPTH
    qrels, run = [], []
    for q, (ranked, n_answers) in enumerate(rankings):
        if n_answers < 1:
            raise ValueError(f"a question needs at least one answer, got n_answers={n_answers}")
        qrels += [ir_measures.Qrel(str(q), f"a{a}", 1) for a in range(n_answers)]
        seen: set[int] = set()
        items: list[str] = []
        for rank, relevant_to in enumerate(ranked):
            new = sorted(relevant_to - seen)
            seen |= relevant_to
            items += [f"a{a}" for a in new] or [f"r{rank}"]
        # strictly decreasing scores: trec_eval orders by score, ties by document id
        run += [
            ir_measures.ScoredDoc(str(q), d, float(len(items) - i)) for i, d in enumerate(items)
        ]
    out: list[dict[str, float]] = [dict.fromkeys(measures, 0.0) for _ in rankings]
    names = {measure: name for name, measure in measures.items()}
    for metric in ir_measures.iter_calc(list(measures.values()), qrels, run):
        out[int(metric.query_id)][names[metric.measure]] = float(metric.value)
    return out


def score_ranking(
    ranked: Sequence[frozenset[int]], n_answers: int, ks: Sequence[int] = DEFAULT_KS
) -> dict[str, float]:
    """`score_rankings` of one question."""
    return score_rankings([(ranked, n_answers)], ks)[0]


def metric_names(ks: Sequence[int]) -> list[str]:
    return [f"recall@{k}" for k in ks] + [f"mrr@{RANK_DEPTH}", f"ndcg@{RANK_DEPTH}"]


# --- one run ---------------------------------------------------------------------------------


@dataclass
class _TokenHistogram:
    """Chunk token counts as a histogram: exact mean and percentiles in bounded memory."""

    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def add(self, values: np.ndarray) -> None:
        if not len(values):
            return
        hist = np.bincount(np.maximum(values, 0))
        if len(hist) > len(self.counts):
            self.counts = np.pad(self.counts, (0, len(hist) - len(self.counts)))
        self.counts[: len(hist)] += hist

    def summary(self) -> dict[str, Any]:
        n = int(self.counts.sum())
        if not n:
            return {"chunks": 0, "mean_tokens": None, "p90_tokens": None}
        values = np.arange(len(self.counts))
        p90 = int(np.searchsorted(np.cumsum(self.counts), math.ceil(0.9 * n)))
        return {
            "chunks": n,
            "mean_tokens": float((values * self.counts).sum() / n),
            "p90_tokens": p90,
        }


@dataclass
class RunScan:
    """What one pass over a run's chunks table leaves: top lists and relevance."""

    top_ids: list[list[str]]  # per question, chunk ids of the best children, best first
    parent_of: dict[str, str | None]  # chunk id -> parent id, for every id in top_ids
    relevant_to: dict[str, frozenset[int]]  # chunk id -> global answer indexes it is relevant to
    searchable: set[int]  # answers with a relevant embedded (non-parent) chunk
    parents_cover: set[int]  # answers with a relevant parent chunk
    matched_answers: set[int]  # answers whose source is a document of the run
    tokens: dict[str, _TokenHistogram]  # "" for all, else per doc_type, searchable chunks
    parent_tokens: _TokenHistogram
    has_parents: bool


def _folder(run: str) -> RunFolder:
    return RunFolder(run, f"run {run}")


def _read_report(run: str) -> CostReport:
    report = CostReport.read(run)
    if report is None:
        path = os.path.join(run, "cost_report.json")
        raise ValueError(f"run {run}: {path} is missing (not a finished run?)")
    return report


def run_model(run: str) -> str:
    """The embedding model a run's manifest names."""
    folder = _folder(run)
    folder.require_chunks(" to search")
    model = folder.config.get("embedding_model")
    if not model or model == "none":
        raise ValueError(f"run {run} embedded nothing (embedding_model={model!r})")
    return model


def embed_questions(model_name: str, texts: Sequence[str]) -> np.ndarray:
    """Normalised float32 vectors of `texts`, by the model a run names, on the backend it ran
    (loaded as the job does; an ONNX file must be the one whose hash the run recorded)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transforms.embedding.onnx_model import load_encoder

    model = load_encoder(model_name)
    vectors = model.encode(
        list(texts),
        batch_size=32,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return np.asarray(vectors, dtype=np.float32)


def _batches(run: str) -> Iterator[Any]:
    import pyarrow.dataset as ds

    shards = [m.path for m in _folder(run).table_files("chunks")]
    if not shards:
        raise ValueError(f"run {run} has no chunks/ shard")
    dataset = ds.dataset(shards, format="parquet")
    if "embedding" not in dataset.schema.names:
        raise ValueError(f"run {run}: chunks/ has no embedding column")
    yield from dataset.to_batches(columns=[*COLUMNS, "embedding"], batch_size=BATCH_ROWS)


def _embedding_matrix(run: str, column: Any, rows: np.ndarray, dim: int) -> np.ndarray:
    import pyarrow as pa

    values = column.take(pa.array(rows, type=pa.int64())).flatten()
    if len(values) != len(rows) * dim:
        raise ValueError(
            f"run {run}: its embeddings are not all {dim}-dimensional, as the vectors of "
            "the model its manifest names are"
        )
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim)


def scan_run(
    run: str,
    questions: Sequence[Question],
    vectors: np.ndarray,
    depth: int,
    answers_of_source: _SourceIndex,
) -> RunScan:
    """One pass over the run's chunks: a running top `depth` per question, and relevance."""
    n_q, dim = vectors.shape
    top_scores = np.full((n_q, 0), -np.inf, dtype=np.float32)
    top_rows = np.zeros((n_q, 0), dtype=np.int64)
    ids_of_row: dict[int, tuple[str, str | None]] = {}
    relevant_to: dict[str, frozenset[int]] = {}
    searchable: set[int] = set()
    parents_cover: set[int] = set()
    matched: set[int] = set()
    tokens: dict[str, _TokenHistogram] = defaultdict(_TokenHistogram)
    parent_tokens = _TokenHistogram()
    has_parents = False
    offset = 0
    for batch in _batches(run):
        cols = {name: batch.column(name) for name in COLUMNS}
        is_parent = np.asarray(cols["is_parent"].to_numpy(zero_copy_only=False), dtype=bool)
        valid = np.asarray(batch.column("embedding").is_valid().to_numpy(zero_copy_only=False))
        search = ~is_parent & valid
        sources = cols["source"].to_pylist()
        chunk_ids = cols["chunk_id"].to_pylist()
        texts = cols["text"].to_pylist()
        doc_types = cols["doc_type"].to_pylist()
        parent_ids = cols["parent_id"].to_pylist()
        counts = np.asarray(cols["token_count"].to_numpy(zero_copy_only=False), dtype=np.int64)
        for i, source in enumerate(sources):
            candidates = answers_of_source.get(source)
            if not candidates:
                continue
            matched.update(candidates)
            chunk = Passage.of(texts[i])
            hits = frozenset(a for a in candidates if relevant(chunk, answers_of_source.answer(a)))
            if hits:
                relevant_to[chunk_ids[i]] = hits
                if is_parent[i]:
                    parents_cover.update(hits)
                elif search[i]:
                    searchable.update(hits)
                    if parent_ids[i] is None:  # returned as itself on the (parent) row too
                        parents_cover.update(hits)
        if is_parent.any():
            has_parents = True
            parent_tokens.add(counts[is_parent])
        rows = np.flatnonzero(search)
        tokens[""].add(counts[rows])
        for doc_type in set(doc_types):
            mask = np.array([t == doc_type for t in doc_types]) & search
            tokens[doc_type].add(counts[mask])
        if len(rows):
            matrix = _embedding_matrix(run, batch.column("embedding"), rows, dim)
            scores = vectors @ matrix.T
            all_scores = np.concatenate([top_scores, scores], axis=1)
            all_rows = np.concatenate([top_rows, np.broadcast_to(rows + offset, scores.shape)], 1)
            # Stable: equal scores keep the order the rows were read in.
            order = np.argsort(-all_scores, axis=1, kind="stable")[:, :depth]
            top_scores = np.take_along_axis(all_scores, order, 1)
            top_rows = np.take_along_axis(all_rows, order, 1)
            parent_ids = cols["parent_id"].to_pylist()
            for r in rows:
                ids_of_row[int(r) + offset] = (chunk_ids[r], parent_ids[r])
            keep = set(top_rows.ravel().tolist())
            ids_of_row = {r: v for r, v in ids_of_row.items() if r in keep}
        offset += batch.num_rows
    top_ids = [[ids_of_row[int(r)][0] for r in row] for row in top_rows]
    parent_of = dict(ids_of_row.values())
    return RunScan(
        top_ids,
        parent_of,
        relevant_to,
        searchable,
        parents_cover,
        matched,
        dict(tokens),
        parent_tokens,
        has_parents,
    )


class _SourceIndex:
    """Global answer indexes by chunk source, resolved once per distinct source."""

    def __init__(self, questions: Sequence[Question]) -> None:
        self.answers: list[Answer] = [a for q in questions for a in q.answers]
        self._by_name: dict[str, list[int]] = defaultdict(list)
        for i, answer in enumerate(self.answers):
            self._by_name[answer.source.replace("\\", "/").rsplit("/", 1)[-1]].append(i)
        self._cache: dict[str, tuple[int, ...]] = {}

    def get(self, source: str) -> tuple[int, ...]:
        found = self._cache.get(source)
        if found is None:
            name = source.replace("\\", "/").rsplit("/", 1)[-1]
            found = tuple(
                i
                for i in self._by_name.get(name, ())
                if source_matches(source, self.answers[i].source)
            )
            self._cache[source] = found
        return found

    def answer(self, index: int) -> Passage:
        return self.answers[index].passage


# --- scoring and tables ----------------------------------------------------------------------


def _rankings(
    scan: RunScan, questions: Sequence[Question], first: Sequence[int], k: int, parents: bool
) -> list[list[frozenset[int]]]:
    out = []
    for q, ids in enumerate(scan.top_ids):
        if parents:
            picked: list[str] = []
            for chunk_id in ids:
                parent = scan.parent_of.get(chunk_id) or chunk_id
                if parent not in picked:
                    picked.append(parent)
            ids = picked
        local = range(first[q], first[q] + len(questions[q].answers))
        out.append(
            [
                frozenset(a - first[q] for a in scan.relevant_to.get(c, ()) if a in local)
                for c in ids[:k]
            ]
        )
    return out


def evaluate_run(
    run: str,
    questions: Sequence[Question],
    ks: Sequence[int] = DEFAULT_KS,
    vectors: np.ndarray | None = None,
) -> list[dict[str, Any]]:
    """One result per way of scoring the run (children; with parents also parents)."""
    model = run_model(run)  # refuses an unfinished or unembedded run first
    if vectors is None:
        vectors = embed_questions(model, [q.question for q in questions])
    index = _SourceIndex(questions)
    k = max(max(ks), RANK_DEPTH)
    scan = scan_run(run, questions, vectors, k * PARENT_FANOUT, index)
    if not scan.matched_answers:
        example = questions[0].answers[0].source
        raise ValueError(
            f"run {run}: no answer's source names a document of the run (e.g. {example!r}); "
            "answer sources are matched as a suffix of the chunks' source path"
        )
    first, n = [], 0
    for q in questions:
        first.append(n)
        n += len(q.answers)
    report = _read_report(run)
    results = []
    for parents in (False, True) if scan.has_parents else (False,):
        rankings = _rankings(scan, questions, first, k, parents)
        covers = scan.parents_cover if parents else scan.searchable
        scores = score_rankings(
            [(r, len(q.answers)) for r, q in zip(rankings, questions, strict=True)], ks
        )
        sets = {}
        for name, members in question_groups(questions).items():
            per_q = [scores[i] for i in members]
            row: dict[str, Any] = {"questions": len(members)}
            for metric in metric_names(ks):
                row[metric] = sum(m[metric] for m in per_q) / len(members)
            row["answerable"] = sum(
                any(a in covers for a in range(first[i], first[i] + len(questions[i].answers)))
                for i in members
            ) / len(members)
            if parents:
                if name == "all":
                    row.update(scan.parent_tokens.summary())
            elif name == "all" or name.startswith("doc_type="):
                hist = scan.tokens.get(name.removeprefix("doc_type=") if name != "all" else "")
                row.update((hist or _TokenHistogram()).summary())
            sets[name] = row
        first_hit = [
            next((r + 1 for r, rel in enumerate(ranking) if rel), None) for ranking in rankings
        ]
        results.append(
            {
                "run": run,
                "label": _label(run) + (" (parent)" if parents else ""),
                "scoring": "child -> parent" if parents else "chunk",
                "embedding_model": model,
                "embedded_tokens": report.embedded_tokens,
                "cost_usd": report.cost_usd,
                "answers_without_document": n - len(scan.matched_answers),
                "sets": sets,
                # per question: the rank of its first relevant result (None past rank k)
                "first_relevant_rank": {
                    q.id: rank for q, rank in zip(questions, first_hit, strict=True)
                },
                # per question: its metrics, for paired comparisons of runs (commands.paired)
                "per_question": {
                    q.id: {metric: s[metric] for metric in metric_names(ks)}
                    for q, s in zip(questions, scores, strict=True)
                },
            }
        )
    return results


def evaluate(
    runs: Sequence[str], questions_path: str, ks: Sequence[int] = DEFAULT_KS
) -> dict[str, Any]:
    """Score every run on the question file; the questions are embedded once per model."""
    questions = load_questions(questions_path)
    models = {run: run_model(run) for run in runs}
    vectors = {
        model: embed_questions(model, [q.question for q in questions])
        for model in dict.fromkeys(models.values())
    }
    results = []
    for run in runs:
        results.extend(evaluate_run(run, questions, ks, vectors[models[run]]))
    return {
        "questions": questions_path,
        "n_questions": len(questions),
        "k": list(ks),
        "evaluated_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "results": results,
    }


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown_table(evaluation: dict[str, Any]) -> str:
    """The side-by-side table: one block of rows per question set, one row per run."""
    ks = evaluation["k"]
    names = metric_names(ks)
    header = ["set", "run", "questions", *(n.replace("recall", "R") for n in names)]
    header += ["answerable", "chunks", "mean tok", "p90 tok", "embedded tok", "$"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    sets = list(dict.fromkeys(s for r in evaluation["results"] for s in r["sets"]))
    for set_name in sets:
        for result in evaluation["results"]:
            row = result["sets"].get(set_name)
            if row is None:
                continue
            whole = set_name == "all"
            cells = [set_name, result["label"], _fmt(row["questions"])]
            cells += [_fmt(row[n]) for n in names] + [_fmt(row["answerable"])]
            cells += [
                _fmt(row.get("chunks")),
                _fmt(row.get("mean_tokens"), 1),
                _fmt(row.get("p90_tokens")),
                _fmt(result["embedded_tokens"]) if whole else "",
                _fmt(result["cost_usd"], 6) if whole else "",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv: Iterable[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="corpus-chunker evaluate",
        description="Retrieval metrics of finished runs on a labelled question set, side by side.",
    )
    parser.add_argument("runs", nargs="+", metavar="RUN", help="output folders of finished runs")
    parser.add_argument("--questions", required=True, help="question file (JSONL)")
    parser.add_argument("--json_out", default=None, help="also write the results as JSON here")
    parser.add_argument(
        "--k", type=int, nargs="+", default=list(DEFAULT_KS), help="cut-offs of Recall@k"
    )
    parser.add_argument(
        "--baseline",
        default=None,
        metavar="RUN",
        help="also compare this run (one of RUN..., by its folder name) with each other run, "
        "question by question: R@10 and MRR@10 differences with a paired bootstrap 95%% "
        "interval, won / lost, sign test and randomization test, per corpus and per half",
    )
    args = parser.parse_args(list(argv))
    if any(k < 1 for k in args.k):
        parser.error(f"--k values must be positive, got {args.k}")
    if args.baseline is not None:
        labels = [_label(run) for run in args.runs]
        args.baseline = _label(args.baseline)
        if args.baseline not in labels:
            parser.error(f"--baseline {args.baseline} is not one of the runs: {', '.join(labels)}")
        if len(labels) < 2:
            parser.error("--baseline needs a second run to compare with")
        if 10 not in args.k:
            args.k.append(10)  # the comparison is of R@10 and MRR@10
    return args


def _label(run: str) -> str:
    """A run's label in the tables: its folder's name."""
    return os.path.basename(os.path.normpath(run))


def paired_tables(evaluation: dict[str, Any], questions: Sequence[Question], baseline: str) -> str:
    """`baseline` against each other run, question by question (commands.paired), one table
    per half of the question file, or one when it has no halves; also kept in `evaluation`."""
    from commands.paired import compare_runs, paired_report

    evaluation["paired"] = compare_runs(evaluation, questions, baseline=baseline)
    return paired_report(evaluation["paired"], splits_of(questions) or [None])


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        evaluation = evaluate(args.runs, args.questions, sorted(set(args.k)))
    except ValueError as e:
        print(f"corpus-chunker evaluate: error: {e}", file=sys.stderr)
        sys.exit(2)
    for result in evaluation["results"]:
        if result["answers_without_document"]:
            print(
                f"warning: {result['label']}: {result['answers_without_document']} answers name "
                "a source that is not a document of the run",
                file=sys.stderr,
            )
    print(markdown_table(evaluation))
    if args.baseline is not None:
        print()
        print(paired_tables(evaluation, load_questions(args.questions), args.baseline))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(evaluation, f, indent=2)


if __name__ == "__main__":
    main()
