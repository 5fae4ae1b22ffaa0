"""The question sets `corpus-chunker evaluate` scores and `commands.paired` compares: a
question and its answers, the halves, and the sets of questions scored apart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from commands.relevance import Passage

RANK_DEPTH = 10  # MRR@10, nDCG@10
SPLITS = ("tune", "confirm")  # defaults are chosen on tune; confirm is what gets reported


@dataclass(frozen=True)
class Answer:
    text: str
    source: str
    passage: Passage


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answers: tuple[Answer, ...]
    corpus: str | None = None
    doc_type: str | None = None
    split: str | None = None  # "tune" or "confirm": the fixed half of the question set


def splits_of(questions: Sequence[Question]) -> list[str]:
    """The halves the questions are split into, in SPLITS' order (none: a file without)."""
    return [s for s in SPLITS if any(q.split == s for q in questions)]


def question_groups(questions: Sequence[Question]) -> dict[str, list[int]]:
    """Question sets scored apart: all, each corpus and doc_type (when there are several),
    and with halves each split, alone and within each corpus (`split=confirm`,
    `corpus=sqlite split=confirm`)."""
    groups: dict[str, list[int]] = {"all": list(range(len(questions)))}
    splits = splits_of(questions)
    for split in splits:
        groups[f"split={split}"] = [i for i, q in enumerate(questions) if q.split == split]
    for key in ("corpus", "doc_type"):
        values = sorted({getattr(q, key) for q in questions if getattr(q, key)})
        if len(values) > 1:
            for value in values:
                members = [i for i, q in enumerate(questions) if getattr(q, key) == value]
                groups[f"{key}={value}"] = members
                if key != "corpus":
                    continue
                for split in splits:
                    half = [i for i in members if questions[i].split == split]
                    if half:
                        groups[f"{key}={value} split={split}"] = half
    return groups
