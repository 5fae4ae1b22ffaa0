"""Markdown chunker: heading sections of whole markdown-it blocks, packed to a token budget.

Block structure comes from markdown-it-py's token stream (each top-level token's `.map` line
range), never from regexes over the text. Blocks that fit the budget are never cut; a block too
large falls back to line packing (code, tables, HTML) or to the recursive prose splitter.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass, field

import numpy as np

from transforms.chunking.base import Chunker, ChunkSpan, common_prefix, trim
from transforms.chunking.block_parser import block_parser
from transforms.chunking.split import (
    LINE,
    SENTENCE,
    check_deadline,
    even_split,
    recursive_split,
    with_overlap,
)
from transforms.chunking.tokens import TokenizedText
from transforms.ingest.definitions import Definition, definitions

# markdown-it normalizes \r\n and lone \r to \n before it numbers lines, so `.map` counts these.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_FRONT_MATTER_OPEN = re.compile(r"---[ \t]*(?:\r\n|\r|\n)")
_FRONT_MATTER_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)

# How a block too large for the budget is cut.
LINES = "lines"  # code, tables, raw HTML: only between lines (a single over-long line is cut)
PROSE = "prose"  # everything else: the recursive splitter (blank line > line > sentence > ...)

_LINE_BLOCKS = frozenset({"fence", "code_block", "table_open", "html_block"})
# A MyST target, `(label)=` on its own line: a name for the heading under it (pip's docs open
# most pages with one), so it starts that heading's section instead of ending the one before.
_MYST_TARGETS = re.compile(r"(?:\([^()\s]+\)=[ \t]*(?:\r\n|\r|\n)?)+")
# A paragraph of bold text alone (`**Deprecated:**`, `**Public Member Functions**`, SQLite's
# FAQ questions, whose HTML source wraps 11 of 28 over two lines): the HTML extraction writes a
# heading inside a list item, definition or quote, and a Doxygen summary's heading, so; it
# introduces the block after it. At the top level it heads the blocks up to the next label or
# heading (`Section.fresh`, the label the last entry of the path).
_LABEL = re.compile(r"\*\*(?:(?!\*\*)[^\n]|\n(?![ \t]*\n))+\*\*:?[ \t]*")
_LIST_BLOCKS = frozenset({"bullet_list_open", "ordered_list_open"})


@dataclass(frozen=True)
class Block:
    """One top-level block as character offsets; `parts` are its list items (lists only)."""

    start: int
    end: int
    fallback: str = PROSE
    heading: bool = False
    parts: tuple[tuple[int, int], ...] = ()
    label: bool = False  # a bold label alone on its line: it goes with the block after it
    # a paragraph that ends with a colon ("For example:", "The members are:"): it introduces
    # the block after it, and no chunk ends with it where that block starts the next
    lead_in: bool = False


@dataclass
class Section:
    """A heading (its first block) and the blocks up to the next heading, or a definition
    (`definition`: one block, its term the last entry of `path`)."""

    path: tuple[str, ...]
    blocks: list[Block] = field(default_factory=list)
    definition: Definition | None = None
    # starts a chunk: the first part of a definition cut in parts, a label's unit
    fresh: bool = False
    # a part of a definition cut in parts: that definition's path (no chunk holding a part
    # goes on past the definition's own section, so every piece has the term in its path)
    unit: tuple[str, ...] = ()


def line_starts(text: str) -> list[int]:
    """Offsets where each line starts, numbered as markdown-it numbers them."""
    return [0, *(m.end() for m in _LINE_BREAK.finditer(text))]


def front_matter_end(text: str) -> int:
    """End offset of a leading YAML front matter block (`---` ... `---`), or 0 if none."""
    opening = _FRONT_MATTER_OPEN.match(text)
    if not opening:
        return 0
    closing = _FRONT_MATTER_CLOSE.search(text, opening.end())
    return closing.end() if closing else 0


def _is_html_tag(markup: str) -> bool:
    """Whether inline HTML `markup` (``<a href=...>``, ``</sup>``, ``<T>``) is a tag of an HTML
    element, written in lower case: Rust's ``<U>``, ``<P as Deref>`` and ``<B>`` are type
    parameters, not underline, paragraph and bold."""
    from lxml.html.defs import tags  # every element name of HTML 4 and 5

    name = re.match(r"</?([A-Za-z][A-Za-z0-9-]*)", markup)
    return name is None or name.group(1) in tags


def _is_link(target: str) -> bool:
    """Whether an autolink's target is a link (``https://...``, ``mailto:``, an address) and
    not text in angle brackets that CommonMark reads as one (Rust's ``<Self::Item>``)."""
    return "://" in target or target.startswith("mailto:")


def _edge(token, last: bool) -> str:
    """The character of `token` next to a delimiter before it (`last`) or after it."""
    if token.type in ("text", "text_special") and token.content:
        return token.content[-1] if last else token.content[0]
    return "`" if token.type == "code_inline" else ""


def _between_punctuation(children: list, i: int) -> bool:
    before = _edge(children[i - 1], last=True) if i > 0 else ""
    after = _edge(children[i + 1], last=False) if i + 1 < len(children) else ""
    return all(c and not (c.isalnum() or c.isspace()) for c in (before, after))


def _literal_underscores(children: list) -> set[int]:
    r"""Indexes of the ``_`` emphasis delimiters of `children` that are text, not emphasis.

    CommonMark lets ``_`` open or close emphasis between two punctuation characters, where no
    writer means emphasis: Rust's ``impl<'_, T> Debug for Iter<'_, T>`` or ``f<'_>(x: &'_
    str)`` read as ``impl<', T> ...``, so the escapes ``'\_`` stayed in 181 of the zoo's
    rustdoc headings to keep the section path right. A pair of delimiters one of which
    stands between punctuation is text.
    """
    out: set[int] = set()
    opened: list[int] = []
    for i, child in enumerate(children):
        if child.markup not in ("_", "__"):
            continue
        if child.type.endswith("_open"):
            opened.append(i)
        elif child.type.endswith("_close") and opened:
            start = opened.pop()
            if _between_punctuation(children, start) or _between_punctuation(children, i):
                out.update((start, i))
    return out


def _heading_text(source: str, env: dict) -> str:
    """A heading as plain text: link targets, emphasis markers and HTML tags are not part of a
    path; a "tag" that names no HTML element, or an "autolink" that is no link, is text in
    angle brackets (Rust's ``downcast<T>`` and ``Option<Self::Item>``, git's
    ``browser.<tool>.path``), and stays. So does an empty link to nowhere, ``[]()``: C++'s
    ``operator[]()`` (Doxygen's member headings), which would otherwise read "operator"."""
    md = block_parser()
    parts = []
    children = md.inline.parse(source, md, env, [])
    literal = _literal_underscores(children)
    for i, child in enumerate(children):
        # text_special: a backslash escape (`\_\_gt\_\_` is `__gt__`), which people search for
        text = child.type in ("text", "code_inline", "text_special")
        if text or (child.type == "html_inline" and not _is_html_tag(child.content)):
            parts.append(child.content)
        elif i in literal:
            parts.append(child.markup)  # Rust's lifetime `impl<'_, T> ... Iter<'_, T>`
        elif child.markup == "autolink" and not _is_link(child.attrs.get("href", "")):
            parts.append("<" if child.type == "link_open" else ">")  # `Option<Self::Item>`
        elif (
            child.type == "link_open"
            and not child.attrs.get("href")
            and i + 1 < len(children)
            and children[i + 1].type == "link_close"
        ):
            parts.append("[]()")  # `operator[]()`
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    plain = " ".join("".join(parts).split())
    return plain or " ".join(source.split())


def heading_text(source: str) -> str:
    """A heading's source (the text after its `#`s) as the plain text a section path holds."""
    return _heading_text(source, {})


def headings(text: str) -> list[tuple[int, int, str]]:
    """(line number, level, plain text) of every heading of `text`, in order."""
    env: dict = {}
    tokens = block_parser().parse(text, env)
    return [
        (tok.map[0], int(tok.tag[1:]), _heading_text(tokens[i + 1].content, env))
        for i, tok in enumerate(tokens)
        if tok.type == "heading_open" and tok.map is not None
    ]


_COMMENTS = re.compile(r"(?:\s*<!--(?:(?!-->).)*-->)+\s*", re.DOTALL)
_BLANK_LINES = re.compile(r"(?:[ \t]*(?:\r\n|\r|\n))+")


def _without_spans(text: str, drop: list[tuple[int, int]]) -> str:
    """`text` without the [start, end) spans of `drop` (in order, not overlapping)."""
    if not drop:
        return text
    parts, pos = [], 0
    for start, end in drop:
        parts.append(text[pos:start])
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def without_html_comments(text: str) -> str:
    """`text` without its HTML comment blocks (a block that is one or more comments and
    nothing else, as markdown-it reads blocks; comments in code or in a paragraph stay).

    Node.js's API docs hold each method's history in one (`<!-- YAML added: v0.1.25
    changes: ... -->`): not rendered, not what anyone searches, and 387 of its chunks.
    """
    if "<!--" not in text:
        return text
    starts = line_starts(text)
    drop: list[tuple[int, int]] = []
    for tok in block_parser().parse(text):
        if tok.type != "html_block" or tok.map is None or tok.level != 0:
            continue
        if _COMMENTS.fullmatch(tok.content):
            end = starts[tok.map[1]] if tok.map[1] < len(starts) else len(text)
            blank = _BLANK_LINES.match(text, end)  # and the blank lines after it
            drop.append((starts[tok.map[0]], blank.end() if blank else end))
    return _without_spans(text, drop)


def without_link_definitions(text: str) -> str:
    """`text` without its blocks of link reference definitions (``[label]: url``), which
    Markdown renders to nothing, unless a heading links through one of the block's labels.

    Node.js's API docs end each page with a hundred of them (``[`url.format()`]:
    #urlformaturlobject``): 12 chunks of the development set were nothing else, and they
    ranked above the answer's chunk for 7 of its questions, since they list every API name
    of the page. A block a heading needs (a README's title badge ``[![npm][npm-svg]][npm]``)
    stays whole, so every heading reads as before. Definitions inside a list or a quote stay.
    """
    if "]:" not in text:
        return text
    md = block_parser()
    env: dict = {}
    tokens = md.parse(text, env)
    references = env.get("references") or {}
    if not references:
        return text
    starts = line_starts(text)
    mapped = [0] * (len(starts) + 1)  # lines that some top-level block covers
    for tok in tokens:
        if tok.map is not None and tok.level == 0 and tok.nesting >= 0:
            mapped[tok.map[0]] += 1
            mapped[tok.map[1]] -= 1
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    read = [_heading_text(h, env) for h in headings]  # each heading as it reads now
    drop: list[tuple[int, int]] = []
    line, depth, n = 0, 0, len(starts)
    while line < n:
        depth += mapped[line]
        if depth or not text[starts[line] : starts[line + 1] if line + 1 < n else None].strip():
            line += 1
            continue
        first = line  # a line no block maps: where a run of definitions starts
        while line + 1 < n and depth + mapped[line + 1] == 0:
            line += 1
            depth += mapped[line]
        end = starts[line + 1] if line + 1 < n else len(text)
        gap = text[starts[first] : end]
        gap_env: dict = {}
        if md.parse(gap, gap_env) or not gap_env.get("references"):
            line += 1
            continue  # not definitions alone (never seen: markdown-it maps every other block)
        rest = {
            "references": {k: v for k, v in references.items() if k not in gap_env["references"]}
        }
        if all(_heading_text(h, rest) == r for h, r in zip(headings, read, strict=True)):
            drop.append((starts[first], end))
        line += 1
    return _without_spans(text, drop)


def markdown_sections(text: str) -> list[Section]:
    """Split `text` into heading sections of top-level blocks that together cover all its text.

    Every non-whitespace character lies in some block: text markdown-it does not map (link
    reference definitions, front matter) becomes a block of its own.
    """
    starts = line_starts(text)

    def offset(line: int) -> int:
        return starts[line] if line < len(starts) else len(text)

    # CommonMark reads front matter as a rule and a setext heading; hide it from the parser
    # (same number of lines, so `.map` still matches) and keep it as an unmapped block.
    fm_end = front_matter_end(text)
    source = text
    if fm_end:
        source = "\n" * len(_LINE_BREAK.findall(text, 0, fm_end)) + text[fm_end:]
    env: dict = {}  # link reference definitions, for headings that use them
    tokens = block_parser().parse(source, env)

    sections = [Section(())]
    stack: list[tuple[int, str]] = []  # (heading level, heading text) of the enclosing headings
    pos = 0

    def add_gap(end: int) -> None:
        gs, ge = trim(text, pos, end)
        if gs < ge:
            sections[-1].blocks.append(Block(gs, ge))

    for i, tok in enumerate(tokens):
        if not i % 256:
            check_deadline()
        if tok.map is None:
            continue
        if tok.level == 1 and tok.type == "list_item_open" and sections[-1].blocks:
            last = sections[-1].blocks[-1]
            if last.parts or last.fallback == "list":
                item = max(offset(tok.map[0]), last.start)
                sections[-1].blocks[-1] = Block(
                    last.start, last.end, "list", parts=(*last.parts, item)
                )
            continue
        if tok.level != 0 or tok.nesting < 0:
            continue
        start, end = max(offset(tok.map[0]), pos), offset(tok.map[1])
        if end <= start:
            continue
        add_gap(start)
        pos = end
        while end > start and text[end - 1].isspace():  # trailing blank lines are not the block
            end -= 1
        if end <= start:
            continue
        if tok.type == "heading_open":
            level = int(tok.tag[1:])
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, _heading_text(tokens[i + 1].content, env)))
            before = sections[-1].blocks
            if (
                before
                and before[-1].fallback == PROSE
                and not before[-1].heading
                and _MYST_TARGETS.fullmatch(text, before[-1].start, before[-1].end)
            ):
                start = before.pop().start
            sections.append(Section(tuple(t for _, t in stack)))
            sections[-1].blocks.append(Block(start, end, heading=True))
        elif tok.type in _LIST_BLOCKS:
            sections[-1].blocks.append(Block(start, end, "list"))
        else:
            kind = LINES if tok.type in _LINE_BLOCKS else PROSE
            label = tok.type == "paragraph_open" and bool(_LABEL.fullmatch(text, start, end))
            lead_in = tok.type == "paragraph_open" and not label and text[end - 1] == ":"
            if label:  # a run-in heading: its blocks a unit, the label in their path
                name = _heading_text(tokens[i + 1].content, env).rstrip(":").strip()
                sections.append(Section((*(t for _, t in stack), name), fresh=True))
            sections[-1].blocks.append(Block(start, end, kind, label=label, lead_in=lead_in))
    add_gap(len(text))
    for section in sections:
        if len(section.blocks) == 1 and section.blocks[0].label:
            # a label of nothing (SQLite's "**commit-stmt:**" above a syntax diagram, an
            # image): no unit to start a chunk, it is content of the chunk it falls in
            section.fresh = False
    sections = [d for s in sections for d in _definition_sections(text, s, env)]
    return [_with_item_ranges(text, s) for s in sections if s.blocks]


def _gap(text: str, start: int, end: int) -> list[Block]:
    s, e = trim(text, start, end)
    return [Block(s, e)] if s < e else []


def _definition_sections(text: str, section: Section, env: dict) -> list[Section]:
    """`section` with each definition of its lists (`transforms.ingest.definitions`) a section of
    its own, the definition's term appended to the path; the blocks after a definition go on
    under the section's own path."""
    out = [Section(section.path, fresh=section.fresh)]
    for block in section.blocks:
        found = definitions(text, block.start, block.end) if block.fallback == "list" else []
        if not found:
            out[-1].blocks.append(block)
            continue
        pos = block.start
        for d in found:
            out[-1].blocks.extend(_gap(text, pos, d.start))
            out.append(_definition_section(text, d, section.path, env))
            out.append(Section(section.path))
            pos = d.end
        out[-1].blocks.extend(_gap(text, pos, block.end))
    return [s for s in out if s.blocks]


_CODE_SPAN_OR_NAME_CHAR = re.compile(r"(`+).*?(?<!`)\1(?!`)|(?<!\\)[_<]")


def _escaped_name_char(m: re.Match) -> str:
    return m.group() if m.group(1) else "\\" + m.group()


def definition_term(d: Definition, env: dict | None = None) -> str:
    """A definition's term as plain text, as it enters the section path."""
    # trafilatura writes emphasis with "*" and drops HTML: an underscore of a term is the
    # name's (__repr__), a "<" the text's (-b <browser>)
    return _heading_text(_CODE_SPAN_OR_NAME_CHAR.sub(_escaped_name_char, d.term), env or {})


def definition_terms(text: str) -> set[str]:
    """The terms of every definition of `text`, nested ones too, as section path entries."""
    out: set[str] = set()
    todo = [s.definition for s in markdown_sections(text) if s.definition is not None]
    while todo:
        d = todo.pop()
        out.add(definition_term(d))
        todo.extend(d.parts)
    return out


def _definition_section(text: str, d: Definition, path: tuple[str, ...], env: dict) -> Section:
    return Section((*path, definition_term(d, env)), [Block(d.start, d.end)], d)


def definition_parts(text: str, section: Section) -> list[Section]:
    """A definition too large for a chunk as sections: its term and description up to the
    first definition nested in it, each nested definition (its term appended to the path),
    and the text between and after them, under the definition's path."""
    d = section.definition
    if d is None or not d.parts:
        return [section]
    env: dict = {}
    out = [Section(section.path, fresh=True)]
    pos = d.start
    for part in d.parts:
        out[-1].blocks.extend(_gap(text, pos, part.start))
        out.append(_definition_section(text, part, section.path, env))
        out.append(Section(section.path))
        pos = part.end
    out[-1].blocks.extend(_gap(text, pos, d.end))
    for part in out:
        part.unit = section.path
    return [s for s in out if s.blocks]


def _with_item_ranges(text: str, section: Section) -> Section:
    """Turn each list's item start offsets into (start, end) ranges tiling the list."""
    blocks = []
    for b in section.blocks:
        if b.fallback != "list":
            blocks.append(b)
            continue
        item_starts = sorted(set(b.parts) | {b.start})
        ranges = []
        for s, nxt in zip(item_starts, [*item_starts[1:], b.end], strict=True):
            s, e = s, nxt
            while e > s and text[e - 1].isspace():
                e -= 1
            if e > s:
                ranges.append((s, e))
        blocks.append(Block(b.start, b.end, PROSE, parts=tuple(ranges)))
    return Section(section.path, blocks, section.definition, section.fresh)


SIBLING_JOINER = ", "


def sibling_path(path: tuple[str, ...], members: list[tuple[str, ...]]) -> tuple[str, ...]:
    """`path`, the common prefix of a chunk's sections, and when the chunk holds several
    sections below it (merged siblings: methods, exception classes), their headings at the
    next level, joined: ("API", "Group.add_command, Group.add_group"). Else `path` as is."""
    depth = len(path)
    names: list[str] = []
    for member in members:
        if len(member) > depth and member[:depth] == path:
            name = member[depth]
            if name not in names:
                names.append(name)
    if len(names) < 2:
        return path
    return (*path, SIBLING_JOINER.join(names))


def _heading_only(section: Section) -> bool:
    """A heading whose section holds nothing else: its content is in the sections after it."""
    return len(section.blocks) == 1 and section.blocks[0].heading


def _introduces_only(section: Section) -> bool:
    """A heading and a lead-in alone ("## Options", "createdb accepts the following
    command-line arguments:"): its content is in the sections below it."""
    blocks = section.blocks
    return len(blocks) == 2 and blocks[0].heading and blocks[1].lead_in


def _label_only(section: Section) -> bool:
    """A label of nothing: another label or a heading follows it (a label whose blocks are
    definitions is alone in its section too, but heads them: it starts a chunk)."""
    return len(section.blocks) == 1 and section.blocks[0].label and not section.fresh


@dataclass
class _HeldHeadings:
    """Heading-only sections at the open chunk's end, each below the one before: their span
    and the first one's path, and the open chunk's end, members and path before them."""

    start: int
    end: int
    path: tuple[str, ...]
    before_end: int
    before_members: list[tuple[str, ...]]
    before_path: tuple[str, ...]
    last: tuple[str, ...]  # the path of the last of them, each below the one before
    introduces: bool = False  # the last of them ends with a lead-in: it heads what is below it
    # the held headings whose run of sibling headings of nothing this one continues
    run: _HeldHeadings | None = None


def _below(path: tuple[str, ...], above: tuple[str, ...]) -> bool:
    return len(path) > len(above) and path[: len(above)] == above


def _headed_by(section: Section, heading: tuple[str, ...]) -> bool:
    """Whether the heading-only section at `heading` heads `section`: `section` lies below it,
    or is a sibling with content of its own (Doxygen's "Member Function Documentation" before
    "make()", both `<h2>`). A heading before a sibling heading alone heads nothing: it is
    content (rustdoc's list of implementations, one `<h3>` each)."""
    if _below(section.path, heading):
        return True
    return len(section.path) == len(heading) and not _heading_only(section)


def _first_block(section: Section) -> Block:
    """The section's first block after its heading (the heading when it is alone)."""
    blocks = section.blocks
    return blocks[1] if blocks[0].heading and len(blocks) > 1 else blocks[0]


class MarkdownChunker(Chunker):
    """Markdown: heading sections, whole blocks (code, tables, list items) packed to the budget.

    Choices:
    - Structural chunks have no overlap: they end where a block ends, so nothing is cut that
      overlap would have to repair. Only pieces of a block too large for the budget overlap,
      by up to `chunk_overlap` tokens, inside that block (code and tables by whole lines).
    - A section that fits whole into the chunk before it is merged into it, but only when the
      two share at least their top heading; the merged chunk's `section_path` is the common
      prefix of the merged sections' paths (siblings ## B and ## D under # A give ("A",)).
      Sections under different top-level headings, and the text before the first heading,
      are not merged, so a path is never emptied by a merge.
    - Except a small chunk (under `small_chunk_tokens`: a title and its one-line purpose, a
      bare heading, a short tail): it goes on into the next section, whatever its path, as
      the lead of the section's first piece when that section's first block is too large.
      The chunk's path is the common prefix, else (or for a bare heading) the next section's.
      It stays alone only where joining would cut a block that fits whole; headings alone
      join even then, leading the block's first piece, and so does the document's small
      first chunk (a title and its purpose line: PostgreSQL's 13-token "CREATE TRIGGER —
      define a new trigger" stood alone before its synopsis and outranked the page's
      Description). The document's small last chunk joins
      the chunk before it when that has room.
    - The document's first chunk, not small (a title, its purpose line and a synopsis that
      fit together), goes on with the heading and first blocks of the next section while
      they fit, as a section that fits whole would: a reference page's opening (a man
      page's NAME and SYNOPSIS, PostgreSQL's synopsis) shares a chunk with the first
      paragraph of its description, which says what the page is for. That section is cut
      even where it would fit a chunk alone; its rest starts the next chunk, named by it.
      Later sections are not cut to fill a chunk.
    - No chunk ends with a heading whose section holds nothing else and whose content starts
      the next chunk (PostgreSQL's "## Parameters" before its definitions, Doxygen's "Member
      Function Documentation" before the members): the chunk ends before it and it goes on
      with what it heads, leading the first piece of a block that fits a chunk alone but not
      after it, as a bare heading does (Erlang's "### 1.4 Kernel 8.5" before "#### Fixed
      Bugs"), unless the headings would take half the chunk. Such a heading is not named in
      a merged chunk's path; one before a sibling heading of nothing (rustdoc's implementors)
      heads nothing and is content, unless a sibling with content ends the run: a
      function's several signatures before its one description (Erlang's `open()`,
      `open(Port)`, `open(Opts)`, `open(Port, Opts)`) all go on with it. A chunk of headings
      alone goes on into what they head while they take at most half a piece, small or
      not. Nor does a chunk end with a heading of text of its own,
      where a small chunk went on into its section or the opening was filled with it: a
      lead-in or a label right after the heading takes it along when it goes on (click's
      "## Differences" before "... only available for options:"), and a first block that
      does not fit after it has it as its lead.
    - No chunk ends with a lead-in, a paragraph that ends with a colon ("A common example is
      opening a file:", "createdb accepts the following command-line arguments:"), where
      what it introduces (the next block of its section, or the definitions below it)
      starts the next chunk: the chunk ends before it, and it goes on with that block, or
      leads its first piece where the block is cut anyway. A heading and its lead-in alone
      are held as headings alone are. A block that fits a chunk alone is not cut for a
      lead-in: the lead-in then stays with the text before it.
    - A block cut in pieces does not begin with a short line or paragraph alone (a
      definition's term line before its description's one long line): the first piece takes
      the first sentences after it while they fit, so that no chunk ends with a term whose
      description starts the next.
    - A piece of a definition cut in parts (too large for a chunk) does not go on past the
      definition's own section (a new heading), and a chunk that starts in a definition and
      goes on only into the text after it is named by it: every piece has the term in its
      path.
    - The heading starts its section's first chunk. When the first block is too large, or
      fits alone but not after the heading, the heading leads the block's first piece; it is
      a chunk of its own only when it would take half the chunk.
    - A bold label on a line of its own (``**Deprecated:**``, SQLite's FAQ questions) goes
      with the block after it: a chunk that would end with it ends before it, and it starts
      the next; where the block does not fit after it, the label shares the block's first
      piece (unlike a long heading, it never stands alone), and so do the headings alone
      before it (Scrapy's "## Scrapy 2.6.2" and "**Security bug fix:**" before a long item).
    - A label at the top level (a paragraph of bold text alone: SQLite's FAQ questions,
      Doxygen's "Public Member Functions") heads a unit, the blocks after it up to the next
      label or heading: the unit starts a chunk, its chunks have the label as the last entry
      of their path (so the header names the question every piece of its answer answers), and
      a small tail of one unit does not go on into the next; small whole units (a man page's
      options, each a bold name and a line) go on together while the chunk is small, as
      small sections do. A label of nothing (another label or a heading right after it:
      SQLite's names above syntax diagrams, which are images) heads no unit: it is content
      of the chunk it falls in, not a chunk of its own.
    """

    strategy = "markdown"

    def split(self, doc: TokenizedText, language: str | None = None) -> list[ChunkSpan]:
        text = doc.text
        if not text.strip():
            return []
        sections = markdown_sections(text)
        lines = line_starts(text)
        out: list[ChunkSpan] = []
        # The chunk being filled: [start, end) under `path`; `bare_heading` while it holds only
        # a heading, which then joins the first piece of an oversized block.
        start = end = -1
        path: tuple[str, ...] = ()
        bare_heading = False
        small = self.small_chunk_tokens
        # the section paths of the open chunk's sections (several when siblings were merged),
        # and the path of the section being read
        members: list[tuple[str, ...]] = []
        current: tuple[str, ...] = ()
        # Headings of nothing else merged at the open chunk's end: when the section they head
        # does not join the chunk, they go on with it (no chunk ends with them).
        tail: _HeldHeadings | None = None
        open_unit: tuple[str, ...] = ()  # the `Section.unit` of the open chunk's last section

        # Sections of a heading alone are not named among a chunk's merged sections: their
        # heading is in its text, and what they head is named by the sections after them
        # (Doxygen's "Member Function Documentation" before "make()").
        heading_only = {
            s.path for s in sections if _heading_only(s) or _label_only(s) or _introduces_only(s)
        }
        # where each section starts: an open chunk that starts at one holds whole sections
        section_starts = {s.blocks[0].start for s in sections}

        def named_path() -> tuple[str, ...]:
            kept = [m for m in members if m not in heading_only]
            named = sibling_path(path, kept)
            if named == path and kept and _below(kept[0], path):
                # a chunk that starts in a definition and goes on only into the text after it
                # (Sphinx's "Changed in version" after a class) is named by the definition
                below = {m[: len(path) + 1] for m in kept if _below(m, path)}
                if len(below) == 1:
                    return below.pop()
            return named

        # the last chunk `close` wrote: its index in `out`, its path and member sections
        closed: tuple[int, tuple[str, ...], list[tuple[str, ...]]] | None = None

        def close() -> None:
            nonlocal start, members, path, closed
            if start >= 0:
                closed = (len(out), path, list(members))
                out.append(self._span(doc, start, end, named_path()))
            start = -1
            members = [current]
            # the next chunk lies within the section being read: its path, not the merged one
            # of a chunk that began before the section (a small lead carried into it)
            path = current

        # the open chunk's sections and path before the section being read joined it, and
        # that section's start (set where a section joins the open chunk, below)
        before_section: tuple[list[tuple[str, ...]], tuple[str, ...], int] | None = None

        def reopen(before: int, held_start: int, held_end: int) -> None:
            """End the open chunk at `before` and open the next with [held_start, held_end),
            what it held after that (headings, a label, a lead-in that go on)."""
            nonlocal start, end, members, path
            if before_section is not None and held_start == before_section[2]:
                members, path = before_section[0], before_section[1]
            end = before
            close()
            start, end = held_start, held_end

        def open_is_small() -> bool:
            return start >= 0 and doc.count(start, doc.ceil(end)) < small

        # a lead-in that ended the section read last and the open chunk, after other content:
        # its start, the end of the chunk before it, its end and its section's path
        held_lead: tuple[int, int, int, tuple[str, ...]] | None = None

        queue = sections[::-1]
        while queue:
            section = queue.pop()
            sec_end = section.blocks[-1].end
            lead, held_lead = held_lead, None
            nested = section.definition is not None and section.definition.parts
            if nested and not self._fits(doc, section.blocks[0].start, sec_end):
                # too large: cut between the definitions nested in it
                queue.extend(definition_parts(text, section)[::-1])
                held_lead = lead  # the lead-in introduces its first part
                continue
            common = common_prefix(path, section.path)
            # the open chunk holds a piece of a definition cut in parts and this section lies
            # outside the section of that definition (a new heading): the piece ends there,
            # with the term in its path
            parent = open_unit[:-1]
            leaves_unit = bool(open_unit) and start >= 0 and section.path[: len(parent)] != parent
            if leaves_unit:
                common = ()
            # the document's first chunk, small (a title and its purpose line): like headings
            # alone, it goes on into what follows even where it must cut a block that fits
            doc_lead = not out and start >= 0 and open_is_small()
            # A small chunk (a title and its one-line purpose, a section's short tail) goes on
            # into the next section instead of standing alone without the substance.
            # (but not from one label's unit into the next: the tail keeps its own label)
            carry = (
                not leaves_unit
                # headings alone (several signatures of one function) go on into what they
                # head while they take at most half a piece, small or not
                and (open_is_small() or (bare_heading and self._half_a_piece(doc, start, end)))
                # headings alone go on into what they head, even a block they must then cut
                and (bare_heading or doc_lead or self._can_carry(doc, start, section))
                and not (
                    section.blocks[0].label
                    and not _label_only(section)
                    and path != section.path[:-1]
                )
            )
            # a bare heading heads the section it joins: the chunk is that section's (but a
            # sibling heading of nothing after it leaves the chunk to what the two share)
            sibling_heading = _heading_only(section) and not _below(section.path, path)
            heads = carry and bare_heading and not sibling_heading
            merged = section.path if heads else common or section.path
            # a small label unit (a man page's option: a bold name and a line) goes whole into
            # an open chunk of whole small units, as a small section goes on into the next;
            # a larger unit, or one after a piece of the unit before, starts a chunk
            small_unit = (
                section.blocks[0].label
                and len(section.blocks) > 1
                and start in section_starts
                and len(common) == len(section.path) - 1
                and open_is_small()
            )
            if section.fresh and not carry and not small_unit:
                common = ()  # a definition too large: its first piece starts a chunk
            if start >= 0 and (common or carry) and self._fits(doc, start, sec_end):
                # a small heading and lead-in alone are held as headings alone are
                intro = (
                    _introduces_only(section)
                    and doc.count(section.blocks[0].start, doc.ceil(sec_end)) < small
                )
                if _heading_only(section) or intro:
                    if tail is not None and tail.end == end and _below(section.path, tail.last):
                        tail.end, tail.last, tail.introduces = sec_end, section.path, intro
                    else:
                        # a run of headings restarts at a heading that is not below the one
                        # before it: that one heads nothing and is content (rustdoc's impls),
                        # unless a sibling with content ends the run (below)
                        sibling = (
                            tail is not None
                            and tail.end == end
                            and not tail.introduces
                            and len(section.path) == len(tail.last)
                            and section.path[:-1] == tail.last[:-1]
                        )
                        tail = _HeldHeadings(
                            section.blocks[0].start,
                            sec_end,
                            section.path,
                            end,
                            list(members),
                            path,
                            last=section.path,
                            introduces=intro,
                            run=(tail.run or tail) if sibling and tail is not None else None,
                        )
                elif section.blocks[-1].lead_in and (
                    not section.blocks[-2].heading
                    if len(section.blocks) > 1
                    # a lead-in alone between two lists of definitions (PostgreSQL's "dropdb
                    # also accepts the following command-line arguments ...:")
                    else not (bare_heading or (tail is not None and tail.end == end))
                ):
                    before = section.blocks[-2].end if len(section.blocks) > 1 else end
                    held_lead = (section.blocks[-1].start, before, sec_end, section.path)
                end, path = sec_end, merged
                # the chunk still holds only headings after a heading of nothing
                bare_heading = bare_heading and _heading_only(section)
                members.append(section.path)
                # a chunk that holds a definition's last piece stays in that definition's
                # section whatever joins it after the piece (JsonCpp's `setDefaults` remark,
                # a code block cut in three, then the text after the remark)
                open_unit = section.unit or open_unit
                continue
            held: _HeldHeadings | None = None
            if (
                not carry
                and tail is not None
                and tail.end == end
                and _headed_by(section, tail.last)
                and (not tail.introduces or _below(section.path, tail.last))
            ):
                run = tail.run
                if (
                    run is not None
                    and len(section.path) == len(tail.last)
                    and self._can_lead(doc, run.start, tail.end, section)
                ):
                    # sibling headings of nothing and then one with content: one function's
                    # signatures before its description (Erlang's `write(Term)`,
                    # `write(Term, Depth)`, `write(Term, Options)`), which they all head
                    held = run
                elif self._can_lead(doc, tail.start, tail.end, section):
                    held = tail
            if held is not None and tail is not None:
                # The chunk would end with headings whose content starts here: it ends
                # before them, and they open the next chunk, which this section joins.
                members, path = held.before_members, held.before_path
                reopen(held.before_end, held.start, tail.end)
                bare_heading = True
                members, path, current = [held.path], held.path, held.path
                tail, open_unit = None, ()
                queue.append(section)
                continue
            # a lead-in at the open chunk's end introduces the definitions below its section
            # (Sphinx's "The doctest extension uses the following configuration values:"):
            # the chunk ends before it, and it opens the chunk of the first, named by it
            introduced = (
                not carry
                and lead is not None
                and lead[2] == end
                and start >= 0
                # a definition, or the first part of one too large (its term and description)
                and (
                    section.definition is not None
                    or (section.fresh and section.unit == section.path)
                )
                and section.path[:-1] == lead[3]
                and self._can_introduce(doc, lead[0], lead[2], self._first_unit(doc, section))
            )
            if introduced and lead is not None:
                reopen(lead[1], lead[0], lead[2])
                bare_heading = not self._fits(doc, start, self._first_unit(doc, section).end)
            # the document's first chunk (a title, its purpose, a synopsis) goes on with the
            # opening of the next section, its heading and first block, where they fit
            fill = (
                not carry
                and not introduced
                and not out
                and start >= 0
                and bool(common)
                and not section.fresh
                and self._can_fill(doc, start, section)
            )
            if not carry and not fill:
                if not introduced:
                    close()
                members = []
            # the open chunk's sections and path before this section joined it: a chunk that
            # ends before the section's heading (it goes on with what follows) is not named
            # by the section
            before_section = (list(members), path, section.blocks[0].start)
            members.append(section.path)
            current = section.path
            open_unit = section.unit
            path = merged if carry else common if fill else section.path
            # the document's lead carried into this section: it leads the first piece of a
            # block that fits only alone, as a bare heading does (headings after it keep it so)
            leading = carry and doc_lead and not bare_heading
            # the open chunk's last unit when it is a label: its start, its end and the end
            # of the chunk before it
            label: tuple[int, int, int] | None = None
            opened_by_label = False  # the open chunk holds a label alone
            headed_label = False  # the open chunk holds headings alone and then its label
            # the open chunk's last unit when it is a lead-in after other content: its start
            # and the end of the chunk before it
            lead_in: tuple[int, int] | None = None
            # the section's heading when the open chunk holds other content before it (a small
            # chunk carried into the section, the opening filled with it): its start and the
            # end of the chunk before it. A lead-in or a label right after it that goes on
            # takes it along, so that no chunk ends with a heading whose content starts the next
            heading_after: tuple[int, int] | None = None
            lead_heading: tuple[int, int] | None = None  # the heading before `lead_in`
            for block in section.blocks:
                units = [block]
                if block.parts and not self._fits(doc, block.start, block.end):
                    units = [Block(s, e, PROSE) for s, e in block.parts]
                for unit in units:
                    if start >= 0 and self._fits(doc, start, unit.end):
                        after_content = not (bare_heading or leading or label)
                        lead_in = (unit.start, end) if unit.lead_in and after_content else None
                        label = (unit.start, unit.end, end) if unit.label else None
                        lead_heading = heading_after if lead_in is not None else None
                        if heading_after is not None and label is not None:
                            label = (heading_after[0], unit.end, heading_after[1])
                        after_heading = unit.heading and after_content
                        heading_after = (unit.start, end) if after_heading else None
                        headed_label = bool(unit.label) and bare_heading
                        # a heading after headings alone: the chunk still holds only headings,
                        # and so it does after their lead-in ("#### format_spec()", "Where:")
                        bare_heading = bare_heading and (unit.heading or unit.lead_in)
                        leading = leading and unit.heading
                        end, opened_by_label = unit.end, False
                        continue
                    # no chunk ends with a paragraph that introduces the block after it ("A
                    # common example is opening a file:" before the example): it goes on with
                    # that block, or leads its first piece, with the heading right before it
                    # where the three can go on together
                    moves = [m for m in (lead_heading, lead_in) if m is not None]
                    # the unit does not fit right after the section's heading
                    held_heading, heading_after = heading_after, None
                    move = next(
                        (m for m in moves if self._can_introduce(doc, m[0], end, unit)), None
                    )
                    if move is not None:
                        reopen(move[1], move[0], end)
                        if self._fits(doc, start, unit.end):
                            label = (unit.start, unit.end, end) if unit.label else None
                            end, lead_in = unit.end, None
                            continue
                        bare_heading = True
                    lead_in = None
                    labelled = label is not None or (opened_by_label and start >= 0)
                    if (opened_by_label and label is None) or headed_label:
                        # the label, and the headings before it, share the block's first
                        # piece (a release's "## Scrapy 2.6.2" and its "**Security bug
                        # fix:**" before a long item: the heading stood alone)
                        bare_heading, label, headed_label = True, None, False
                    elif labelled:
                        # no chunk ends with a label: it goes on with the block after it
                        reopen(label[2], label[0], label[1])
                        bare_heading, label = True, None
                        if self._fits(doc, start, unit.end):
                            end, bare_heading = unit.end, False
                            continue
                    elif held_heading is not None:
                        # nor does a heading with content end a chunk: it leads the block, as
                        # at the start of its section (a small chunk carried into it grew)
                        reopen(held_heading[1], held_heading[0], end)
                        bare_heading = True
                    opened_by_label = False
                    leading_piece = leading
                    leading = False
                    # a heading alone does not stand alone: like a label, it heads the first
                    # piece of a block that fits a chunk alone but not with it ("## Synopsis"
                    # and a 155-token synopsis were a chunk of one heading, the question's
                    # words, and a chunk without them)
                    heading_alone = (
                        (bare_heading or leading_piece) and start >= 0 and not unit.heading
                    )
                    if self._fits(doc, unit.start, unit.end) and not (labelled or heading_alone):
                        close()
                        start, end, bare_heading = unit.start, unit.end, unit.heading
                        opened_by_label = unit.label
                        continue
                    small_lead = bare_heading or leading_piece or open_is_small()
                    lead = (start, end) if start >= 0 and small_lead else None
                    if lead is None:
                        close()
                    start = -1
                    pieces = self._pieces(doc, lines, unit, lead)
                    for i, (s, e) in enumerate(pieces[:-1]):
                        named = named_path() if i == 0 else current
                        out.append(self._span(doc, s, e, named))
                    if len(pieces) > 1:
                        members, path = [current], current
                        if section.definition is not None:
                            open_unit = section.path  # its last piece stays in its section
                    (start, end), bare_heading = pieces[-1], False
            if lead_in is not None and lead_in[0] == section.blocks[-1].start:
                moved = lead_heading or lead_in
                held_lead = (moved[0], moved[1], end, section.path)
        if open_is_small() and out and out[-1].end <= start and self._fits(doc, out[-1].start, end):
            # the document's small last chunk joins the one before it, when that has room
            last = out.pop()
            if closed is not None and closed[0] == len(out):  # named by the sections of both
                _, last_path, last_members = closed
                path = common_prefix(last_path, path) or last_path
                members = [*last_members, *members]
            else:
                path = common_prefix(last.section_path, path) or last.section_path
            start = last.start
        close()
        return out

    def _can_carry(self, doc: TokenizedText, start: int, section: Section) -> bool:
        """Whether a small chunk from `start` can go on into `section`: with its heading and
        first block, or as the lead of that block's first piece when the block is too large
        (else it would stand alone with the heading, and the block lose it)."""
        first = self._first_unit(doc, section)
        return self._fits(doc, start, first.end) or not self._fits(doc, first.start, first.end)

    def _first_unit(self, doc: TokenizedText, section: Section) -> Block:
        """The section's first block after its heading, or that block's first item where the
        block is too large for a chunk and is cut between its items."""
        first = _first_block(section)
        if first.parts and not self._fits(doc, first.start, first.end):
            return Block(*first.parts[0], PROSE)
        return first

    def _can_lead(self, doc: TokenizedText, start: int, end: int, section: Section) -> bool:
        """Whether headings at [start, end) can open the chunk of `section`: with its first
        block, or as the lead of that block's first piece, which a bare heading leads even
        where the block would fit a chunk alone (`_pieces` lets a heading of half the budget
        stand alone: then it stays where it is)."""
        return self._can_carry(doc, start, section) or self._half_a_piece(doc, start, end)

    def _half_a_piece(self, doc: TokenizedText, start: int, end: int) -> bool:
        """Whether [start, end) takes at most half of a block's piece, so that it can lead
        it (`_pieces` lets a longer lead stand alone)."""
        return 2 * doc.count(start, doc.ceil(end)) <= self.chunk_size - self.chunk_overlap

    def _can_introduce(self, doc: TokenizedText, start: int, end: int, unit: Block) -> bool:
        """Whether a lead-in at [start, end) can open the chunk of `unit`, the block it
        introduces: with it whole, or as the lead of its first piece where it is cut anyway
        and the lead-in takes at most half the piece (a block that fits a chunk alone is not
        cut for it: the lead-in then stays with the text before it)."""
        if self._fits(doc, start, unit.end):
            return True
        return not self._fits(doc, unit.start, unit.end) and self._half_a_piece(doc, start, end)

    def _can_fill(self, doc: TokenizedText, start: int, section: Section) -> bool:
        """Whether the chunk from `start` can take `section`'s heading and first block."""
        return self._fits(doc, start, _first_block(section).end)

    def trim_span(self, text: str, start: int, end: int) -> tuple[int, int]:
        """Drop surrounding whitespace but keep the first line's indentation (it is syntax)."""
        s, e = trim(text, start, end)
        if s >= e:
            return s, e
        i = s
        while i > start and text[i - 1] in " \t":
            i -= 1
        if i == 0 or text[i - 1] in "\r\n":
            s = i
        return s, e

    def _fits(self, doc: TokenizedText, start: int, end: int) -> bool:
        # Round the end up to a token boundary: a token straddling the end (".\n\n") is
        # still one token when the chunk is encoded alone.
        return doc.count(start, doc.ceil(end)) <= self.chunk_size

    def _span(self, doc: TokenizedText, start: int, end: int, path: tuple[str, ...]) -> ChunkSpan:
        return ChunkSpan(start, end, doc.count(start, end), path, self.strategy)

    def _pieces(
        self,
        doc: TokenizedText,
        lines: list[int],
        unit: Block,
        lead: tuple[int, int] | None,
    ) -> list[tuple[int, int]]:
        """Cut a block too large for the budget; `lead`, a bare heading, joins the first piece."""
        budget = self.chunk_size - self.chunk_overlap
        first_budget = budget
        if lead is not None:
            first_budget = budget - doc.count(lead[0], unit.start)
            if first_budget < budget // 2:  # a long heading: let it stand alone
                return [lead, *self._pieces(doc, lines, unit, None)]
        while True:
            if unit.fallback == LINES:
                pieces = self._line_split(doc, lines, unit.start, unit.end, first_budget, budget)
            else:
                pieces = self._prose_split(doc, unit.start, unit.end, first_budget, budget)
            if lead is None:
                return pieces
            pieces[0] = first = (lead[0], pieces[0][1])
            # a first piece over the embedding model's word pieces would be cut again at the
            # blank line after the lead, leaving it alone (a lead-in before a table of padded
            # cells, node-intl.md's): the lead takes a smaller first piece instead
            if self.model_fits(doc.text[first[0] : first[1]]) or first_budget <= budget // 4:
                return pieces
            first_budget -= max(1, first_budget // 16)

    def _prose_split(
        self, doc: TokenizedText, start: int, end: int, first_budget: int, budget: int
    ) -> list[tuple[int, int]]:
        first = recursive_split(doc, start, end, first_budget)[0]
        # A first segment of a short line or paragraph before one too large (a definition's
        # term line before its description's one long line) takes the first sentences after
        # it while they fit, rather than be a piece of its own: the term alone said nothing.
        used = doc.count(*first)
        if first[1] < end and 4 * used < first_budget:
            more = recursive_split(doc, first[1], end, first_budget - used, SENTENCE)[0]
            first = (first[0], more[1])
        segments = [first]
        if first[1] < end:
            segments.extend(recursive_split(doc, first[1], end, budget))
        return with_overlap(doc, segments, self.chunk_overlap)

    def _line_split(
        self,
        doc: TokenizedText,
        lines: list[int],
        start: int,
        end: int,
        first_budget: int,
        budget: int,
    ) -> list[tuple[int, int]]:
        """Greedy packing of whole lines; overlap, if any, is whole lines too.

        A piece that is not the last ends after a blank line where one ends the last quarter
        of its budget (between two functions of a listing, two paragraphs of a help text),
        else after as many lines as fit.

        Cuts sit at line starts even where a token straddles the newline ("):\\n"), unlike
        recursive_split, which snaps cuts to token boundaries: counts are taken with the start
        rounded down and the end rounded up, so each piece's count is an upper bound.
        """
        ls = lines
        lo_i, hi_i = bisect.bisect_right(ls, start), bisect.bisect_left(ls, end)
        points = np.asarray([start, *ls[lo_i:hi_i], end], dtype=np.int64)
        b = doc.boundaries
        lo = doc.token_index[np.searchsorted(b, points, side="right") - 1]
        hi = doc.token_index[np.minimum(np.searchsorted(b, points, side="left"), len(b) - 1)]
        text = doc.text
        segments: list[tuple[int, int]] = []
        i, n, limit = 0, len(points) - 1, first_budget
        while i < n:
            j = min(int(np.searchsorted(hi, lo[i] + limit, side="right")) - 1, n)
            if j <= i:  # one line over the budget: cut inside it
                segments.extend(even_split(doc, int(points[i]), int(points[i + 1]), limit, LINE))
                i += 1
            else:
                for k in range(j, i, -1) if j < n else ():
                    if 4 * (hi[k] - lo[i]) < 3 * limit:
                        break
                    if not text[points[k - 1] : points[k]].strip():  # a blank line ends at k
                        j = k
                        break
                segments.append((int(points[i]), int(points[j])))
                i = j
            limit = budget
        return self._line_overlap(doc, lines, segments)

    def _line_overlap(
        self, doc: TokenizedText, ls: list[int], segments: list[tuple[int, int]]
    ) -> list[tuple[int, int]]:
        if self.chunk_overlap <= 0 or len(segments) < 2:
            return segments
        out = [segments[0]]
        for (prev_start, _), (start, end) in itertools.pairwise(segments):
            target = doc.tokens_before(start) - self.chunk_overlap
            window = max(doc.boundary_at_token(target), prev_start)
            k = bisect.bisect_left(ls, window)
            out.append((ls[k], end) if k < len(ls) and ls[k] < start else (start, end))
        return out
