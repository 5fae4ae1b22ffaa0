"""The structural invariant: the Markdown the job writes for an HTML page, checked against the
page's own DOM (lxml), with no labels (issue 25, docs/structure.md).

`check_page(html, text, title)` returns the violations of one page, by kind:

- ``heading``: a heading of the text that is no ``h1``-``h6`` (or ``role="heading"``, or
  Doxygen's page title ``div.headertitle > div.title``) of the page, or one that only a
  ``<pre>``, ``<code>`` or table of the page holds;
- ``fence``: a fence that does not stand alone on its line, or a ``<pre>`` whose text is in the
  document but not as a fenced block of the same text (whitespace aside);
- ``list``: a list item, table row or definition-list entry glued to the text before it, or
  read as a thematic break (the job writes none: a page's ``<hr>`` is dropped);
- ``escape``: a Markdown escape (``\\<``, ``\\_``, ``\\[``, ``\\*``...) in the text outside code
  that the page's text does not hold;
- ``navigation``: navigation text (Sphinx's "Navigation", "previous | next", "Quick search",
  Texinfo's button bar "[ << ] [ < ] [ Up ] [ > ] [ >> ]"...);
- ``lost``: a heading followed by nothing where the page's heading of that text has content;
- ``title``: a title that is not the page's own (its ``<title>`` or a heading of the page), or
  is only the site's name that its ``<title>`` gives after the page's, where a heading says
  the page's ("Introduction - The Rust Programming Language" titled "The Rust Programming
  Language").
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from lxml import etree
from lxml.html import HtmlElement

from transforms.chunking.block_parser import block_parser
from transforms.ingest.html import (
    NAVIGATION_BUTTON_WORDS,
    NOT_TEXT,
    NOTE_CLASSES,
    SITE_IN_PARENTHESES,
    SITE_SEPARATORS,
    in_cell,
    in_cell_of_a_top_table,
    shown_text,
)

__all__ = ["KINDS", "Violation", "check_page", "dropped_blocks", "generator_of"]

KINDS = ("heading", "fence", "list", "escape", "navigation", "lost", "title")

_HEADING_TAGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_NOT_HEADING_PARENTS = frozenset({"pre", "code", "table"})
# trafilatura's escapes (xml.py: _escape_inline_specials, _escape_block_start); `\|` in a table
# row is GFM syntax, not an escape of text
_ESCAPE = re.compile(r"\\([*_`~\[\]<>#+!-])")
# a line's indentation and list or block quote markers: what precedes its content
# the markers a line's content may follow: list items ("- ", "1. "), block quotes ("> ") and
# definitions (": ", trafilatura's `<dd>`)
_CONTAINER_MARKERS = re.compile(
    r"(?:[ \t]*(?:[-+*:]|\d{1,9}[.)])(?:[ \t]+|$)|[ \t]*>[ \t]?)*[ \t]*"
)
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_GLUED_FENCE = re.compile(r"\S[ \t]*```")
_TICK_BY_SPAN = re.compile(r"(?<=\x00)\\`|\\`(?=\x00)")  # \x00: where a code span was
# (an escaped backtick opens none: "\`^' and \`~'", Texinfo's quotes in a heading)
_CODE_SPAN = re.compile(r"(?<!\\)(`+)(?!`).*?(?<!`)\1(?!`)")
_NAVIGATION = re.compile(
    r"^(?:#+ )?(?:Navigation|Quick search|Previous topic|Next topic|This Page|Show Source"
    r"|Related Topics)\s*$"
    r"|\b(?:previous|prev)\s*\|\s*next\b|\bnext\s*\|\s*(?:previous|prev)\b"
    r"|\bindex\s*\|?\s*(?:modules\s*\|\s*)?next\s*\|"
    # Texinfo's button bar (texi2html, texi2any): "[ << ] [ < ] [ Up ] [ > ] [ >> ] [Top]"
    rf"|(?:\[ *(?:{NAVIGATION_BUTTON_WORDS}) *\][ \t|]*){{2,}}",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str  # one of KINDS
    detail: str  # what and where, short


def _plain(text: str | None) -> str:
    return " ".join((text or "").split())


def _norm(text: str) -> str:
    """Text as compared: escapes, emphasis marks and permalink signs gone, whitespace one."""
    text = re.sub(r"\\(.)", r"\1", text)
    text = re.sub(r"[*`¶#]", "", text)
    return _plain(text).casefold()


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def generator_of(tree: HtmlElement) -> str:
    """The generator the page names (``<meta name="generator">``, comments), else "unknown"."""
    meta = " ".join(tree.xpath("//meta[@name='generator']/@content")).casefold()
    head = " ".join(str(c) for c in tree.xpath("//comment()")[:5]).casefold()
    body = _plain(" ".join(tree.xpath("//div[@class='footer']//text()")[:20])).casefold()
    for needle, name in (
        ("gtk-doc", "gtk-doc"),
        ("docbook", "docbook"),
        ("doxygen", "doxygen"),
        ("javadoc", "javadoc"),
        ("rustdoc", "rustdoc"),
        ("mkdocs", "mkdocs"),
        ("asciidoc", "asciidoc"),
        ("groff", "groff-man"),
        ("texi2any", "texi2any"),
        ("makeinfo", "texi2any"),
        ("texi2html", "texi2html"),
        ("sphinx", "sphinx"),
        ("docutils", "sphinx"),
    ):
        if needle in meta or needle in head or needle in body:
            return name
    if tree.xpath("//script[contains(@src, 'book.js')]"):
        return "mdbook"
    return "unknown"


def _markdown_tokens(text: str) -> list:
    return block_parser().parse(text)


# what the job drops from a heading (transforms/ingest/html.py): permalink anchors (Doxygen's
# "◆" in a `span.permalink`), and rustdoc's "Notable traits" tooltip
# (Doxygen's "mlabels": a class title's badges, "abstract", which the job drops from it)
_NOT_HEADING_TEXT = frozenset(
    {
        "copiable-anchor",  # texi2any's "¶"
        "copiable-link",
        "headerlink",
        "mlabels",
        "notable-traits",
        "permalink",
        "srclink",  # gi-docgen's "[src]" after a section's heading
        "viewcode-link",  # Sphinx's "[source]"
    }
)


def _heading_of(h: HtmlElement) -> str:
    """A heading's normalized text without its permalink anchors (``<a class="headerlink">``:
    mkdocs' hold an icon font's glyph, U+F0C1, not "¶") and rustdoc's tooltips, which the job
    drops."""
    parts: list[str] = []

    def walk(el: HtmlElement) -> None:
        if el.tag == "br":
            parts.append(" ")  # a line break, which the job writes as a space
        elif isinstance(el.tag, str) and _NOT_HEADING_TEXT.intersection(
            (el.get("class") or "").split()
        ):
            pass
        else:
            # a block in a heading, a line of its own to a browser, is joined with spaces
            block = el is not h and el.tag in ("div", "p")
            parts.append(" " if block else "")
            parts.append(el.text or "")
            for child in el:
                walk(child)
                parts.append(child.tail or "")
            parts.append(" " if block else "")

    walk(h)
    return _norm("".join(parts))


def _page_headings(tree: HtmlElement) -> tuple[set[str], set[str]]:
    """Normalized texts of the page's headings, and those of its pre/code/table text."""
    headings = set()
    # Doxygen's page title, `div.headertitle > div.title`, its pages having no <title>
    marked = "//*[@role='heading']|//div[contains(@class, 'headertitle')]/div[@class='title']"
    for h in tree.xpath(f"//h1|//h2|//h3|//h4|//h5|//h6|{marked}"):
        if any(a.tag in _NOT_HEADING_PARENTS for a in h.iterancestors()):
            continue
        headings.add(_heading_of(h))
    return headings, set()


def _heading_content(tree: HtmlElement) -> dict[str, int]:
    """For each heading's normalized text, the characters of text up to the next heading; of
    several headings of one text, the least (rustdoc's sidebar repeats "Blanket
    Implementations" over a list of links, Django's pages hold two "Usage" sections: the
    text's heading may be either). The text of a link to an element of the page is no
    content: a table of contents of the sections that follow (DocBook's ``div.toc`` under a
    chapter's heading, Sphinx's "Contents" topic), which the job rightly drops, is the same
    headings again."""
    ids = set(tree.xpath("//@id"))
    in_page = {a for a in tree.iter("a") if (a.get("href") or "").partition("#")[2] in ids - {""}}
    sections: list[list] = []  # [text, characters]
    # An element's tail follows its whole subtree: it counts at the element's end, in the
    # section open there (the authors after Erlang's `div.exports-body` of functions are
    # not the text of its "Exports" heading).
    for event, node in etree.iterwalk(tree, events=("start", "end")):
        if not isinstance(node.tag, str):
            continue
        if any(a.tag in _HEADING_TAGS or a.tag in NOT_TEXT for a in node.iterancestors()):
            continue  # a heading's text, a drawing's (SQLite's syntax diagrams) or a script's
        if event == "end":
            if sections and not any(a in in_page for a in node.iterancestors("a")):
                sections[-1][1] += len((node.tail or "").strip())  # not inside a link's text
            continue
        if node.tag in _HEADING_TAGS:
            sections.append([_heading_of(node), 0])
            continue
        if not sections or node.tag in NOT_TEXT:
            continue
        if node in in_page or any(a in in_page for a in node.iterancestors("a")):
            continue  # a link to the page's own sections: its text is no content
        sections[-1][1] += len((node.text or "").strip())
    out: dict[str, int] = {}
    for text, chars in sections:
        out[text] = min(out.get(text, chars), chars)
    return out


def _prose_lines(text: str, tokens: list) -> list[tuple[int, str]]:
    """(line number, line) of the text outside fenced and indented code."""
    code_lines = set()
    for tok in tokens:
        if tok.type in ("fence", "code_block") and tok.map:
            code_lines.update(range(*tok.map))
    return [(i, line) for i, line in enumerate(text.split("\n")) if i not in code_lines]


# what opens a list's item inside a table cell: its marker after the cell's start or a space
_CELL_ITEM_MARKER = re.compile(r"(?:^|[\s|])(?:•|\d{1,9}\.)[ \t]+$")


def _occurrences(text: str, needle: str) -> list[int]:
    found, at = [], text.find(needle)
    while at >= 0:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def _glued_before(text: str, at: int) -> str:
    """The text before `at` on its line when it is more than markers, else ""."""
    before = text[text.rfind("\n", 0, at) + 1 : at]
    # a backslash: an item's own leading "- ", escaped (`- \- text`), is its marker's
    # after a table cell's "|" or a definition's ": ", the item's first code span or emphasis
    # may open: ": `'...%(ident)d...'`" (texi2html's <dd>s)
    opened = before.rstrip(" \t`*_\\")  # and a definition's "- sign" as ": \- sign"
    if before.strip(" \t-*+>|#0123456789.)`\\") and not opened.endswith(("|", ":")):
        return before
    return ""


def check_page(
    tree: HtmlElement, text: str, title: str | None = None, page_text: str | None = None
) -> list[Violation]:
    """The violations of the invariant by the extracted Markdown `text` of the page `tree`."""
    out: list[Violation] = []
    tokens = _markdown_tokens(text)
    page_text = page_text if page_text is not None else tree.text_content()
    lines = text.split("\n")

    # headings
    from transforms.chunking.markdown import headings as md_headings

    allowed, _ = _page_headings(tree)
    found = md_headings(text)
    for _line, _level, heading in found:
        if _norm(heading) not in allowed:
            out.append(Violation("heading", heading[:80]))

    # lost content: a heading followed at once by another where the page has text between
    content = _heading_content(tree)
    for (line, _, heading), (nxt, _, _) in itertools.pairwise(found):
        between = "\n".join(lines[line + 1 : nxt]).strip()
        if not between and content.get(_norm(heading), 0) > 40:
            out.append(Violation("lost", heading[:80]))

    # fences
    prose = _prose_lines(text, tokens)
    for i, line in prose:
        # a run of backticks that a code span's closing run matches is no fence (Sphinx's
        # "equivalent of ``` ``literal`` ```"), nor is one inside a code block
        outside_spans = _CODE_SPAN.sub("", line)
        if _GLUED_FENCE.search(outside_spans) and not _FENCE.match(line):
            out.append(Violation("fence", f"line {i + 1}: {line.strip()[:80]}"))
    fenced = [_squeeze(t.content) for t in tokens if t.type in ("fence", "code_block")]
    fenced_all = "\n".join(fenced)
    squeezed_text = _squeeze(re.sub(r"\\(.)", r"\1", text))
    # a table row holds no block: a <pre> in a cell is written as a code span of its row
    # (transforms/ingest/html.py, PostgreSQL's function tables), its whitespace collapsed
    # (`\|` in a row is GFM's escape of the cell separator)
    spans = "\n".join(
        _squeeze(m.group(0).replace("\\|", "|"))
        for _, line in prose
        for m in _CODE_SPAN.finditer(line)
    )
    for pre in tree.iter("pre"):
        body = _squeeze(pre.text_content())
        if len(body) < 8:
            continue
        if in_cell(pre) and body in spans:
            continue
        if body in squeezed_text and body not in fenced_all:
            out.append(Violation("fence", f"<pre> not fenced: {_plain(pre.text_content())[:60]}"))

    # list items, table rows and definition-list entries start a line of their own
    # emphasis marks and code spans' backticks out: Sphinx emphasizes each name of a type
    # (`*Union*[*Callable*[...`), a "Returns" field reads "tuple in the form `(app_iter,
    # status, headers)`", and an item's words are the page's text
    prose_text = "\n".join(line for _, line in prose).replace("*", "").replace("`", "")
    # a table row's cells as the text writes them, "|" between them (a GFM table, or a table
    # in a list item written a row to a line), matched as the row's words; a line of a code
    # block too (Doxygen's declaration, a table of a parameter to a row, is a code block of a
    # parameter to a line); code spans' backticks out, as above (Javadoc's summary rows are
    # code: "`abstract Description` | `getDescription()`", whose words a row that went
    # unmatched found only in the method's signature below, "public abstract ...")
    row_text = "\n".join(
        " ".join(line.replace("|", " ").replace("*", "").replace("`", "").split()) for line in lines
    )
    for item in tree.xpath("//li|//tr|//dt|//dd"):
        if any(a.tag == "pre" for a in item.iterancestors()):
            continue
        if item.tag in ("dt", "dd") and set(NOTE_CLASSES) & set(
            (item.getparent().get("class") or "").split()
        ):
            # docutils' footnotes before 0.18 (<dl class="footnote">): the job writes each as
            # a paragraph its label opens ("[1] We considered ..."), not as a definition
            continue
        if _plain(item.text_content()) == _plain("".join(item.xpath(".//a//text()"))):
            # a navigation item, all link (MkDocs' "Customizing Your Theme" in its menu),
            # which the job drops: its words in a sentence of the text are not it, glued
            continue
        if item.tag == "tr":  # its cells, apart (`<td>0-99</td><td>Fix...` has no space)
            words = _plain(" ".join(c.text_content() for c in item)).split()[:6]
        else:
            words = _plain(item.text_content()).split()[:6]
        if len(words) < 3:
            continue
        start = " ".join(words)
        # the item's words may come first elsewhere (Javadoc's `<dd>` "a new array of ..." in
        # the summary's "Returns a new array of ..."): glued only when no occurrence starts
        # its line
        text = row_text if item.tag == "tr" else prose_text
        if item.tag == "li" and in_cell_of_a_top_table(item):
            # a list in a table cell is written on its row's line (html.py,
            # _lists_in_cells_as_text): each item after its marker, "• " or "3. "
            glued = [
                "" if _CELL_ITEM_MARKER.search(text[max(0, at - 16) : at]) else text[:at][-30:]
                for at in _occurrences(text, start)
            ]
        else:
            glued = [_glued_before(text, at) for at in _occurrences(text, start)]
        if glued and all(glued):
            out.append(Violation("list", f"<{item.tag}> glued: {glued[0][-30:]}{start}"[:100]))

    # no thematic break: the job writes none (trafilatura drops a page's <hr>), so one in the
    # text is an item or a term read as one ("- --", the definition of CMake's and git's
    # option "--": its term gone, its description a paragraph after a rule)
    for t in tokens:
        if t.type == "hr" and t.map:
            out.append(Violation("list", f"line {t.map[0] + 1}: a rule: {lines[t.map[0]][:60]}"))

    # escapes outside code, that the page's own text does not hold
    for i, line in prose:
        # a backtick of the page next to a code span's stays escaped: unescaped it would join
        # the span's run (trafilatura_markdown._escaped_ticks; Texinfo's `quote' around code,
        # ``\``[[ -o multibyte ]]`'``): syntax, not text
        ticks = line.count("`")
        line = _TICK_BY_SPAN.sub("", _CODE_SPAN.sub("\x00", line)).replace("\x00", "")
        content = _CONTAINER_MARKERS.match(line).end()
        for m in _ESCAPE.finditer(line):
            if m.group(1) == "`" and ticks > 1:
                continue  # unescaped, it and another backtick of the line would open a span
            if m.start() == content and m.group(1) in "#>-+*":
                # trafilatura's block-start escape (`- \- text`, `- \* text` where an item
                # starts with "* ": the zsh FAQ's): syntax, not text
                continue
            if m.group(0) not in page_text:
                out.append(Violation("escape", f"line {i + 1}: {line.strip()[:80]}"))
                break

    # navigation text
    for m in _NAVIGATION.finditer(text):
        out.append(Violation("navigation", m.group(0).strip()[:80]))

    # the title
    if title:
        own = tree.xpath("(//head/title)[1]")
        own_title = _norm(own[0].text_content()) if own else ""
        if _norm(title) not in own_title and _norm(title) not in allowed:
            out.append(Violation("title", f"{title[:60]!r} (page: {own_title[:60]!r})"))
        elif any(
            _norm(title) == site != page and page in allowed for page, site in _split(own_title)
        ):
            out.append(
                Violation("title", f"{title[:60]!r} is the site's (page: {own_title[:60]!r})")
            )
    return out


def _split(own_title: str) -> list[tuple[str, str]]:
    """A `<title>` as (the page's name, its site's), where it reads as a name and then a site:
    ("introduction", "the rust programming language") of "introduction - the rust programming
    language", ("timeout", "junit api") of "timeout (junit api)". Which part is the page's only
    a heading tells (texi2html puts the manual first: "gnu gettext utilities: 1.
    introduction"): `check_page` counts a title as the site's only where the other part is a
    heading of the page."""
    pairs = []
    for separator in SITE_SEPARATORS:
        page, found, site = own_title.rpartition(separator)
        if found:
            pairs.append((page, site))
    inside = SITE_IN_PARENTHESES.fullmatch(own_title)
    return pairs + ([(inside[1], inside[2])] if inside else [])


def count(violations: Iterable[Violation]) -> dict[str, int]:
    """Violations per kind, every kind present."""
    counts = dict.fromkeys(KINDS, 0)
    for v in violations:
        counts[v.kind] += 1
    return counts


# What `dropped_blocks` reads: the page's blocks that hold text and no other block, outside its
# chrome (navigation, headers and footers, sidebars, tables of contents, search boxes)
# a <div> that holds no other block is one too: trafilatura keeps a <div>'s own text only on a
# page of little <p> text (transforms.ingest.html._div_text_in_paragraphs)
_TEXT_BLOCKS = (
    *("p", "li", "dd", "dt", "td", "th", "pre", "blockquote", "caption", "div"),
    *_HEADING_TAGS,
)
_CHROME_TAGS = frozenset({"nav", "header", "footer", "aside", "script", "style", "noscript"})
# Doxygen's tooltips (div.ttc: a linked name's declaration, shown on hover) are chrome too
_CHROME_NAMES = re.compile(
    r"nav|menu|sidebar|breadcrumb|footer|header|toc|related|tooltip|(?:^|\s)ttc(?:$|\s)", re.I
)
_DIALOG_NAMES = re.compile(r"modal|dialog|search", re.I)  # read before the content names
_CONTENT_NAMES = re.compile(r"(?:^|[\s_-])(?:content|main|document)(?:$|[\s_-])", re.I)
MIN_BLOCK_CHARS = 60  # shorter blocks (labels, one-word cells) are not counted
_WORD = re.compile(r"[^\W_]+")


_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))  # soft hyphen...


def _shingles(text: str) -> list[tuple[str, ...]]:
    words = _WORD.findall(text.translate(_INVISIBLE).lower())
    return [tuple(words[i : i + 4]) for i in range(len(words) - 3)]


def _is_chrome(element: HtmlElement) -> bool:
    """Whether `element` is in the page's chrome: the nearest of it and the elements around
    it (below `<body>`: mdBook's `<body class="sidebar-visible">`) that says what it is says
    chrome, by its tag, role, class or id. A content container says content first (the Read
    the Docs theme's main column is `div.wy-nav-content`, in `div.wy-grid-for-nav`)."""
    for a in (element, *element.iterancestors()):
        if a.tag in ("body", "html"):
            break
        if a.tag in _CHROME_TAGS or a.get("role") == "navigation":
            return True
        names = f"{a.get('class') or ''} {a.get('id') or ''}"
        if _DIALOG_NAMES.search(names):
            return True  # MkDocs' search dialog holds a div.modal-content
        if a.tag in ("main", "article") or a.get("role") == "main" or _CONTENT_NAMES.search(names):
            return False
        if _CHROME_NAMES.search(names):
            return True
    return False


def dropped_blocks(tree: HtmlElement, text: str) -> tuple[int, list[str]]:
    """The characters of the page's text blocks, and those blocks whose text the document
    `text` does not hold: under half of a block's runs of four words are in the text.

    Not a violation kind: it also counts what the job is right to drop and a page's chrome
    that `_is_chrome` does not know (gtk-doc's line numbers beside a listing, Texinfo's
    "This document was generated on ..."), and a block of fewer than four words counts for
    nothing. It is how lost content was found (docs/structure.md, "Text the page holds and
    the document does not"): a section whose id trafilatura takes for reader comments, a
    list in a table cell, an admonition whose title holds a boilerplate word."""
    # the text's code spans and emphasis marks out: "`Matcher`s" is the page's "Matchers"; and
    # with its asterisks too, which a code block holds as they are: Javadoc's
    # "2*60*60*1000" (SimpleTimeZone) is no word "2606601000"
    unquoted = text.replace("`", "")
    held = set(_shingles(unquoted.replace("*", ""))) | set(_shingles(unquoted))
    total, dropped = 0, []
    for block in tree.iter(*_TEXT_BLOCKS):
        if next(block.iterdescendants(*_TEXT_BLOCKS), None) is not None or _is_chrome(block):
            continue
        # a <br> parts words: PostgreSQL's synopsis terms, "SUPERUSER<br>NOSUPERUSER", are
        # alternatives, not one word
        plain = _plain(shown_text(block, " "))
        shingles = _shingles(plain)
        if len(plain) < MIN_BLOCK_CHARS or not shingles:
            continue
        total += len(plain)
        if sum(s in held for s in shingles) * 2 < len(shingles):
            dropped.append(plain)
    return total, dropped
