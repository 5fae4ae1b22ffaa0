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

A question a rule yields for several documents (PostgreSQL's aliases share a purpose line) is
asked once, with each document's answer (`one_per_question`).

Every candidate a rule yields is asked (since 2026-12-05; the sets were seeded samples of up
to 60 a corpus before, and those questions are still there with the same ids and halves): on 16
to 34 confirm questions a corpus, one or two questions decided a per-corpus comparison.
Selection is deterministic (sorted files; `n` takes a seeded sample, as before): the same
packages give the same files.
"""

from __future__ import annotations

import argparse
import ast
import glob
import hashlib
import inspect
import json
import os
import random
import re
from collections.abc import Iterator
from typing import Any

from commands.relevance import THRESHOLD, Passage

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


def postgresql(root: str, n: int | None = None) -> list[dict]:
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
            question = f"How do I {what}?"
            candidates.append(_record(f"pg-{name}", question, answer, source, "postgresql", "html"))
    return _sample(candidates, n)


# --- SQLite FAQ: the question headings ---------------------------------------------------------


# The FAQ's headings name the product in 16 of 27 ("Is SQLite threadsafe?"); the question keeps
# the heading's words but the product: an error code's name (SQLITE_SCHEMA) is an API name.
_SQLITE_NAMES = (
    (re.compile(r"\ban SQLite database"), "a database"),
    (re.compile(r"\bSQLite (databases?)"), r"\1"),
    (re.compile(r" in SQLite\b"), ""),
    (re.compile(r"\bSQLite\b"), "the database engine"),
)


def unnamed_sqlite(heading: str) -> str:
    """An FAQ heading without the product's name ("Is the database engine threadsafe?")."""
    for pattern, replacement in _SQLITE_NAMES:
        heading = pattern.sub(replacement, heading)
    return heading[:1].upper() + heading[1:]


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
        question = unnamed_sqlite(match.group(2))
        out.append(_record(qid, question, " ".join(words), source, "sqlite", "html"))
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


def nodejs(root: str, per_module: int | None = None) -> list[dict]:
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
            question = f"What does {name}() do?"
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


def _code_id(module: str) -> str:
    """The id prefix of the earlier files ("requests.utils."), kept so ids (and splits) stay."""
    return "requests." + module


def code(root: str, n_docstring: int | None = None, n_where: int | None = None) -> list[dict]:
    """Every public function's docstring question and every "where" question, or a seeded
    sample of each (the where questions then skip the functions already asked about)."""
    docstring, where = [], []
    for path in sorted(glob.glob(os.path.join(root, "requests", "*.py"))):
        with open(path, encoding="utf-8") as f:
            source_text = f.read()
        # the module without the package's name: the question names the API, not the product
        module = "" if path.endswith("__init__.py") else os.path.basename(path)[:-3] + "."
        source = os.path.relpath(path, root)
        for qualname, node in _functions(ast.parse(source_text)):
            if node.name.startswith("_"):
                continue
            doc = ast.get_docstring(node)
            summary = _norm(inspect.cleandoc(doc).split("\n\n")[0]) if doc else ""
            if len(summary.split()) >= 6 and summary in _norm(source_text):
                question = f"What does {module}{qualname}() do?"
                qid = f"code-doc-{_code_id(module)}{qualname}"
                docstring.append(_record(qid, question, summary, source, "code", "code"))
            body = ast.get_source_segment(source_text, node)
            if body and 5 <= body.count("\n") <= 60:
                question = f"Where is {module}{qualname}() implemented?"
                qid = f"code-where-{_code_id(module)}{qualname}"
                where.append(_record(qid, question, body, source, "code", "code"))
    if n_docstring is None and n_where is None:
        return sorted(docstring + where, key=lambda r: r["id"])
    rng = random.Random(SEED)
    rng.shuffle(docstring)
    picked = docstring[:n_docstring]
    taken = {r["id"].removeprefix("code-doc-") for r in picked}
    rest = [r for r in where if r["id"].removeprefix("code-where-") not in taken]
    rng.shuffle(rest)
    return sorted(picked + rest[:n_where], key=lambda r: r["id"])


# --- API definitions: Sphinx, Javadoc and Doxygen pages ----------------------------------------
# Each question asks about one definition of an API reference (a Sphinx `dt`, a Javadoc member
# detail, a Doxygen member) by the API's name without the package or namespace that would
# name the product; its answer is the start of the definition's description.


def _paragraphs_from(first: Any) -> str:
    """`first`'s text, and the next sibling paragraphs' while under WORDS_MIN words: one
    contiguous passage of the page."""
    text, node = _norm(first.text_content()), first.getnext()
    while len(text.split()) < WORDS_MIN and node is not None and node.tag == "p":
        text = _norm(text + " " + node.text_content())
        node = node.getnext()
    return text


def _words(text: str, n: int) -> str:
    return " ".join(text.split()[:n])


_SPHINX_CALLABLE = {"function", "method", "classmethod", "staticmethod", "decorator"}
_SPHINX_CLASS = {"class", "exception"}
_SPHINX_VALUE = {"attribute", "data", "property"}


def _definition_question(name: str, kind: str) -> str:
    if kind == "callable":
        return f"What does {name}() do?"
    if kind == "class":
        return f"What is the {name} class for?"
    return f"What is {name}?"


def _sample(candidates: list[dict], n: int | None) -> list[dict]:
    """A seeded sample of `n` (the first `n` of one shuffle, so a larger `n` keeps a smaller
    one's questions), or every candidate when `n` is None."""
    random.Random(SEED).shuffle(candidates)
    return sorted(candidates[:n], key=lambda r: r["id"])


def sphinx(root: str, corpus: str, n: int | None = None) -> list[dict]:
    """Sphinx's Python domain: `<dl class="py function">` and friends. The name is the `dt`'s
    id less its first (module) component: `click.Context.invoke` asks about Context.invoke."""
    candidates, seen = [], set()
    for path in sorted(glob.glob(os.path.join(root, corpus, "*.html"))):
        tree = _html(path)
        definitions = tree.xpath('//dl[contains(concat(" ", @class, " "), " py ")]')
        # the package's modules: every first component of an id (attrs has attr and attrs,
        # and ids like attr.attrs.frozen); stripped while they lead a name
        roots = {dt.get("id").split(".")[0] for dt in tree.xpath("//dl/dt[@id]")}
        for dl in definitions:
            classes = set((dl.get("class") or "").split())
            kind = (
                "callable"
                if classes & _SPHINX_CALLABLE
                else "class"
                if classes & _SPHINX_CLASS
                else "value"
                if classes & _SPHINX_VALUE
                else None
            )
            dt, dd = dl.find("dt"), dl.find("dd")
            if kind is None or dt is None or dd is None or "." not in (dt.get("id") or ""):
                continue
            components = dt.get("id").split(".")
            while len(components) > 1 and components[0] in roots:
                components = components[1:]
            name = ".".join(components)
            first = next((c for c in dd if c.tag == "p"), None)
            if first is None or name in seen:
                continue
            answer = _paragraphs_from(first)
            if len(answer.split()) < WORDS_MIN:
                continue
            seen.add(name)
            source = os.path.relpath(path, root)
            question = _definition_question(name, kind)
            candidates.append(_record(f"{corpus}-{name}", question, answer, source, corpus, "html"))
    return _sample(candidates, n)


def javadoc(root: str, corpus: str, n: int | None = None) -> list[dict]:
    """Javadoc's member details (`<li class="blockList">` with an `h4` name, a `pre` signature
    and a `div.block` description), named Class.member; constructors are left out."""
    candidates, seen = [], set()
    for path in sorted(glob.glob(os.path.join(root, corpus, "*.html"))):
        owner = os.path.basename(path).removesuffix(".html")  # Timeout.Builder
        tree = _html(path)
        for li in tree.xpath('//li[@class="blockList"][h4][pre]'):
            member = _norm(li.findtext("h4") or "")
            block = li.xpath('./div[@class="block"]')
            name = f"{owner}.{member}"
            if not member or member == owner.rsplit(".", 1)[-1] or not block or name in seen:
                continue
            answer = _words(_norm(block[0].text_content()), SQLITE_ANSWER_WORDS)
            if len(answer.split()) < WORDS_MIN:
                continue
            seen.add(name)
            signature = _norm(li.find("pre").text_content())
            kind = "callable" if "(" in signature else "value"
            source = os.path.relpath(path, root)
            question = _definition_question(name, kind)
            candidates.append(_record(f"{corpus}-{name}", question, answer, source, corpus, "html"))
    return _sample(candidates, n)


# A member's name as a question can say it: a macro's or a declspec's "name" is none.
_CPP_NAME = re.compile(r"^(?!__declspec)[A-Za-z_][\w:]*(operator(\W{1,3}| \w+))?$")


def doxygen(root: str, corpus: str, n: int | None = None) -> list[dict]:
    """Doxygen's member documentation (`div.memitem`: `memproto` and `memdoc`), named by the
    prototype's qualified name less its namespace (`Json::Value::isMember` -> Value::isMember);
    the answer is the description's first paragraph (not the "Definition at line" one)."""
    candidates, seen = [], set()
    for path in sorted(glob.glob(os.path.join(root, corpus, "*.html"))):
        tree = _html(path)
        for item in tree.xpath('//div[@class="memitem"]'):
            cell = item.xpath('.//td[@class="memname"]')
            # "const Int Json::Value::maxInt = Int(maxUInt / 2)": the name before any initializer
            declared = _norm(cell[0].text_content()).split("=")[0].split() if cell else []
            qualified = declared[-1] if declared else ""
            if len(declared) > 1 and declared[-2].endswith("::operator"):  # operator bool
                qualified = f"{declared[-2]} {qualified}"
            parts = qualified.split("::")
            name = "::".join(parts[1:]) if len(parts) > 1 else qualified
            first = next(
                (
                    p
                    for p in item.xpath('./div[@class="memdoc"]/p')
                    if "definition" not in (p.get("class") or "")
                ),
                None,
            )
            if not _CPP_NAME.match(name) or first is None or name in seen:
                continue
            answer = _paragraphs_from(first)
            if len(answer.split()) < WORDS_MIN:
                continue
            seen.add(name)
            proto = item.xpath('./div[@class="memproto"]')[0]
            kind = "callable" if proto.xpath('.//td[normalize-space()="("]') else "value"
            source = os.path.relpath(path, root)
            question = _definition_question(name, kind)
            candidates.append(_record(f"{corpus}-{name}", question, answer, source, corpus, "html"))
    return _sample(candidates, n)


# --- PDF/HTML pairs: a manual's sections, asked of its HTML and of its PDF -------------------

PAIR_ANSWER_WORDS = 40
_PRODUCT_WORDS = re.compile(r"(?i)caml|idl\b|freefem|gfem")
_LETTER = re.compile(r"[^\W\d_]")
_HEADING_NUMBER = re.compile(r"^([Cc]hapter\s+)?(\d+(\.\d+)*|[A-Z](\.\d+)+)\.?\s+")


def _words_key(text: str) -> str:
    """A heading or passage as its lower-cased runs of letters and digits (question ids)."""
    return " ".join(re.findall(r"\w+", text.lower()))


def pdf_reference_text(data: bytes) -> str:
    """A PDF's text as PDFium gives it, page after page, with none of the job's layout
    reading: what a pair's answers are looked for in. The question set must not depend on the
    extraction it measures: filtered on the job's own text, a passage the job garbles would
    drop out of the questions instead of counting as a miss (and the set moved with every
    change to `transforms.ingest.layout`)."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(data)
    try:
        pages = []
        for page in document:
            text_page = page.get_textpage()
            pages.append(text_page.get_text_bounded())
            text_page.close()
            page.close()
        return "\n".join(pages)
    finally:
        document.close()


def pdf_holds(reference: Passage, answer: str) -> bool:
    """Whether a PDF whose reference text is `reference` holds the passage `answer`: half its
    word 4-shingles or more are in it, the rule by which a chunk is found relevant to an answer
    (`commands.relevance`), so that running heads, page breaks and hyphenation inside a
    passage do not lose it."""
    passage = Passage.of(answer)
    if not passage.shingles:
        return f" {' '.join(passage.words)} " in reference.joined
    return len(passage.shingles & reference.shingles) >= THRESHOLD * len(passage.shingles)


def section_passages(path: str) -> list[tuple[str, str]]:
    """(heading, passage) of each h1-h5 of a HeVeA page: the heading less its number, and the
    first PAIR_ANSWER_WORDS words of the page's visible text after it, up to the next heading."""
    tree = _html(path)
    headings = tree.xpath("//h1|//h2|//h3|//h4|//h5")
    marks = []
    for n, h in enumerate(headings):
        mark = f"\ue000{n}\ue000"
        marks.append((mark, _norm(h.text_content())))
        h.tail = mark + (h.tail or "")
    text = tree.text_content()
    out = []
    for n, (mark, heading) in enumerate(marks):
        after = text.split(mark, 1)[1]
        after = re.split("\ue000\\d+\ue000", after, maxsplit=1)[0]
        words = _norm(after).split()
        # the heading of the next block is in `after` too when it came first: cut at it
        if n + 1 < len(marks) and marks[n + 1][1] and marks[n + 1][1] in " ".join(words):
            words = " ".join(words).split(marks[n + 1][1])[0].split()
        out.append((_HEADING_NUMBER.sub("", heading), " ".join(words[:PAIR_ANSWER_WORDS])))
    return out


def pdf_pair(
    pairs: str, corpus: str, pdf_text: str, product: re.Pattern[str] = _PRODUCT_WORDS
) -> tuple[list[dict], list[dict]]:
    """Questions on a manual's sections, once with the HTML page as the answer's source and
    once with the PDF (the same id, so the same half): "What does the manual say about
    Lexical conventions?". Kept when the heading has a letter (texi2any's footnotes are
    headed "(59)"), does not name the product (`product`), the passage has WORDS_MIN words
    or more, and the PDF holds it (`pdf_holds` in `pdf_text`, its `pdf_reference_text`)."""
    html_out, pdf_out, seen = [], [], set()
    reference = Passage.of(pdf_text)
    (pdf_name,) = os.listdir(os.path.join(pairs, "pdf", corpus))
    for path in sorted(glob.glob(os.path.join(pairs, "html", corpus, "*.html"))):
        for heading, answer in section_passages(path):
            if (
                not _LETTER.search(heading)
                or heading.lower() in ("contents", "index", "remark:")
                or product.search(heading)
                or heading.lower() in seen
                or len(answer.split()) < WORDS_MIN
                or not pdf_holds(reference, answer)
            ):
                continue
            seen.add(heading.lower())
            qid = f"pair-{corpus}-{_words_key(heading).replace(' ', '-')}"
            question = f"What does the manual say about {heading.rstrip(':.?')}?"
            source = os.path.join(corpus, os.path.basename(path))
            html_out.append(_record(qid, question, answer, source, f"{corpus}-html", "html"))
            pdf_source = os.path.join(corpus, pdf_name)
            pdf_out.append(_record(qid, question, answer, pdf_source, f"{corpus}-pdf", "pdf"))
    return html_out, pdf_out


# --- the tune and confirm halves -------------------------------------------------------------


def split_of(question_id: str) -> str:
    """The fixed half a question belongs to, by a hash of its id: "tune" (defaults are chosen
    on it) or "confirm" (the reported numbers). The id, not the text, so that rewording a
    template keeps every question in its half."""
    digest = hashlib.sha256(question_id.encode("utf-8")).digest()
    return "tune" if digest[0] % 2 == 0 else "confirm"


def one_per_question(records: list[dict]) -> list[dict]:
    """One record for each question of a corpus: records asking the same question (PostgreSQL's
    aliases share a purpose line: CREATE ROLE, CREATE USER and CREATE GROUP all "define a new
    database role") become the first of them, with every one's answers. Scored apart, the same
    question had one page right in one record and wrong in the others, whatever was ranked."""
    first: dict[tuple[str, str], dict] = {}
    out = []
    for record in records:
        key = (record.get("corpus"), record.get("question"))
        if key in first and key[1] is not None:
            first[key]["answers"] = first[key]["answers"] + record["answers"]
            continue
        first[key] = record
        out.append(record)
    return out


def _write(path: str, records: list[dict]) -> list[dict]:
    """Write `records`, one per question, each with the half its id hashes to."""
    records = one_per_question(records)
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            record["split"] = split_of(record["id"])
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return records


def pair_questions(pairs: str, out: str, product: re.Pattern[str] = _PRODUCT_WORDS) -> None:
    """OUT/html.jsonl and OUT/pdf.jsonl: every pair's questions, by form (`pdf_pair`)."""
    os.makedirs(out, exist_ok=True)
    by_form: dict[str, list[dict]] = {"html": [], "pdf": []}
    for corpus in sorted(os.listdir(os.path.join(pairs, "pdf"))):
        (pdf,) = glob.glob(os.path.join(pairs, "pdf", corpus, "*.pdf"))
        with open(pdf, "rb") as f:
            text = pdf_reference_text(f.read())
        html, pdf_records = pdf_pair(pairs, corpus, text, product)
        by_form["html"] += html
        by_form["pdf"] += pdf_records
        print(f"{corpus}: {len(html)} questions")
    for form, records in by_form.items():
        _write(os.path.join(out, f"{form}.jsonl"), records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=".cache/eval/corpus", help="the unpacked corpora")
    parser.add_argument("--out", default="eval/questions", help="folder of the question files")
    parser.add_argument(
        "--pairs",
        default=None,
        help="only the PDF/HTML pairs' questions, from this folder "
        "(eval.fetch.fetch_pairs' CACHE/pairs), into OUT/pairs/",
    )
    args = parser.parse_args()
    if args.pairs:
        pair_questions(args.pairs, os.path.join(args.out, "pairs"))
        return
    os.makedirs(args.out, exist_ok=True)
    sets = {
        "postgresql": postgresql(args.corpus),
        "sqlite_faq": sqlite(args.corpus),
        "nodejs": nodejs(args.corpus),
        "code": code(args.corpus),
        "click": sphinx(args.corpus, "click"),
        "attrs": sphinx(args.corpus, "attrs"),
        "junit": javadoc(args.corpus, "junit"),
        "jsoncpp": doxygen(args.corpus, "jsoncpp"),
    }
    for name, records in sets.items():
        written = _write(os.path.join(args.out, f"{name}.jsonl"), records)
        print(f"{name}: {len(written)} questions")


if __name__ == "__main__":
    main()
