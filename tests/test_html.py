"""Tests for transforms.ingest.html on the real documentation pages in samples/html/.

PostgreSQL 15 (DocBook), SQLite and Python (Sphinx) pages: the navigation, menus, sidebars and
footers must go, the body text must stay, and the body's <h1>-<h6> must come out as Markdown
headings (trafilatura alone drops them on pages without a content container).
"""

from __future__ import annotations

import dataclasses
import pickle
import re
import time
from functools import cache
from pathlib import Path

import pytest
from lxml import etree

from transforms.ingest.html import HtmlExtraction, _wrap_body_in_main, html_to_markdown

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "html"
PAGES = sorted(p.name for p in SAMPLES.glob("*.html"))


@cache
def extracted(name: str) -> HtmlExtraction:
    return html_to_markdown((SAMPLES / name).read_bytes(), source=str(SAMPLES / name))


def headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"#{1,6} ", line)]


def flat(text: str) -> str:
    """Whitespace-normalized text (the DocBook pages keep their source line breaks)."""
    return " ".join(text.split())


# the exact heading lines of each page's body, in order
EXPECTED_HEADINGS = {
    "sql-vacuum.html": [
        "# VACUUM",  # <h2>, one level above its <h2> sections (the title heading)
        "## Synopsis",
        "## Description",
        "## Parameters",
        "## Outputs",
        "## Notes",
        "## Examples",
        "## Compatibility",
        # "## See Also" holds only links: pruned by link density, then dropped as a trailing title
    ],
    "indexes-types.html": [
        "## 11.2. Index Types",
        "### 11.2.1. B-Tree",
        "### 11.2.2. Hash",
        "### 11.2.3. GiST",
        "### 11.2.4. SP-GiST",
        "### 11.2.5. GIN",
        "### 11.2.6. BRIN",
    ],
    "tutorial-join.html": ["## 2.6. Joins Between Tables"],
    "lang_transaction.html": [
        "# 1. Transaction Control Syntax",
        "# 2. Transactions",
        "## 2.1. Read transactions versus write transactions",
        "## 2.2. DEFERRED, IMMEDIATE, and EXCLUSIVE transactions",
        "## 2.3. Implicit versus explicit transactions",
        "# 3. Response To Errors Within A Transaction",
    ],
    "whentouse.html": [
        "# Appropriate Uses For SQLite",
        "## Situations Where SQLite Works Well",
        "## Situations Where A Client/Server RDBMS May Work Better",
        "## Checklist For Choosing The Right Database Engine",
    ],
    # the sidebar's "Table of Contents"/"This Page" (h3) and "Previous topic" (h4) are not body
    "sphinx-todo.html": ["# `sphinx.ext.todo` – Support for todo items", "## Configuration"],
}

EXPECTED_TITLES = {
    "sql-vacuum.html": "VACUUM",
    "indexes-types.html": "11.2. Index Types",
    "tutorial-join.html": "2.6. Joins Between Tables",
    "lang_transaction.html": "Transaction",
    "whentouse.html": "Appropriate Uses For SQLite",
    "sphinx-todo.html": "sphinx.ext.todo – Support for todo items",
}

BODY_TEXT = {
    "sql-vacuum.html": [
        "VACUUM — garbage-collect and optionally analyze a database",
        "`VACUUM` reclaims storage occupied by dead tuples.",
        "Selects “full” vacuum, which can reclaim more space",
        "To clean a single table `onek`, analyze it for the optimizer",
        "There is no `VACUUM` statement in the SQL standard.",
    ],
    "indexes-types.html": [
        "PostgreSQL provides several index types: B-tree, Hash, GiST, SP-GiST, GIN, BRIN",
        "B-trees can handle equality and range queries on data that can be sorted",
        "BRIN indexes (a shorthand for Block Range INdexes) store summaries",
    ],
    "tutorial-join.html": [
        "Thus far, our queries have only accessed one table at a time.",
        "You will encounter this style of abbreviating quite frequently.",
    ],
    "lang_transaction.html": [
        "No reads or writes occur except within a transaction.",
        "END TRANSACTION is an alias for COMMIT.",
        "database or disk full",
    ],
    "whentouse.html": [
        "SQLite does not compete with client/server databases. SQLite competes with fopen().",
        "**Embedded devices and the internet of things**",
        "**Otherwise → choose SQLite!**",
    ],
    "sphinx-todo.html": [
        "There are two additional directives when using this extension:",
        "- todo_include_todos",
        "Emitted when a todo is defined.",
    ],
}

POSTGRES_NAV = [
    # navheader/navfooter link rows: "Prev Up <chapter> Home Next" and the neighbour titles
    r"\bPrev\b",
    r"\bNext\b",
    r"\bHome\b",
    r"^Up$",
    r"SQL Commands",
    r"Chapter 11\. Indexes",
    r"Chapter 2\. The SQL Language",
    r"11\.1\. Introduction",
    r"11\.3\. Multicolumn Indexes",
    r"2\.5\. Querying a Table",
    r"2\.7\. Aggregate Functions",
]
SQLITE_NAV = [
    # the "nosearch" menubar and tagline
    r"Small\. Fast\. Reliable\.",
    r"Choose any three",
    r"\bMenu\b",
    r"\bAbout\b",
    r"\bDocumentation\b",
    r"\bDownload\b",
    r"\bLicense\b",
    r"\bSupport\b",
    r"\bPurchase\b",
    r"\bSearch\b",
    r"\bChangelog\b",
]
SPHINX_NAV = [
    # sidebar, mobile menu, "related" bars and footer
    r"Table of Contents",
    r"Previous topic",
    r"Next topic",
    r"This Page",
    r"Report a Bug",
    r"Show Source",
    r"Navigation",
    r"\bindex\b",
    r"modules \|",
    r"Python Software Foundation",
    r"©|Copyright",
    r"Last updated",
    r"Found a bug",
    r"Theme",
    r"¶",  # permalink anchors
]
BOILERPLATE = {
    "sql-vacuum.html": POSTGRES_NAV,
    "indexes-types.html": POSTGRES_NAV,
    "tutorial-join.html": POSTGRES_NAV,
    "lang_transaction.html": SQLITE_NAV,
    "whentouse.html": SQLITE_NAV,
    "sphinx-todo.html": SPHINX_NAV,
}


def test_every_sample_is_covered() -> None:
    assert sorted(EXPECTED_HEADINGS) == PAGES


@pytest.mark.parametrize("name", PAGES)
def test_body_headings_become_markdown_headings(name: str) -> None:
    assert headings(extracted(name).text) == EXPECTED_HEADINGS[name]


@pytest.mark.parametrize("name", PAGES)
def test_body_text_is_kept(name: str) -> None:
    text = flat(extracted(name).text)
    for snippet in BODY_TEXT[name]:
        assert snippet in text, snippet


@pytest.mark.parametrize("name", PAGES)
def test_navigation_menus_sidebars_and_footers_are_gone(name: str) -> None:
    lines = extracted(name).text.splitlines()
    for pattern in BOILERPLATE[name]:
        hits = [line for line in lines if re.search(pattern, line)]
        assert not hits, (pattern, hits)


@pytest.mark.parametrize("name", PAGES)
def test_title(name: str) -> None:
    assert extracted(name).title == EXPECTED_TITLES[name]


def test_sections_follow_their_headings() -> None:
    """Each heading sits right before its own section's text (what section paths rely on)."""
    text = flat(extracted("sql-vacuum.html").text)
    order = [
        "## Description",
        "reclaims storage occupied by dead tuples",
        "## Parameters",
        "Selects “full” vacuum",
        "## Outputs",
        "## Notes",
        "## Examples",
        "VACUUM (VERBOSE, ANALYZE) onek;",
        "## Compatibility",
    ]
    positions = [text.index(s) for s in order]
    assert positions == sorted(positions)

    text = flat(extracted("indexes-types.html").text)
    order = ["### 11.2.1. B-Tree", "B-trees can handle", "### 11.2.2. Hash", "Hash indexes store"]
    positions = [text.index(s) for s in order]
    assert positions == sorted(positions)


def test_other_metadata() -> None:
    sphinx = extracted("sphinx-todo.html")
    assert sphinx.language == "en"  # <html lang="en">
    assert sphinx.url == "https://www.sphinx-doc.org/en/master/usage/extensions/todo.html"
    assert extracted("lang_transaction.html").date == "2020-07-09"  # "last modified on 2020-07-09"
    # its footer's "Copyright 2007-2023" is no date of the page (htmldate's extensive search
    # made it 2023-01-01)
    assert sphinx.date is None
    vacuum = extracted("sql-vacuum.html")
    assert (vacuum.url, vacuum.date, vacuum.language) == (None, None, None)


def test_canonical_url_and_declared_language() -> None:
    html = (
        "<html><head><title>Page</title>"
        '<link rel="canonical" href="https://example.org/docs/page.html">'
        '<meta http-equiv="Content-Language" content="fr, en"></head><body>'
        '<div class="navigation"><a href="/">Accueil</a> <a href="/a">Liens</a></div>'
        "<h1>Titre</h1>" + "<p>" + "Une phrase de contenu réel. " * 20 + "</p>"
        "<h2>Partie</h2>" + "<p>" + "Une autre phrase assez longue. " * 20 + "</p>"
        "</body></html>"
    )
    result = html_to_markdown(html)
    assert result.url == "https://example.org/docs/page.html"
    assert result.language == "fr"
    assert headings(result.text) == ["# Titre", "## Partie"]
    assert "Accueil" not in result.text


def test_a_file_url_is_no_page_url() -> None:
    # Debian's documentation packages are built with canonical links to where they lie
    html = (
        '<html><head><title>P</title><link rel="canonical" href="file:///usr/share/doc/x.html">'
        "</head><body><main><h1>T</h1><p>" + "A sentence of real content. " * 20 + "</p>"
        "</main></body></html>"
    )
    assert html_to_markdown(html).url is None


@pytest.mark.parametrize("name", ["whentouse.html", "sql-vacuum.html"])  # the latter: <?xml ...?>
def test_str_and_bytes_give_the_same_result(name: str) -> None:
    raw = (SAMPLES / name).read_bytes()
    assert html_to_markdown(raw.decode("utf-8")) == html_to_markdown(raw)


@pytest.mark.parametrize("html", ["", b"", "<html><body></body></html>", b"\x00\x01\x02"])
def test_nothing_extracted_gives_empty_text(html: str | bytes) -> None:
    assert html_to_markdown(html, source="empty").text == ""


def test_a_fragment_of_one_block_is_read() -> None:
    # trafilatura's load_html refuses a fragment of one block as no HTML; the job rejected
    # such a page as "no main text"
    assert html_to_markdown(b"<p>A short note about retries.</p>").text == (
        "A short note about retries."
    )
    assert html_to_markdown("<h2>Retries</h2><p>Retry twice, then give up.</p>").text == (
        "## Retries\n\nRetry twice, then give up."
    )


def test_result_is_frozen_and_picklable() -> None:
    result = extracted("tutorial-join.html")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.text = "x"  # type: ignore[misc]
    # transforms/ingest/extract.py returns it from a child process
    assert pickle.loads(pickle.dumps(result)) == result


def test_wrap_only_without_a_content_container() -> None:
    import lxml.html

    docbook = lxml.html.fromstring((SAMPLES / "sql-vacuum.html").read_bytes())
    assert _wrap_body_in_main(docbook)
    body = docbook.find("body")
    assert [child.tag for child in body] == ["main"]
    assert body[0][0].get("class") == "navheader"  # order and content unchanged, just moved

    # Sphinx: trafilatura finds div.body[role=main] itself, leave its choice alone
    sphinx = lxml.html.fromstring((SAMPLES / "sphinx-todo.html").read_bytes())
    assert not _wrap_body_in_main(sphinx)
    assert sphinx.find(".//main") is None


def test_fast_enough() -> None:
    pages = [(SAMPLES / name).read_bytes() for name in PAGES]
    html_to_markdown(pages[0])  # warm-up: first calls compile trafilatura/htmldate patterns
    start = time.perf_counter()
    for raw in pages:
        html_to_markdown(raw)
    per_page = (time.perf_counter() - start) / len(pages)
    assert per_page < 0.5, f"{per_page * 1000:.0f} ms per page"  # ~20 ms here; generous for CI


def test_shown_text_skips_drawings_and_reads_any_depth() -> None:
    from lxml.html import fragment_fromstring

    from transforms.ingest.html import shown_text

    element = fragment_fromstring(
        "<p>A <b>label</b>:<svg><text>diagram</text></svg> one<br>two"
        "<script>var x</script><!-- note --> end</p>"
    )
    assert shown_text(element) == "A label: onetwo end"
    assert shown_text(element, " ") == "A label: one two end"
    # deeper than Python's recursion limit (a page may nest 2,048 elements, HUGE_DEPTH_LIMIT)
    root = node = fragment_fromstring("<div>top</div>")
    for _ in range(3000):
        node = etree.SubElement(node, "div")
    node.text = "deep"
    assert shown_text(root) == "topdeep"
