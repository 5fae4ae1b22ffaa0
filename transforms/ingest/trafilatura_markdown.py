"""trafilatura's Markdown as text to chunk and embed: its escapes dropped, its fences alone.

trafilatura 2.3.1 (xml.py) writes Markdown to be *rendered*: it backslash-escapes every ``*``,
``_``, `````, ``~``, ``[``, ``]`` and ``<`` of the page's prose (``_escape_inline_specials``,
doubling any backslashes already in front of one), so git's ``branch.<name>.description``
became ``branch.\\<name>.description`` and ``__init__`` became ``\\_\\_init\\_\\_`` in the
text that is embedded and searched. And it glues a code block to the text before it when
the ``<pre>`` sits in a list item or a definition (``Example usage: `````, ``- `````):
CommonMark opens no fence there, and the code is read as paragraph text.

`fences_alone` puts every opening fence that trafilatura glued to text on a line of its own;
`without_escapes` then undoes the inline escapes outside code, keeping only those whose loss
would change the structure the chunker reads:

* fenced code blocks and inline code spans stay verbatim (their backslashes are the page's
  own). Every ``<pre>`` is fenced (transforms/ingest/html.py), so an indented code block in
  trafilatura's output is prose that kept its source indentation (DocBook's notes): its
  escapes go too;
* an escape at the start of a line's content (after its indentation and list or quote
  markers) stays when the unescaped line would start another block than it does (``*
  item``, `````````, ``<pre>``...);
* in a heading, an escape stays when dropping it changes the heading's plain text, which is
  its section path (``\\_\\_gt\\_\\_`` would read as strong emphasis, ``\\<div>`` as an
  HTML tag; ``<name>``, ``<T>`` and ``<Self::Item>``, which name no HTML element and no
  link, the chunker reads as text: they lose their escapes);
* the escapes trafilatura adds before a line's first ``#``, ``>``, ``-``, ``+`` or ``1.``
  (``_escape_block_start``) and ``\\|`` in a table row are Markdown syntax, not escapes of
  text: they are not touched. The same escapes inside a line, after a space (a list item's
  paragraphs, which trafilatura writes on the item's line), start nothing and go.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator

from transforms.chunking.block_parser import block_parser

__all__ = ["fences_alone", "without_escapes"]

# the characters trafilatura escapes anywhere in prose (xml.py: _INLINE_SPECIAL_CHARS)
_INLINE_SPECIALS = frozenset("*_`~[]<")
# a line's indentation and list or block quote markers: what precedes its content
_CONTAINER_MARKERS = re.compile(r"(?:[ \t]*(?:[-+*]|\d{1,9}[.)])(?:[ \t]+|$)|[ \t]*>[ \t]?)*[ \t]*")
_FENCE_LINE = re.compile(r"[ \t]*(`{3,})[ \t]*$")  # what trafilatura writes, and a closing fence
_OPENING_FENCE = re.compile(r"[ \t]*(`{3,})[^`]*$")  # with an info string, if any
# an opening fence glued to the text before it: trafilatura writes "```" and a newline
_GLUED_OPENING = re.compile(r"^(.*?\S)[ \t]*(`{3,})$")


def _parse(text: str) -> list:
    return block_parser().parse(text)  # the block parser the chunker reads


def _closing_run(line: str, start: int, length: int) -> int:
    """End of the first run of exactly `length` backticks in `line` from `start`, or -1."""
    for m in re.finditer(r"`+", line[start:]):
        if len(m.group()) == length:
            return start + m.end()
    return -1


def _opening_fence(line: str) -> tuple[str, str] | None:
    """(text before, fence) when `line` ends with an opening fence glued to text, else None.

    A run that closes an inline code span of the same line (```` ``a``b``` ````) is no fence:
    the line's code spans are stepped over first, as CommonMark reads them.
    """
    m = _GLUED_OPENING.match(line)
    if m is None:
        return None
    before, fence = m.group(1), m.group(2)
    i = 0
    while i < len(before):
        if before[i] == "\\":
            i += 2
            continue
        if before[i] == "`":
            run = len(before[i:]) - len(before[i:].lstrip("`"))
            end = _closing_run(line, i + run, run)
            if end > len(before):
                return None  # the final run closes a span opened before it
            i = end if end > 0 else i + run
            continue
        i += 1
    return before, fence


def fences_alone(markdown: str) -> str:
    """Every opening fence trafilatura glued to text (``Example usage: `````) on its own line.

    A ``<pre>`` in a list item or a definition comes out as the text before it, a space and
    the fence: CommonMark opens no fence mid-line, so the code was read as paragraph text and
    its closing fence opened a code block that swallowed what followed. The fence goes to the
    start of the next line, where it opens a code block at the top level (trafilatura writes
    the code's lines unindented, so it could not continue the list item anyway); a line that
    held only list markers before the fence (``- `````, a definition that starts with code)
    becomes the fence alone. Only a fence that a later line closes is moved.

    The list a code block broke out of goes on after it (Javadoc's ``    - Parameters:``
    under each example) at the same indentation, which after a top-level block reads as an
    indented code block: the lines up to the next blank line lose the first one's
    indentation when it is four spaces or more, so they are a list again.
    """
    if "```" not in markdown:
        return markdown
    lines = markdown.split("\n")
    last_line_of: dict[str, int] = {}  # fence -> the last line that is that fence alone
    for i, line in enumerate(lines):
        if m := _FENCE_LINE.match(line):
            last_line_of[m.group(1)] = i
    out: list[str] = []
    fence: str | None = None  # the fence of the code block we are in
    after_block = False  # the line before closed a code block at the margin
    margin = 0  # indentation taken off the lines after a code block, up to a blank line
    for i, line in enumerate(lines):
        if fence is not None:
            out.append(line)
            m = _FENCE_LINE.match(line)
            if m and line == line.lstrip() and m.group(1).startswith(fence):
                fence, after_block = None, True
            continue
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip():
            margin = 0
        elif after_block:
            margin = indent if indent >= 4 else 0
        after_block = False
        line = line[min(margin, indent) :]
        m = _OPENING_FENCE.match(line)
        if m:
            fence = m.group(1)
            out.append(line)
            continue
        glued = _opening_fence(line)
        if glued is None or last_line_of.get(glued[1], -1) <= i:
            out.append(line)
            continue
        before, fence = glued
        if _CONTAINER_MARKERS.fullmatch(before + " "):
            out.append(fence)  # only a list marker before it: the fence alone
        else:
            out.extend((before, fence))
    return "\n".join(out)


_ESCAPED_TICK = re.compile(r"\\(?:\\\\)*`")  # an odd run of backslashes and a backtick


def _escaped_ticks(line: str, i: int, keep: set[int], out: list[str], undone: list[int]) -> int:
    """Undo the escaped backticks that start at `i`, all or none; returns where they end.

    Backticks of the page next to a code span's (`` `command-list`\\``envsubst` ``) stay
    escaped: unescaped, they would join its run and pair the spans differently.
    """
    group: list[re.Match] = []
    k = i
    while m := _ESCAPED_TICK.match(line, k):
        group.append(m)
        k = m.end()
    if (i > 0 and line[i - 1] == "`") or line[k : k + 1] == "`":
        out.append(line[i:k])
        return k
    for m in group:
        if m.start() in keep:
            out.append(m.group())
        else:
            out.append("\\" * ((len(m.group()) - 2) // 2) + "`")
            undone.append(m.start())
    return k


def _unescaped(line: str, start: int, keep: set[int] | None = None) -> tuple[str, list[int]]:
    """`line` with trafilatura's inline escapes from `start` on undone, code spans verbatim.

    A run of 2k+1 backslashes before an inline special is trafilatura's escape of k backslashes
    of the page and the character; it becomes those k and the character. Escapes whose run
    starts at an offset in `keep` stay. Also returns the offsets of the runs undone.
    """
    out = [line[:start]]  # the pieces of the result
    undone: list[int] = []
    i, n = start, len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            j = i
            while j < n and line[j] == "\\":
                j += 1
            run = j - i
            if j < n and line[j] == "`" and run % 2:
                i = _escaped_ticks(line, i, keep or set(), out, undone)
                continue
            if j < n and line[j] in _INLINE_SPECIALS and run % 2 and i not in (keep or ()):
                out.append("\\" * (run // 2) + line[j])
                undone.append(i)
                i = j + 1
            elif run % 2:  # the run and the character it escapes, as they are
                out.append(line[i : j + 1])
                i = j + 1
            else:  # backslashes of the page: what follows is read on its own
                out.append(line[i:j])
                i = j
            continue
        if ch == "`":
            j = i
            while j < n and line[j] == "`":
                j += 1
            end = _closing_run(line, j, j - i)
            if end > 0:  # an inline code span: verbatim
                out.append(line[i:end])
                i = end
            else:
                out.append(line[i:j])
                i = j
            continue
        out.append(ch)
        i += 1
    return "".join(out), undone


# HTML blocks that run to an end marker (types 1 to 5) or may interrupt a paragraph (type 6)
_HTML_BLOCK_START = re.compile(
    r"<(?:(?:script|pre|style|textarea)(?:\s|>|$)|!--|\?|![A-Za-z]|!\[CDATA\[)"
    r"|</?(?:address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd"
    r"|details|dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset"
    r"|h[1-6]|head|header|hr|html|iframe|legend|li|link|main|menu|menuitem|nav|noframes|ol"
    r"|optgroup|option|p|param|section|source|summary|table|tbody|td|tfoot|th|thead|title|tr"
    r"|track|ul)(?:\s|/?>|$)",
    re.IGNORECASE,
)


def _block_start(content: str, alone: bool) -> str:
    """The kind of block `content`, read as a line of its own, starts ("paragraph_open"...).

    A line that is one HTML tag (``<commit>``, CommonMark's HTML block of type 7) counts as a
    paragraph when it is `alone` (its block ends with it): such a block cannot interrupt a
    paragraph and ends at a blank line, as one does, but unlike one it runs on over a fence,
    a heading or a list item.
    """
    tokens = _parse(content)
    if not tokens:
        return "reference"  # a link reference definition: no block at all
    kind = tokens[0].type
    if kind == "html_block" and alone and _HTML_BLOCK_START.match(content) is None:
        return "paragraph_open"
    return kind


def _could_define(rest: str, following: Iterable[str]) -> bool:
    """Whether ``[`` and `rest`, with the lines `following` it in its paragraph, could be a
    link reference definition: its label closes with ``]:`` before any other bracket, and a
    destination follows, on that line or the next (the Linux kernel's "[You can ignore ...
    anyway!]:" before a listing is a paragraph: no escape needed)."""
    pieces = itertools.chain([rest], following)
    for piece in pieces:
        if not piece.strip():
            return False  # the paragraph ends: no label
        piece = re.sub(r"\\(?=[][])", "", piece)  # an escaped bracket is one once unescaped
        if bracket := re.search(r"[][]", piece):
            if bracket.group() != "]" or piece[bracket.end() : bracket.end() + 1] != ":":
                return False
            return bool(piece[bracket.end() + 1 :].strip() or next(pieces, "").strip())
    return False


_LIST_ITEM = re.compile(r"[ \t]*(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)")


def _prose_line(line: str, following: Iterator[str]) -> str:
    """A line of prose without its escapes, but for those that keep it the block it starts.

    Only the first character of a line's content (after its indentation and container
    markers) decides the block it starts, and only one of trafilatura's specials there can
    make that another (``* item``, ````` ``` `````, ``<div>``, ``[a]: b``...): then the
    escapes are kept from the left, one by one, until the line starts what it started before.
    An escaped ``[`` there stays when it could start a link reference definition, whose label
    may go on over the next lines (`following`, the lines after this one).
    """
    next_line = next(following, "")
    rest = itertools.chain([next_line], following)
    start = _CONTAINER_MARKERS.match(line).end()
    text, undone = _unescaped(line, start)
    if not undone or text[start : start + 1] not in _INLINE_SPECIALS:
        return text
    if undone[0] == start and text[start] == "[" and _could_define(text[start + 1 :], rest):
        return _unescaped(line, start, keep={start})[0]
    # the block ends with the line: a blank line follows, or the line is a list item and the
    # next one a new item of its list or of one around it
    alone = not next_line.strip() or (
        _LIST_ITEM.match(line) is not None
        and _LIST_ITEM.match(next_line) is not None
        and len(next_line) - len(next_line.lstrip()) < start
    )
    before = _block_start(line[start:], alone)
    keep: set[int] = set()
    for offset in undone:
        if _block_start(text[start:], alone) == before:
            return text
        keep.add(offset)
        text, _ = _unescaped(line, start, keep=keep)
    return text


_HEADING_MARK = re.compile(_CONTAINER_MARKERS.pattern + r"#{1,6}(?:[ \t]+|$)")
_AUTOLINK = re.compile(r"<[^<>\s]*[:@][^<>\s]*>")


def _tag_escapes(line: str, undone: list[int]) -> set[int]:
    """The escapes of ``<`` in `undone` that start, unescaped, a tag of an HTML element or an
    autolink (a ``<T>`` that names no element is text in a heading's path, as the chunker
    reads it: `transforms.chunking.markdown._heading_text`)."""
    from markdown_it.common.html_re import HTML_TAG_RE  # as markdown-it reads inline HTML

    from transforms.chunking.markdown import _is_html_tag, _is_link

    out = set()
    for offset in undone:
        at = offset + len(line[offset:]) - len(line[offset:].lstrip("\\"))
        if line[at] != "<":
            continue
        tag = HTML_TAG_RE.match(line, at)
        link = _AUTOLINK.match(line, at)
        if (tag and _is_html_tag(tag.group())) or (link and _is_link(link.group()[1:-1])):
            out.add(offset)
    return out


def _heading_line(line: str) -> str:
    """A heading without the escapes whose loss leaves its plain text (its section path) as is.

    An unescaped ``\\<div>`` would be an HTML tag, ``\\_\\_gt\\_\\_`` strong emphasis: both
    drop out of the heading's text (``<T>``, no HTML element, stays in it). Tried first: all
    escapes go but those of a ``<`` that starts an HTML element's tag or a link. When
    that changes the text, the escapes go by character (every ``_``, then every ``*``...),
    each kind only if the text stays the same without it.
    """
    from transforms.chunking.markdown import _heading_text  # as the chunker reads a heading

    m = _HEADING_MARK.match(line)
    if m is None:
        return line
    start = m.end()
    text, undone = _unescaped(line, start)
    if not undone:
        return text
    original = _heading_text(line[start:], {})
    tags = _tag_escapes(line, undone)
    text, _ = _unescaped(line, start, keep=tags)
    if _heading_text(text[start:], {}) == original:
        return text
    keep = set(undone)
    by_char: dict[str, set[int]] = {}
    for offset in undone:
        char = line[offset + len(line[offset:]) - len(line[offset:].lstrip("\\"))]
        by_char.setdefault("[" if char == "]" else char, set()).add(offset)
    for group in by_char.values():
        candidate, _ = _unescaped(line, start, keep=keep - (group - tags))
        if _heading_text(candidate[start:], {}) == original:
            keep -= group - tags
    return _unescaped(line, start, keep=keep)[0]


def without_escapes(markdown: str) -> str:
    """trafilatura's Markdown without the backslash escapes it added to the page's text.

    Code (fenced blocks, inline spans) is left verbatim; an escape stays where its loss would
    change the blocks or the section paths the chunker reads (see the module's docstring).
    """
    if "\\" not in markdown:
        return markdown
    lines = markdown.split("\n")
    code: set[int] = set()
    heading: set[int] = set()
    for tok in _parse(markdown):
        if tok.map is None:
            continue
        if tok.type == "fence":
            code.update(range(*tok.map))
        elif tok.type == "heading_open":
            heading.update(range(*tok.map))
    for i, line in enumerate(lines):
        if i in code or "\\" not in line:
            continue
        if i in heading:
            lines[i] = _heading_line(line)
        else:
            line = _no_heading_escape_undone(line)
            line = _prose_line(line, (lines[j] for j in range(i + 1, len(lines))))
            lines[i] = _inner_block_escapes_undone(line)
    return "\n".join(lines)


# an escaped "#" run that opens a line's content and no heading: text follows it at once
_NO_HEADING_ESCAPE = re.compile(_CONTAINER_MARKERS.pattern + r"(\\)#+[^#\s]")


def _no_heading_escape_undone(line: str) -> str:
    """`line` without the backslash before its first ``#`` where no heading could start.

    trafilatura escapes a text node's leading ``#`` that a space or the node's end follows
    (xml.py: _escape_block_start). YARD writes a method's name in its summaries as
    ``#<strong>parse</strong>``: the node "#" ends there, and the item read
    ``- \\#**parse**(content, ...)``, though ``#**parse**`` starts no heading (CommonMark's
    needs a space after its marks)."""
    m = _NO_HEADING_ESCAPE.match(line)
    return line if m is None else line[: m.start(1)] + line[m.end(1) :]


# trafilatura's escape of a block's first marker (xml.py: _escape_block_start) after a space
# inside a line: "\\- ", "\\+ ", "\\# ", "\\>", "1\\. " (the backslash ends the match)
_INNER_BLOCK_ESCAPE = re.compile(
    r"(?<=[ \t])(?:\d{1,9}\\(?=[.)](?:[ \t]|$))|\\(?=(?:[-+]|#{1,6})(?:[ \t]|$)|>))"
)


def _inner_block_escapes_undone(line: str) -> str:
    """`line` without the block-start escapes trafilatura wrote inside it, outside code spans.

    trafilatura escapes a paragraph's first marker ("- If raw is not found...", Erlang's
    release notes, which write their own dashes) and then writes the paragraphs of a list item
    on the item's line, each after a space: "Documentation improvements: \\- documentation for
    ...". A marker there starts no block, and the backslash is no text of the page. One at
    the start of the line's content (after its indentation and markers) stays: it is syntax.
    """
    if "\\" not in line:
        return line
    content = _CONTAINER_MARKERS.match(line).end()
    undone: list[int] = []  # offsets of the backslashes that go
    prose_from, i, n = content, content, len(line)

    def prose(end: int) -> None:
        for m in _INNER_BLOCK_ESCAPE.finditer(line, prose_from, end):
            if m.start() > content:
                undone.append(m.end() - 1)

    while i < n:
        if line[i] == "\\":
            i += 2
        elif line[i] == "`":
            run = len(line[i:]) - len(line[i:].lstrip("`"))
            end = _closing_run(line, i + run, run)
            if end < 0:
                i += run
                continue
            prose(i)
            i = prose_from = end  # a code span, verbatim
        else:
            i += 1
    prose(n)
    for offset in reversed(undone):
        line = line[:offset] + line[offset + 1 :]
    return line
