"""Derive the development question sets from the documents' own structure (never from chunks).

    python -m eval.make_questions [--corpus .cache/eval/corpus] [--out eval/questions]

Every question comes from a structure the document itself has, and every answer is a passage
copied from the document (checked by `eval.verify_answers`):

- postgresql: a SQL reference page's purpose line (`VACUUM — garbage-collect and optionally
  analyze a database`) becomes "How do I garbage-collect and optionally analyze a database?";
  the answer is the first paragraph of the page's Description section.
- sqlite: each question heading of SQLite's FAQ; the answer is the start of its answer block
  (up to 60 words).
- nodejs: each API method heading of a Node.js Markdown page (`` ## `path.join([...paths])` ``)
  becomes "What does path.join() do in Node.js?"; the answer is the first prose paragraph under
  the heading (after the YAML comment, parameter list and stability note).
- code: each public function or method of the requests library with a docstring becomes "What
  does requests.utils.get_netrc_auth() do?" with the docstring's first paragraph as answer;
  some become "Where is X implemented?" with the whole function as answer.

Selection is deterministic (sorted files, a fixed random seed): the same packages give the
same files.
"""

from __future__ import annotations

import argparse
import ast
import glob
import inspect
import json
import os
import random
import re
from collections.abc import Iterator
from typing import Any

SEED = 11
WORDS_MIN = 8
SQLITE_ANSWER_WORDS = 60


def _norm(text: str) -> str:
    return " ".join(text.split())


def _record(qid: str, question: str, text: str, source: str, corpus: str, doc_type: str) -> dict:
    return {
        "id": qid,
        "question": question,
        "answers": [{"text": text, "source": source}],
        "corpus": corpus,
        "doc_type": doc_type,
    }


def _html(path: str) -> Any:
    import lxml.html

    with open(path, "rb") as f:
        tree = lxml.html.fromstring(f.read())
    for node in tree.xpath("//script|//style"):
        node.drop_tree()
    return tree


# --- PostgreSQL: purpose line -> question, Description's first paragraph -> answer ------------


def postgresql(root: str, n: int) -> list[dict]:
    candidates = []
    for path in sorted(glob.glob(os.path.join(root, "postgresql", "sql-*.html"))):
        tree = _html(path)
        purpose = tree.xpath("//div[@class='refnamediv']/p")
        if not purpose:
            continue
        name, _, what = _norm(purpose[0].text_content()).partition(" — ")
        paragraphs = tree.xpath("//div[@class='refsect1'][h2[normalize-space()='Description']]/p")
        # The first paragraph, and the next ones while it is shorter than WORDS_MIN words
        # ("CALL executes a procedure."): consecutive, so still one passage of the page.
        answer = ""
        for p in paragraphs:
            answer = _norm(answer + " " + p.text_content())
            if len(answer.split()) >= WORDS_MIN:
                break
        if what and answer:
            source = os.path.relpath(path, root)
            question = f"How do I {what} in PostgreSQL?"
            candidates.append(_record(f"pg-{name}", question, answer, source, "postgresql", "html"))
    random.Random(SEED).shuffle(candidates)
    return sorted(candidates[:n], key=lambda r: r["id"])


# --- SQLite FAQ: the question headings ---------------------------------------------------------


def sqlite(root: str) -> list[dict]:
    path = os.path.join(root, "sqlite", "faq.html")
    tree = _html(path)
    out = []
    for bold in tree.xpath("//p/b"):
        match = re.match(r"\((\d+)\)\s*(.+)", _norm(bold.text_content()))
        block = bold.getparent().getnext()
        if not match or block is None or block.tag != "blockquote":
            continue
        words = _norm(block.text_content()).split()[:SQLITE_ANSWER_WORDS]
        source = os.path.relpath(path, root)
        qid = f"sqlite-faq-{int(match.group(1)):02d}"
        out.append(_record(qid, match.group(2), " ".join(words), source, "sqlite", "html"))
    return out


# --- Node.js: API method headings --------------------------------------------------------------

_METHOD = re.compile(r"^#{2,4} `(?:new )?([\w.$]+)\((.*)\)`\s*$")


def _first_paragraph(lines: list[str], start: int) -> str | None:
    i, in_comment, in_fence = start, False, False
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("#"):
            return None
        if in_comment:
            in_comment = "-->" not in line
        elif in_fence:
            in_fence = not line.startswith("```")
        elif line.startswith("<!--"):
            in_comment = "-->" not in line
        elif line.startswith("```"):
            in_fence = True
        elif line and not line.startswith(("*", "-", ">", "|", "[")):
            paragraph = []
            while i < len(lines) and lines[i].strip() and not lines[i].startswith(("```", "#")):
                paragraph.append(lines[i].strip())
                i += 1
            text = " ".join(paragraph)
            return text if len(text.split()) >= WORDS_MIN else None
        i += 1
    return None


def nodejs(root: str, per_module: int) -> list[dict]:
    out = []
    rng = random.Random(SEED)
    for path in sorted(glob.glob(os.path.join(root, "nodejs", "*.md"))):
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        found = {}
        for i, line in enumerate(lines):
            match = _METHOD.match(line)
            if match and match.group(1) not in found:
                answer = _first_paragraph(lines, i + 1)
                if answer:
                    found[match.group(1)] = answer
        names = sorted(found)
        rng.shuffle(names)
        source = os.path.relpath(path, root)
        for name in sorted(names[:per_module]):
            question = f"What does {name}() do in Node.js?"
            out.append(_record(f"node-{name}", question, found[name], source, "nodejs", "markdown"))
    return out


# --- code: docstrings of the requests library ------------------------------------------------


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef]]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield f"{node.name}.{item.name}", item


def code(root: str, n_docstring: int, n_where: int) -> list[dict]:
    docstring, where = [], []
    for path in sorted(glob.glob(os.path.join(root, "requests", "*.py"))):
        with open(path, encoding="utf-8") as f:
            source_text = f.read()
        module = "requests" + (
            "" if path.endswith("__init__.py") else "." + os.path.basename(path)[:-3]
        )
        source = os.path.relpath(path, root)
        for qualname, node in _functions(ast.parse(source_text)):
            if node.name.startswith("_"):
                continue
            doc = ast.get_docstring(node)
            summary = _norm(inspect.cleandoc(doc).split("\n\n")[0]) if doc else ""
            if len(summary.split()) >= 6 and summary in _norm(source_text):
                question = f"What does {module}.{qualname}() do?"
                qid = f"code-doc-{module}.{qualname}"
                docstring.append(_record(qid, question, summary, source, "code", "code"))
            body = ast.get_source_segment(source_text, node)
            if body and 5 <= body.count("\n") <= 60:
                question = f"Where is {module}.{qualname}() implemented?"
                qid = f"code-where-{module}.{qualname}"
                where.append(_record(qid, question, body, source, "code", "code"))
    rng = random.Random(SEED)
    rng.shuffle(docstring)
    picked = docstring[:n_docstring]
    taken = {r["id"].removeprefix("code-doc-") for r in picked}
    rest = [r for r in where if r["id"].removeprefix("code-where-") not in taken]
    rng.shuffle(rest)
    return sorted(picked + rest[:n_where], key=lambda r: r["id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=".cache/eval/corpus", help="the unpacked corpora")
    parser.add_argument("--out", default="eval/questions", help="folder of the question files")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sets = {
        "postgresql": postgresql(args.corpus, 60),
        "sqlite_faq": sqlite(args.corpus),
        "nodejs": nodejs(args.corpus, 7),
        "code": code(args.corpus, 30, 15),
    }
    for name, records in sets.items():
        with open(os.path.join(args.out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        print(f"{name}: {len(records)} questions")


if __name__ == "__main__":
    main()
