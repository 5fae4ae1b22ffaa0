"""Definitions (a definition list's term and its description) as units of the Markdown text.

API references are mostly definitions: Sphinx's ``<dl class="py function">`` (the ``<dt>`` a
signature, the ``<dd>`` its description), a man page's or git's options, DocBook's variable
lists, Texinfo's ``@deffn``. trafilatura 2.3 writes a ``<dt>`` and its ``<dd>`` as two list
items (``- accumulate(iterable)`` and ``- Make an iterator...``), and continues a
description's later lines at the margin, so nothing in its Markdown says where a definition
ends or that the first item names what the second describes: the chunker cut between them.

The page's DOM says it. `mark_definitions` puts a marker character at the start of every
``<dt>`` and ``<dd>`` and at the end of every ``<dd>`` before trafilatura runs (characters of
Unicode's Supplemental Punctuation that trafilatura keeps and pages do not use), and
`definitions_as_units` turns its Markdown into a definition list as pandoc and PHP Markdown
Extra write one, the markers gone::

    - accumulate(iterable[, func, *, initial=None])
    : Make an iterator that returns accumulated sums...
      Roughly equivalent to:
      ```
      def accumulate(iterable, func=operator.add, *, initial=None):
      ```

The term stays a list item (a second term of the same description, as git's ``-b
<browser>`` and ``--browser=<browser>``, is the item's next line, indented), the description
starts with ``: `` and each of its lines is indented two columns past the term's marker
(nested definitions two more), so a definition is the term and the lines indented under it.
CommonMark reads it as one list item (its description a lazy continuation, its blocks the
item's children); `definitions` finds the definitions of a text by those lines, for the
chunker (`transforms.chunking.markdown`), which keeps a definition that fits whole and puts
its term in the section path.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from lxml.html import HtmlElement

from transforms.chunking.block_parser import block_parser

__all__ = [
    "Definition",
    "definitions",
    "definitions_as_units",
    "mark_definitions",
    "term_as_text",
]

TERM = "\u2e00"  # the start of a <dt>
BODY = "\u2e01"  # the start of a <dd>
END = "\u2e02"  # the end of a <dd>
MARKERS = TERM + BODY + END
_NOT_IN = frozenset({"pre", "code", "table"})


def mark_definitions(tree: HtmlElement) -> bool:
    """Mark each definition of `tree` (a ``<dt>`` or several, then a ``<dd>``) for
    `definitions_as_units`; False, and nothing marked, when the page holds a marker
    character already (its text would lose it) or no definition."""
    if any(m in tree.text_content() for m in MARKERS):
        return False
    marked = False
    for dl in tree.iter("dl"):
        if any(a.tag in _NOT_IN for a in dl.iterancestors()):
            continue
        terms: list[HtmlElement] = []
        for child in dl:
            if child.tag == "dt":
                terms.append(child)
            elif child.tag == "dd" and terms and not child.text_content().strip():
                terms = []  # an empty description (Django's, its text after the list) is none
            elif child.tag == "dd" and terms:
                for term in terms:
                    term.text = TERM + (term.text or "")
                child.text = BODY + (child.text or "")
                if len(child):
                    child[-1].tail = (child[-1].tail or "") + END
                else:
                    child.text += END
                terms, marked = [], True
    return marked


_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})")
_TERM_LINE = re.compile(rf"^( *)[-*+] ?{TERM}[ \t]*(.*)$")
_BODY_LINE = re.compile(rf"^( *)(?:[-*+] ?)?{BODY}[ \t]*(.*)$")
# a line of paragraph text: no marker, list item, heading, quote, fence, table row or HTML
_PLAIN_LINE = re.compile(rf"[ \t]*[^\s{MARKERS}\-*+#>`~|<\d]")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _description_follows(lines: list[str], i: int) -> bool:
    """Whether a description's marker comes before the next blank line, from line `i`."""
    for line in itertools.islice(lines, i, None):
        if BODY in line:
            return True
        if not line.strip() or TERM in line:
            return False
    return False


# what a term can start with that a Markdown reader may take for block syntax (a list item,
# heading, quote, fence, thematic break or setext underline). Not "<": a term that reads as
# an HTML block (git's "<object>") is the same text line for line, and the text holds
# `<name>`, not `\<name>` (issue 25)
_BLOCK_CHARS = frozenset("-+*=#>`~_0123456789")
_TEXT_TOKENS = ["bullet_list_open", "list_item_open", "paragraph_open", "inline"]
_ORDERED = re.compile(r"\d{1,9}(?=[.)])")


def term_as_text(term: str, first: bool) -> str:
    """`term` as the text of its line: escaped at its start where a Markdown reader would read
    it as block syntax, as the escapes `without_escapes` keeps are.

    The first term follows the item's "- ": a term "-" (a program's option for its standard
    input) read as a nested list item, "# comment" as a heading. A later term is the next line
    of the item's paragraph, where "-" or "=" underlines the term above as a setext heading
    (Sphinx writes an option's names as text, not code: ``<file> ... <fileN>`` then ``-``),
    and "> x" opens a quote. Such a term gets a backslash before its first character (before
    the "." or ")" of an ordered list's number), and reads as its text."""
    if not term or term[0] not in _BLOCK_CHARS:
        return term
    source = f"- {term}" if first else f"- x\n  {term}"
    kinds = [t.type for t in block_parser().parse(source)]
    if kinds == [*_TEXT_TOKENS, "paragraph_close", "list_item_close", "bullet_list_close"]:
        return term
    number = _ORDERED.match(term)
    return term[: number.end()] + "\\" + term[number.end() :] if number else "\\" + term


def definitions_as_units(markdown: str) -> str:
    """trafilatura's Markdown of a marked page (`mark_definitions`) with each definition
    written as a term item and its description under it (see the module docstring)."""
    if not any(m in markdown for m in MARKERS):
        return markdown
    lines = markdown.split("\n")
    out: list[str] = []
    pads: list[int] = []  # the indentation of each open description's lines
    fence: tuple[str, int] | None = None  # the open code block's fence and the shift of its lines
    term_indent: int | None = None  # the indentation of the terms read, up to their description
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        ends = line.count(END)
        bare = line.replace(END, "")
        pad = pads[-1] if pads else 0
        if term_indent is not None and TERM not in bare and BODY not in bare:
            if bare.strip() and _description_follows(lines, i):
                out.append(" " * (term_indent + 2) + bare.strip())  # a term's next line
                continue
            term_indent = None  # terms without a description (trafilatura lost it): no definition
        if fence is not None:
            out.append(" " * fence[1] + bare if bare.strip() else bare)
            m = _FENCE.match(bare)
            if m and m.group(1).startswith(fence[0]) and not bare.strip().strip(fence[0][0]):
                fence = None
        elif m := _TERM_LINE.match(bare):
            indent, term = max(len(m.group(1)), pad), m.group(2).strip()
            if not term and i < len(lines) and lines[i].strip() and lines[i][0] not in MARKERS:
                term, i = lines[i].replace(END, "").strip(), i + 1  # "- " and the term below
            term = term.replace(TERM, "").replace(BODY, "")
            if term_indent is None:  # the first term: a list item
                term_indent = indent
                out.append(" " * indent + "- " + term_as_text(term, first=True))
            else:  # a later term of the same description: a line of the first one's item
                out.append(" " * (term_indent + 2) + term_as_text(term, first=False))
        elif m := _BODY_LINE.match(bare):
            indent, rest = max(len(m.group(1)), pad), m.group(2).replace(BODY, "").strip()
            indent, term_indent = (indent if term_indent is None else term_indent), None
            if not rest and not ends and i < len(lines) and _PLAIN_LINE.match(lines[i]):
                rest, i = lines[i].strip(), i + 1  # ":" and the description's first line below
                ends = rest.count(END)
                rest = rest.replace(END, "").strip()
            out.append(" " * indent + (": " + rest if rest else ":"))
            pads.append(indent + 2)
            if ends:  # a one-line description
                ends -= 1
                pads.pop()
        elif not bare.strip():
            if not line.strip() or ends == 0:
                out.append(bare.rstrip())
        else:
            bare = bare.replace(TERM, "").replace(BODY, "")
            shift = max(0, pad - _indent(bare))
            if m := _FENCE.match(bare):
                fence = (m.group(1), shift)
            out.append(" " * shift + bare.rstrip())
        for _ in range(ends):
            if pads:
                pads.pop()
    return "\n".join(out)


@dataclass(frozen=True)
class Definition:
    """A definition of a text: [start, end) from its first term's marker, `term` the first
    term's Markdown, `body` where its description starts, `parts` the definitions nested in it."""

    term: str
    start: int
    end: int
    body: int
    parts: tuple[Definition, ...] = ()


_TERM_AT = re.compile(r"( *)[-*+] (\S.*)")
_BODY_AT = re.compile(r"( *):(?: |$)")


def definitions(text: str, start: int = 0, end: int | None = None) -> list[Definition]:
    """The definitions of text[start:end] written as `definitions_as_units` writes them: a term
    item (``- term``; more terms of the same description on the next lines, indented two
    columns more), then ``:`` at the item's indentation, then the lines (blank, or indented two
    columns more, or in a code block opened there) up to the next line indented less. The terms
    are those at the indentation of the range's first line; nested definitions are each one's
    `parts`."""
    end = len(text) if end is None else end
    if ":" not in text[start:end]:
        return []
    lines: list[tuple[int, int]] = []  # (start, end) of each line in [start, end)
    pos = start
    while pos < end:
        nl = text.find("\n", pos, end)
        stop = end if nl < 0 else nl
        lines.append((pos, stop))
        pos = stop + 1
    first = next((text[s:e] for s, e in lines if text[s:e].strip()), "")
    return _scan(text, lines, 0, len(lines), _indent(first))


def _scan(
    text: str, lines: list[tuple[int, int]], lo: int, hi: int, level: int
) -> list[Definition]:
    found: list[Definition] = []
    i = lo
    while i < hi:
        m = _TERM_AT.fullmatch(text, *lines[i])
        if not m or len(m.group(1)) != level:
            i += 1
            continue
        indent = len(m.group(1))
        j = i + 1
        while j < hi and _indent(line := text[slice(*lines[j])]) == indent + 2 and line.strip():
            j += 1  # more terms, or the term's own next lines
        b = _BODY_AT.match(text, *lines[j]) if j < hi else None
        if b is None or len(b.group(1)) != indent:
            i += 1
            continue
        k, last, fence = j + 1, j, None
        while k < hi:
            s, e = lines[k]
            line = text[s:e]
            if fence is not None:
                f = _FENCE.match(line)
                if f and f.group(1).startswith(fence) and not line.strip().strip(fence[0]):
                    fence = None
                last, k = k, k + 1
                continue
            if not line.strip():
                k += 1
                continue
            if _indent(line) < indent + 2:
                break
            if f := _FENCE.match(line):
                fence = f.group(1)
            last, k = k, k + 1
        nested = _scan(text, lines, j + 1, last + 1, indent + 2)
        found.append(
            Definition(
                term=text[m.start(2) : lines[i][1]].strip(),
                start=lines[i][0] + indent,
                end=lines[last][1],
                body=lines[j][0],
                parts=tuple(nested),
            )
        )
        i = last + 1
    return found


_FENCE_WITH_ENDS = re.compile(rf"([ \t]*(?:`{{3,}}|~{{3,}})[^`{END}]*?)[ \t]*({END}+)[ \t]*")


def ends_off_fences(markdown: str) -> str:
    """A description's end marker that trafilatura wrote on a fence line, on the next line:
    ```` ```⸂ ```` is no closing fence (`transforms.ingest.trafilatura_markdown.fences_alone`
    runs on the marked text)."""
    if END not in markdown:
        return markdown
    return "\n".join(
        f"{m.group(1)}\n{m.group(2)}" if (m := _FENCE_WITH_ENDS.fullmatch(line)) else line
        for line in markdown.split("\n")
    )
