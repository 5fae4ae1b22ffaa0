"""The independent checks (eval.independent): their packages are pinned and kept out of the
zoo and the development set, and their questions follow the development set's rules."""

from __future__ import annotations

import json
import os
import re

from eval.independent import LOCK, _write_verified
from eval.make_questions import _PRODUCT_WORDS, pdf_pair

HERE = os.path.dirname(os.path.abspath(__file__))
EVAL = os.path.join(HERE, "..", "eval")


def _load(name: str) -> dict:
    with open(os.path.join(EVAL, name), encoding="utf-8") as f:
        return json.load(f)


def test_the_independent_packages_are_pinned_and_in_no_set_that_is_built_or_tuned_on() -> None:
    lock = _load(os.path.basename(LOCK))
    packages = [p for check in ("python", "r") for p in lock[check]["packages"]]
    assert {p["name"] for p in packages} == {"python3.11-doc", "r-doc-pdf", "r-doc-html"}
    for p in packages:
        assert re.fullmatch(r"[0-9a-f]{64}", p["sha256"]) and p["version"], p
    corpora, zoo = _load("corpora.json"), _load("zoo.json")
    tuned = {p["name"] for p in corpora["packages"] + corpora["pdf_pairs"]}
    tuned |= {g["name"] for g in zoo["generators"]}
    assert tuned and not tuned & {p["name"] for p in packages}
    # nor a generator or corpus of the same documentation under another package's name
    names = " ".join(sorted(tuned | {g["generator"] for g in zoo["generators"]}))
    assert not re.search(r"python3\.\d+-doc|\br-doc|\br-manuals?\b", names), names


def _pair(tmp_path, headings: list[str]) -> str:
    """A pairs folder of one manual whose HTML page has `headings`, each over a passage."""
    (tmp_path / "pdf" / "m").mkdir(parents=True)
    (tmp_path / "pdf" / "m" / "m.pdf").write_bytes(b"")  # only its name is read here
    (tmp_path / "html" / "m").mkdir(parents=True)
    body = "".join(
        f"<h3>{h}</h3><p>passage {i} of the section, long enough to be asked about</p>"
        for i, h in enumerate(headings)
    )
    (tmp_path / "html" / "m" / "m.html").write_text(f"<html><body>{body}</body></html>")
    return " ".join(f"passage {i} of the section, long enough to be asked about" for i in
                    range(len(headings)))  # fmt: skip


def test_pair_questions_skip_headings_without_a_word_and_the_products_name(tmp_path) -> None:
    pdf_text = _pair(tmp_path, ["1.2 Large matrices", "(59)", "R objects", "Writing CRAN code"])
    html, pdf = pdf_pair(str(tmp_path), "m", pdf_text, re.compile(r"(?i)\bR\b|\bCRAN\b"))
    assert [r["question"] for r in html] == ["What does the manual say about Large matrices?"]
    assert [r["answers"][0]["source"] for r in pdf] == ["m/m.pdf"]
    # the development pairs' own pattern: R is no product of theirs
    html, _ = pdf_pair(str(tmp_path), "m", pdf_text, _PRODUCT_WORDS)
    assert len(html) == 3


def test_an_answer_that_is_no_passage_is_left_out_and_counted(tmp_path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.html").write_text("<p>Return the  sum of\n<b>two</b> numbers.</p>")
    records = [
        {"id": "ok", "answers": [{"text": "the sum of two numbers.", "source": "c/a.html"}]},
        {"id": "bad", "answers": [{"text": "the product of two", "source": "c/a.html"}]},
        {"id": "gone", "answers": [{"text": "sum", "source": "c/missing.html"}]},
    ]
    out = tmp_path / "q.jsonl"
    assert _write_verified(str(out), records, str(tmp_path)) == 2
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["ok"]


def test_scores_by_the_questions_template(tmp_path) -> None:
    from eval.independent import by_kind, kind_of

    assert kind_of("What does accumulate() do?") == "callable"
    assert kind_of("What is the Popen class for?") == "class"
    assert kind_of("What is Popen.returncode?") == "value"
    questions = tmp_path / "q.jsonl"
    asked = ["What does f() do?", "What does g() do?", "What is the C class for?"]
    questions.write_text("".join(
        json.dumps({"id": f"q{i}", "question": q, "corpus": "c", "doc_type": "html",
                    "answers": [{"text": "x", "source": "c/a.html"}]}) + "\n"
        for i, q in enumerate(asked)
    ))  # fmt: skip
    evaluation = {
        "questions": str(questions),
        "results": [{"label": "default", "first_relevant_rank": {"q0": 1, "q1": 11, "q2": 4}}],
    }
    rows = by_kind(evaluation).splitlines()
    assert "| callable | 2 | 0.500 / 0.500 |" in rows  # q1 at rank 11 is no hit
    assert "| class | 1 | 1.000 / 0.250 |" in rows
    assert "| value | 0 | 0.000 / 0.000 |" in rows


def test_a_pdf_holds_a_passage_that_a_page_break_interrupts_not_one_it_lacks() -> None:
    from commands.relevance import Passage
    from eval.make_questions import pdf_holds

    passage = "the planner uses these statistics to choose the most efficient plan for a query"
    broken = passage.replace("choose the", "choose\nR Admin Manual 12\nthe")  # running head
    reference = Passage.of(f"Chapter 2. {broken}. More text follows.")
    assert pdf_holds(reference, passage)
    assert not pdf_holds(reference, "a passage of other words that this manual never holds")


def test_pair_questions_look_for_answers_in_pdfium_text_not_in_the_jobs(
    tmp_path, monkeypatch
) -> None:
    """The pairs' question set must not depend on the PDF extraction it measures: built with
    the job's PDF reading broken, it still keeps the section the PDF holds and drops the one
    it does not."""
    import shutil

    import transforms.ingest.pdf
    from eval.make_questions import pair_questions

    def broken(*args, **kwargs):
        raise AssertionError("the job's PDF extraction was used")

    monkeypatch.setattr(transforms.ingest.pdf, "pdf_to_paged_text", broken)
    (tmp_path / "pairs" / "pdf" / "m").mkdir(parents=True)
    shutil.copyfile(os.path.join(HERE, "..", "samples", "pdf", "camlidl-1.04.doc.pdf"),
                    tmp_path / "pairs" / "pdf" / "m" / "m.pdf")  # fmt: skip
    (tmp_path / "pairs" / "html" / "m").mkdir(parents=True)
    (tmp_path / "pairs" / "html" / "m" / "m.html").write_text(
        "<html><body><h2>1.1 What is COM?</h2><p>COM is Microsoft's Common Object Model. It "
        "provides a set of programming conventions as well as system support for packaging C++ "
        "objects as executable components</p><h2>1.2 Elsewhere</h2><p>A passage of words that "
        "the manual in the PDF does not hold anywhere at all</p></body></html>"
    )
    pair_questions(str(tmp_path / "pairs"), str(tmp_path / "out"))
    with open(tmp_path / "out" / "pdf.jsonl", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    assert [r["question"] for r in records] == ["What does the manual say about What is COM?"]
    assert records[0]["answers"][0]["source"] == "m/m.pdf"
