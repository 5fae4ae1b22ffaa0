"""Check that every answer of a question file is an exact passage of the document it names.

    python -m eval.verify_answers QUESTIONS.jsonl [...] --root FOLDER

A document's text is its visible text, taken independently of the job's extraction: an HTML
page's text content (lxml, scripts and styles dropped), any other file as it is. Answer and
document are compared after whitespace normalisation (every run of whitespace is one space),
nothing else: an answer that is not a verbatim passage fails. A PDF has no such text: its
answers (passages of the same manual's HTML) are checked in the text PDFium gives of it,
without the job's layout reading (`eval.make_questions.pdf_reference_text`), by the rule that
finds a chunk relevant: half the answer's word 4-shingles or more (`pdf_holds`). A record's
"split" must be the half its id hashes to (`eval.make_questions.split_of`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from functools import cache

from commands.relevance import Passage
from eval.make_questions import pdf_holds, pdf_reference_text, split_of

_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def visible_text(path: str) -> str:
    """The text a reader sees in `path`: an HTML page's text content, else the file itself."""
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith((".html", ".htm")):
        import lxml.html

        tree = lxml.html.fromstring(data)
        for node in tree.xpath("//script|//style"):
            node.drop_tree()
        return tree.text_content()
    return data.decode("utf-8")


@cache
def _document(path: str) -> str:
    return normalise(visible_text(path))


@cache
def _pdf_reference(path: str) -> Passage:
    with open(path, "rb") as f:
        return Passage.of(pdf_reference_text(f.read()))


def check(question_files: Sequence[str], root: str) -> list[str]:
    """Problems found (empty when every answer is a passage of its document)."""
    problems = []
    for question_file in question_files:
        with open(question_file, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                record = json.loads(line)
                if "split" in record and record["split"] != split_of(record["id"]):
                    problems.append(
                        f"{question_file}:{number} ({record['id']}): split {record['split']!r}, "
                        f"its id hashes to {split_of(record['id'])!r}"
                    )
                where = f"{question_file}:{number} ({record['id']}) "
                problems += [where + p for p in answer_problems(record, root)]
    return problems


def answer_problems(record: dict, root: str) -> list[str]:
    """What is wrong with the answers of one question record (empty when each is a passage
    of its document under `root`; a PDF's answer by its words in the extracted text)."""
    problems = []
    for i, answer in enumerate(record["answers"]):
        path = os.path.join(root, answer["source"])
        if not os.path.isfile(path):
            problems.append(f"answers[{i}]: no document {path}")
        elif path.endswith(".pdf"):
            if not pdf_holds(_pdf_reference(path), answer["text"]):
                problems.append(f"answers[{i}]: its words are not in {answer['source']}")
        elif normalise(answer["text"]) not in _document(path):
            problems.append(f"answers[{i}]: not a passage of {answer['source']}")
    return problems


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("questions", nargs="+", help="question files (JSONL)")
    parser.add_argument("--root", required=True, help="folder the answer sources are under")
    args = parser.parse_args(argv)
    problems = check(args.questions, args.root)
    for problem in problems:
        print(problem, file=sys.stderr)
    total = 0
    for question_file in args.questions:
        with open(question_file, encoding="utf-8") as f:
            total += sum(len(json.loads(line)["answers"]) for line in f if line.strip())
    print(f"{total - len(problems)} of {total} answers are passages of their documents")
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
