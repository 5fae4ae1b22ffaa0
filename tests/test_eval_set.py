"""The development set: fixed halves, questions that do not name their corpus, neutral folders,
header ablation parts, and the trec_eval metrics against a plain reference."""

from __future__ import annotations

import glob
import json
import math
import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commands.evaluate import score_ranking
from eval.header_ablation import ablated_header, header_parts
from eval.make_questions import one_per_question, split_of, unnamed_sqlite
from eval.neutral import neutral_corpus, neutral_names, neutral_questions

HERE = os.path.dirname(os.path.abspath(__file__))
QUESTIONS = sorted(glob.glob(os.path.join(HERE, "..", "eval", "questions", "*.jsonl")))
PAIRS = {
    form: os.path.join(HERE, "..", "eval", "questions", "pairs", f"{form}.jsonl")
    for form in ("pdf", "html")
}
with open(os.path.join(HERE, "..", "eval", "corpora.json"), encoding="utf-8") as f:
    LOCK = json.load(f)
CORPORA = [p["corpus"] for p in LOCK["packages"] + LOCK["pdf_pairs"]]
# the corpus folders, and the products' names as a reader would write them
PRODUCT = re.compile(
    r"\b(" + "|".join([*CORPORA, "postgres", "node\\.js", "attr", "json", "caml", "gfem"])
    + r")\b", re.I
)  # fmt: skip


def _records(paths: list[str] = QUESTIONS) -> list[dict]:
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


def test_every_question_sits_in_the_half_its_id_hashes_to() -> None:
    records = _records()
    assert len(records) >= 400
    for record in records:
        assert record["split"] == split_of(record["id"]), record["id"]
    for corpus in {r["corpus"] for r in records}:
        halves = {r["split"] for r in records if r["corpus"] == corpus}
        assert halves == {"tune", "confirm"}, corpus


def test_a_question_is_asked_once_a_corpus_with_every_page_that_answers_it() -> None:
    asked = [(r["corpus"], r["question"]) for r in _records()]
    assert len(asked) == len(set(asked))
    (roles,) = [r for r in _records() if r["question"] == "How do I define a new database role?"]
    assert roles["id"] == "pg-CREATE GROUP"
    assert [a["source"] for a in roles["answers"]] == [
        "postgresql/sql-creategroup.html",
        "postgresql/sql-createrole.html",
        "postgresql/sql-createuser.html",
    ]


def test_one_per_question_keeps_the_first_record_with_all_answers() -> None:
    def record(qid: str, corpus: str, question: str) -> dict:
        return {"id": qid, "question": question, "corpus": corpus,
                "answers": [{"text": qid, "source": f"{corpus}/{qid}.html"}]}  # fmt: skip

    asked = [("a", "pg", "Q?"), ("b", "pg", "R?"), ("c", "pg", "Q?"), ("d", "node", "Q?")]
    merged = one_per_question([record(*a) for a in asked])
    assert [r["id"] for r in merged] == ["a", "b", "d"]
    assert [a["text"] for a in merged[0]["answers"]] == ["a", "c"]
    assert [a["text"] for a in merged[2]["answers"]] == ["d"]


def test_pdf_pair_questions_are_the_same_in_both_forms() -> None:
    pdf, html = _records([PAIRS["pdf"]]), _records([PAIRS["html"]])
    assert len(pdf) >= 50
    for p, h in zip(pdf, html, strict=True):
        assert (p["id"], p["question"], p["split"]) == (h["id"], h["question"], h["split"])
        assert p["split"] == split_of(p["id"])
        assert p["answers"][0]["text"] == h["answers"][0]["text"]
        assert p["answers"][0]["source"].endswith(".pdf") and p["corpus"].endswith("-pdf")
        assert not PRODUCT.search(p["question"]), p["question"]
    for corpus in {r["corpus"] for r in pdf}:
        assert {r["split"] for r in pdf if r["corpus"] == corpus} == {"tune", "confirm"}


def test_pdf_pair_passages_stop_at_the_next_heading(tmp_path) -> None:
    from eval.make_questions import section_passages

    page = tmp_path / "p.html"
    page.write_text(
        "<html><body><h2>3.1 Base types</h2><p>The base types are <tt>int</tt> and "
        "long.</p>tail text<h3>3.1.1 Pointers</h3><p>A pointer points.</p></body></html>"
    )
    assert section_passages(str(page)) == [
        ("Base types", "The base types are int and long.tail text"),
        ("Pointers", "A pointer points."),
    ]


def test_split_of_is_a_fixed_function_of_the_id() -> None:
    assert split_of("pg-VACUUM") == split_of("pg-VACUUM")
    halves = [split_of(f"q{i}") for i in range(1000)]
    assert 400 < halves.count("tune") < 600


# An API's qualified name may hold such a word (requests' `models.Response.json()`): it names
# the API, which a question may, not a product.
API_NAME = re.compile(r"\b\w+(?:\.\w+)+\(\)")


def test_no_question_names_its_corpus_or_product() -> None:
    named = [r["question"] for r in _records() if PRODUCT.search(API_NAME.sub("", r["question"]))]
    assert named == []
    assert PRODUCT.search(API_NAME.sub("", "What does json() do in requests?"))


def test_definition_corpora_are_in_the_set() -> None:
    corpora = {r["corpus"] for r in _records()}
    assert {"click", "attrs", "junit", "jsoncpp"} <= corpora


def test_sqlite_headings_lose_the_product_name() -> None:
    assert unnamed_sqlite("Is SQLite threadsafe?") == "Is the database engine threadsafe?"
    assert (
        unnamed_sqlite("How do I list all tables/indices contained in an SQLite database")
        == "How do I list all tables/indices contained in a database"
    )
    assert unnamed_sqlite("What is an SQLITE_SCHEMA error?") == "What is an SQLITE_SCHEMA error?"
    assert unnamed_sqlite("SQLite lets me insert").startswith("The database engine lets")


def test_neutral_corpus_renames_folders_and_question_sources(tmp_path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "postgresql").mkdir(parents=True)
    (corpus / "sqlite").mkdir()
    (corpus / "postgresql" / "sql-vacuum.html").write_text("<p>vacuum</p>")
    (corpus / "sqlite" / "faq.html").write_text("<p>faq</p>")
    names = neutral_names(["postgresql", "sqlite"])
    assert names == {"postgresql": "c1", "sqlite": "c2"}
    neutral_corpus(str(corpus), str(tmp_path / "neutral"), names)
    assert (tmp_path / "neutral" / "c1" / "sql-vacuum.html").read_text() == "<p>vacuum</p>"
    questions = tmp_path / "q.jsonl"
    record = {"id": "a", "question": "?", "answers": [{"text": "t", "source": "sqlite/faq.html"}]}
    questions.write_text(json.dumps(record) + "\n")
    neutral_questions(str(questions), str(tmp_path / "qn.jsonl"), names)
    renamed = json.loads((tmp_path / "qn.jsonl").read_text())
    assert renamed["answers"][0]["source"] == "c2/faq.html" and renamed["id"] == "a"
    with pytest.raises(ValueError, match="no neutral name"):
        neutral_corpus(str(corpus), str(tmp_path / "n2"), {"postgresql": "c1"})


def test_ablated_headers_keep_only_the_parts_named() -> None:
    parts = header_parts("/x/c1/sql-vacuum.html", "html", "VACUUM", ["VACUUM", "Description"])
    assert parts == {
        "folder": "c1",
        "file": "sql-vacuum.html",
        "title": "VACUUM",
        "sections": ["Description"],
        "term": [],
    }
    everything = {"folder", "file", "title", "sections", "term"}
    assert ablated_header(parts, everything) == "c1/sql-vacuum.html > VACUUM > Description"
    assert ablated_header(parts, {"file", "sections"}) == "sql-vacuum.html > Description"
    assert ablated_header(parts, {"title", "sections"}) == "VACUUM > Description"
    assert ablated_header(parts, set()) == ""
    code = header_parts("/r/c4/requests/utils.py", "code", None, ["super_len"])
    assert ablated_header(code, everything) == "c4/requests/utils.py > super_len"
    assert ablated_header(code, {"file", "sections"}) == "utils.py > super_len"
    # a definition's term: the entries at the end of the path that name a definition
    api = header_parts("/x/c5/api.html", "html", "API", ["API", "Context", "class Context(c)",
                       "invoke(f)"], frozenset({"class Context(c)", "invoke(f)"}))  # fmt: skip
    # (named without their parameter lists, as path_header names them)
    assert api["sections"] == ["Context"] and api["term"] == ["class Context(…)", "invoke(…)"]
    assert (
        ablated_header(api, everything)
        == "c5/api.html > API > Context > class Context(…) > invoke(…)"
    )
    assert ablated_header(api, everything - {"term"}) == "c5/api.html > API > Context"
    assert ablated_header(api, everything - {"sections"}) == (
        "c5/api.html > API > class Context(…) > invoke(…)"
    )


# --- the metrics: ir-measures (trec_eval) against the definitions written out by hand ---------


def _reference(ranked: list[frozenset[int]], n_answers: int, ks=(1, 5, 10)) -> dict:
    out = {}
    for k in ks:
        covered = set().union(*ranked[:k]) if ranked[:k] else set()
        out[f"recall@{k}"] = len(covered) / n_answers
    first = next((i for i, rel in enumerate(ranked[:10]) if rel), None)
    out["mrr@10"] = 0.0 if first is None else 1.0 / (first + 1)
    dcg, seen = 0.0, set()
    for i, rel in enumerate(ranked[:10]):
        dcg += len(rel - seen) / math.log2(i + 2)
        seen |= rel
    out["ndcg@10"] = dcg / sum(1.0 / math.log2(i + 2) for i in range(min(10, n_answers)))
    return out


@st.composite
def _rankings(draw) -> tuple[list[frozenset[int]], int]:
    n_answers = draw(st.integers(1, 3))
    ranked = draw(
        st.lists(st.frozensets(st.integers(0, n_answers - 1), max_size=n_answers), max_size=15)
    )
    return ranked, n_answers


@given(_rankings())
def test_trec_eval_metrics_equal_the_definitions(case) -> None:
    ranked, n_answers = case
    if any(len(rel - set().union(*ranked[:i])) > 1 for i, rel in enumerate(ranked)):
        return  # the one documented difference, covered below
    assert score_ranking(ranked, n_answers) == pytest.approx(_reference(ranked, n_answers))


def test_a_result_first_covering_two_answers_counts_as_two_consecutive_ranks() -> None:
    # (every question of the development set has one answer, so this never arises there)
    both = score_ranking([frozenset({0, 1})], n_answers=2)
    assert both["recall@1"] == 0.5 and both["recall@5"] == 1 and both["mrr@10"] == 1
    assert both["ndcg@10"] == pytest.approx(1.0)


def test_verify_answers_refuses_a_question_moved_to_the_other_half(tmp_path) -> None:
    from eval.verify_answers import check

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.md").write_text("the answer is here")
    other = {"tune": "confirm", "confirm": "tune"}[split_of("x")]
    record = {"id": "x", "question": "?", "split": other,
              "answers": [{"text": "answer is", "source": "c/a.md"}]}  # fmt: skip
    (tmp_path / "q.jsonl").write_text(json.dumps(record) + "\n")
    problems = check([str(tmp_path / "q.jsonl")], str(tmp_path))
    assert len(problems) == 1 and "hashes to" in problems[0]
    record["split"] = split_of("x")
    (tmp_path / "q.jsonl").write_text(json.dumps(record) + "\n")
    assert check([str(tmp_path / "q.jsonl")], str(tmp_path)) == []


def test_chunk_structure_counts_a_heading_at_the_end_and_a_piece_without_its_term():
    from eval.chunk_structure import chunk_structure

    text = "# A\n\nIntro.\n\n## B\n\n### C\n\n- *class* Widget(x)\n: A widget.\n  More.\n"
    b, widget, more = text.index("## B"), text.index("- *class*"), text.index("  More.")
    # the first chunk ends with "## B", which heads "### C"; the last starts inside the
    # definition of Widget without naming it
    chunks = [
        (0, b + len("## B"), ("A",)),
        (b + 6, more, ("A", "B", "C", "class Widget(x)")),
        (more, len(text), ("A", "B", "C")),
    ]
    found = chunk_structure(text, chunks)
    assert (found.chunks, found.heading_at_end, found.piece_without_term) == (3, 1, 1)
    named = [*chunks[:2], (more, len(text), ("A", "B", "C", "class Widget(x)"))]
    assert chunk_structure(text, named).piece_without_term == 0
    assert widget < more


def test_chunk_structure_counts_a_heading_of_its_own_text_at_the_end():
    from eval.chunk_structure import chunk_structure

    text = "# A\n\nIntro.\n\n## B\n\nText of B.\n\n## C\n\n## D\n"
    b, c = text.index("## B"), text.index("## C")
    # "## B" heads the paragraph after it, which begins the next chunk; "## C" heads nothing
    # (a sibling heading alone follows it)
    ends_with_b = [(0, b + len("## B"), ("A",)), (b + 6, len(text), ("A", "B"))]
    assert chunk_structure(text, ends_with_b).heading_at_end == 1
    ends_with_c = [(0, c + len("## C"), ("A",)), (c + 6, len(text), ("A", "D"))]
    assert chunk_structure(text, ends_with_c).heading_at_end == 0


def test_chunk_structure_counts_a_lead_in_at_the_end():
    from eval.chunk_structure import chunk_structure, introduces

    text = (
        "# A\n\nText.\n\nFor example:\n\n```\ncode\n```\n\n## B\n\nThe options are:\n\n"
        "- `-v`\n: Verbose.\n\nLast words:\n\n## C\n\nEnd.\n"
    )
    example, options = text.index("For example:"), text.index("The options are:")
    # a lead-in before a block of its section, and one before the definitions below it; not
    # one before a heading (it introduces no block of its own section)
    assert introduces(text) == {example + len("For example:"), options + len("The options are:")}
    code = text.index("```")
    ends_with_it = [(0, code, ("A",)), (code, options - 1, ("A",)), (options, len(text), ("B",))]
    assert chunk_structure(text, ends_with_it).lead_in_at_end == 1
    goes_on = [(0, example, ("A",)), (example, options - 1, ("A",)), (options, len(text), ("B",))]
    assert chunk_structure(text, goes_on).lead_in_at_end == 0


def test_chunk_structure_counts_a_term_at_the_end():
    from eval.chunk_structure import chunk_structure

    text = "# A\n\n- `name`\n  `--long-name`\n: What it does.\n"
    body = text.index(": What")
    # the first chunk ends inside the term lines, or at their end: its description is next
    for cut in (text.index("  `--long"), body - 1):
        chunks = [(0, cut, ("A",)), (cut, len(text), ("A", "name"))]
        assert chunk_structure(text, chunks).term_at_end == 1
    assert chunk_structure(text, [(0, len(text), ("A",))]).term_at_end == 0
