"""Page layout to Markdown: lines of a paged document (with position and font) become text
whose headings, paragraphs, lists and rows the Markdown chunker understands, plus a page map.

Pure Python, no PDF library: `transforms.ingest.pdf` turns PDFium's output into `Line`s, tests build
them by hand. What it does, in order: drops running headers, footers and page numbers (lines
that recur at the same place on most pages), contents pages and back-of-book index pages;
marks headings (from the outline when there is one, else from font size and weight, and
numbered headings such as "3.2 Scope"); joins a hyphen at a line's end when the joined word
occurs elsewhere in the document; normalises ligatures; orders two columns.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import NamedTuple


class PagedError(Exception):
    """A PDF or Office file that yields no text; `reason` is the reject reason (encrypted,
    corrupt_pdf, corrupt_docx, corrupt_pptx, no_text_layer)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self):  # it comes back from the extraction child process pickled
        return type(self), (self.reason, str(self))


class Line(NamedTuple):  # a 2,000-page PDF has 80,000: a frozen dataclass took 4x as long to make
    """One line of text on a page; y grows downwards from the page's top (0..height)."""

    page: int  # 0-based physical page
    text: str
    x0: float
    top: float
    x1: float
    bottom: float
    size: float = 0.0  # font size of the line's first character
    bold: bool = False
    mono: bool = False  # set in a monospaced font (four of five characters across it)


class PageLines(Sequence[Line]):
    """One page's lines, stored compactly: their texts as one string, their boxes, sizes and
    weights in arrays. A `Line` is made only when one is looked at, so a long document's pages
    cost about their text (a `Line` each, with its own floats and string, took 12x the text of
    a 2,000-page PDF). `without` leaves lines out by index, sharing the storage."""

    __slots__ = ("_ends", "_flags", "_geometry", "_index", "_text", "page")

    def __init__(self, lines: Sequence[Line], page: int = 0) -> None:
        self.page = lines[0].page if lines else page
        self._text = "\n".join(ln.text for ln in lines)
        ends, at = array("l"), 0
        for ln in lines:
            at += len(ln.text)
            ends.append(at)
            at += 1
        self._ends = ends
        geometry = array("d")
        for ln in lines:
            geometry.extend((ln.x0, ln.top, ln.x1, ln.bottom, ln.size))
        self._geometry = geometry
        self._flags = bytes(ln.bold | ln.mono << 1 for ln in lines)
        self._index: array | None = None  # the stored lines this page shows, when not all

    def without(self, left_out: set[int]) -> PageLines:
        """The page less the lines at these indexes (its storage shared, not copied)."""
        view = object.__new__(PageLines)
        view.page, view._text, view._ends = self.page, self._text, self._ends
        view._geometry, view._flags = self._geometry, self._flags
        view._index = array("l", (self._at(i) for i in range(len(self)) if i not in left_out))
        return view

    def _at(self, i: int) -> int:
        return i if self._index is None else self._index[i]

    def __len__(self) -> int:
        return len(self._ends) if self._index is None else len(self._index)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        k = self._at(i)
        end = self._ends[k]
        start = self._ends[k - 1] + 1 if k else 0
        x0, top, x1, bottom, size = self._geometry[5 * k : 5 * k + 5]
        flags = self._flags[k]
        return Line(
            self.page, self._text[start:end], x0, top, x1, bottom, size, bool(flags & 1),
            bool(flags & 2),
        )  # fmt: skip

    def __iter__(self) -> Iterator[Line]:
        text, ends, geometry, flags, page = (
            self._text,
            self._ends,
            self._geometry,
            self._flags,
            self.page,
        )
        for k in range(len(ends)) if self._index is None else self._index:
            g = 5 * k
            yield Line(
                page,
                text[ends[k - 1] + 1 if k else 0 : ends[k]],
                geometry[g],
                geometry[g + 1],
                geometry[g + 2],
                geometry[g + 3],
                geometry[g + 4],
                bool(flags[k] & 1),
                bool(flags[k] & 2),
            )

    def sizes(self) -> Iterator[tuple[float, int]]:
        """(font size, length of text) of each line, no `Line` made."""
        ends, geometry = self._ends, self._geometry
        for k in range(len(ends)) if self._index is None else self._index:
            yield geometry[5 * k + 4], ends[k] - (ends[k - 1] + 1 if k else 0)

    @property
    def text(self) -> str:
        """The page's lines joined by newlines."""
        if self._index is None:
            return self._text
        return "\n".join(line.text for line in self)


@dataclass(frozen=True)
class OutlineEntry:
    """A bookmark: its title, level (1 = top) and 0-based page (None when it points nowhere)."""

    title: str
    level: int
    page: int | None


@dataclass(frozen=True)
class PagedText:
    """A paged document as Markdown, with where each page starts in it."""

    text: str
    page_starts: tuple[int, ...]  # char offset of each physical page's first character
    page_labels: tuple[str, ...] | None = None  # the document's own label of each page
    title: str | None = None
    removed: dict[str, int] = field(default_factory=dict)  # what was left out, counted


MIN_REPEAT_PAGES = 3
REPEAT_FRACTION = 0.5  # a header or footer recurs on at least this share of the pages
EDGE_LINES = 3  # headers and footers are among the first or last lines of a page
MAX_HEADING_WORDS = 14
_LIGATURES = re.compile("[\ufb00-\ufb06]")
_DIGITS = re.compile(r"\d+")
_PAGE_NUMBER = re.compile(r"(?i)(page\s+)?(\d{1,4}|[ivxlcdm]{1,7})(\s*(/|of)\s*\d{1,4})?")
_NUMBERED = re.compile(r"(\d+(?:\.\d+)+|[A-Z]\.\d+(?:\.\d+)*|\d+\.?)\s+\S")
# (a roman page number is a word of its own: "Manual" and "Leex" end with none)
_ENDS_WITH_PAGE = re.compile(r"(\.\s*){2,}\s*\d{1,4}$|\s\d{1,4}$|(?:^|[\s.])[ivxlc]{1,6}$")
# "term, 12, 14-16" or "12, 14": the same lines as "[^\d]+[, ]..." matched, without its
# quadratic backtracking on a long line (a non-digit just before the separator is all it asks)
_INDEX_LINE = re.compile(r"(?<=\D)[, ]\s*\d{1,4}([,–-]\s*\d{1,4})*$|^\d{1,4}([,–-]\s*\d{1,4})*$")
# "Version 1.04", "Release 2.3b", "v1.2": under a title in the title's font, never a heading
_VERSION_LINE = re.compile(r"(?i)(version|release|revision|rev\.|v\.?)\s*\d+(\.\d+)*[a-z]?")
_TRAILING_NUMBER = re.compile(r"(\d{1,4})$")
_OTHER_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w.])")
SECTION_NUMBER = re.compile(r"^\s*(\d+(\.\d+)*|[A-Z](\.\d+)+)\.?\s+")
_CHAPTER = re.compile(r"(?i)(chapter|part|appendix|section)\s+[\dA-Z]{1,6}\.?")
_HYPHEN_END = re.compile(r"([A-Za-z]+)-$")
_FIRST_WORD = re.compile(r"([a-z]+)")
_WORD = re.compile(r"[A-Za-z]+")
# A bullet glyph; a C1 control character at a line's start is one whose font maps it to no
# character (gnuplot's LaTeX itemize bullets come out as U+0088)
_BULLET = re.compile(r"^[•●▪◦‣∙·■□–\x80-\x9f]\s*")
_MARKDOWN_START = re.compile(r"^(#|```|~~~|>|\s{4})")
# A line that Markdown reads as a setext heading's underline ("-" or "=" alone under a line of
# text makes that line a heading) or as a thematic break ("***", "- - -"): Erlang's table of
# PCRE metacharacters has "-" alone on a line, tools' profiler output rows of dashes.
_BLOCK_LINE = re.compile(r"^(=+|-+)$|^([-*_])(\s*\2){2,}$")
# A list marker alone: an empty list item ("+" and "1." in STDLIB's io:format table of control
# sequences, "*" in a bulleted item of tools' operator list).
_MARKER_ALONE = re.compile(r"^([-+*]|\d{1,9}[.)])$")
_BACKTICKS = re.compile(r"`+")
CODE_BLANK_PITCHES = 1.5
MAX_MONO_SHARE = 0.9  # more of a document's text monospaced than this: its body font
# character widths: the next page's code, from this far left of a block's edge rightwards
# (its first lines may be indented ones), goes on the block the page before ended with
MAX_CODE_SHIFT = 2
MARGIN_LINES = 3
MAX_CODE_INDENT = 40  # spaces: a line set further right in a code block is not indented more
_LIST_ITEM = re.compile(r"^([-+*]|\d{1,9}[.)]) (?=\S)")


def normalise(text: str) -> str:
    """Ligatures (ﬁ, ﬂ, ﬀ ...) as letters; other characters untouched."""
    return _LIGATURES.sub(lambda m: unicodedata.normalize("NFKC", m.group()), text)


def _key(line: Line, top: bool) -> tuple[str, int]:
    """A line's text with its digits as # (page numbers vary), and its place on the page."""
    place = line.top if top else line.bottom
    return _DIGITS.sub("#", " ".join(line.text.split()).lower()), round(place / 4)


def running_lines(pages: Sequence[Sequence[Line]]) -> set[tuple[int, int]]:
    """(page, index) of the lines that are running headers, footers or page numbers.

    A line near a page's top or bottom (digits aside, at the same place) is running when it
    recurs on half the pages, on half the pages of its side (a book's left and right pages
    alternate their footers: Erlang/OTP's manuals print "4 | Ericsson AB. ...: Parse Tools"
    on even pages and "... Parse Tools | 5" on odd ones, each on under half the pages), or,
    as a page's first or last line, on MIN_REPEAT_PAGES pages in a row, or in a row of one
    side's pages (the running head that names the current chapter or module: "yecc" atop
    every page of yecc's reference, then "leex"). Text set larger than the body is a heading.
    """
    n_pages = sum(1 for p in pages if p)
    out: set[tuple[int, int]] = set()
    keys: dict[tuple[int, int], tuple[tuple[str, int], bool]] = {}  # (page, index) -> key
    on_pages: dict[tuple[tuple[str, int], bool], set[int]] = {}
    on_side: Counter[tuple[tuple[tuple[str, int], bool], int]] = Counter()  # (key, p % 2)
    outermost: dict[tuple[tuple[str, int], bool], set[int]] = {}
    body = _body_size(pages)
    for p, lines in enumerate(pages):
        for i in _edge_indexes(len(lines)):
            edge = _edge(i, len(lines))
            key = keys[(p, i)] = (_key(lines[i], edge), edge)
            if p not in on_pages.setdefault(key, set()):
                on_pages[key].add(p)
                on_side[(key, p % 2)] += 1
            if i in (0, len(lines) - 1):
                outermost.setdefault(key, set()).add(p)
    # a first or last line apart from the text by a band (a page's head or foot), whatever
    # it says, at the same place on several pages: a running head that names the page's
    # section ("1.1 Introduction", then "1.2 Getting started", atop Erlang's pages)
    banded: dict[tuple[int, bool], set[int]] = {}
    leading = _leading(pages)
    for p, lines in enumerate(pages):
        if len(lines) >= 3 and leading:
            first, last = lines[0], lines[-1]
            if lines[1].top - first.bottom > BAND_LEADINGS * leading:
                banded.setdefault((round(first.top / 4), True), set()).add(p)
            if last.top - lines[-2].bottom > BAND_LEADINGS * leading:
                banded.setdefault((round(last.bottom / 4), False), set()).add(p)
    sides = [sum(1 for p, lines in enumerate(pages) if lines and p % 2 == side) for side in (0, 1)]
    needed = max(MIN_REPEAT_PAGES, REPEAT_FRACTION * n_pages)
    needed_on_side = [max(MIN_REPEAT_PAGES, REPEAT_FRACTION * n) for n in sides]
    for p, lines in enumerate(pages):
        for i in _edge_indexes(len(lines)):
            line = lines[i]
            if line.size > body * 1.12:
                continue  # set larger than the body: a heading, not a running line
            key = keys[(p, i)]
            found = on_pages[key]
            if (
                len(found) >= needed
                or on_side[(key, p % 2)] >= needed_on_side[p % 2]
                or (n_pages >= 2 and _PAGE_NUMBER.fullmatch(line.text.strip()))
                or (i in (0, len(lines) - 1) and _in_a_row(p, outermost[key]))
                or (i in (0, len(lines) - 1) and _banded(p, line, i == 0, banded))
            ):
                out.add((p, i))
    return out


BAND_LEADINGS = 3  # a head or foot band: this many times the text's usual space between lines


def _leading(pages: Sequence[Sequence[Line]]) -> float:
    """The usual space between one line's bottom and the next one's top (the median)."""
    gaps = sorted(
        b.top - a.bottom
        for lines in pages
        for a, b in itertools.pairwise(lines)
        if 0 < b.top - a.bottom < 3 * max(a.bottom - a.top, 1)
    )
    return gaps[len(gaps) // 2] if gaps else 0.0


def _banded(page: int, line: Line, top: bool, banded: dict[tuple[int, bool], set[int]]) -> bool:
    """Whether `line`, a page's first (`top`) or last, sits in a band at a place where the
    pages in a row around it have one too."""
    place = round((line.top if top else line.bottom) / 4)
    found = banded.get((place, top), set())
    return page in found and _in_a_row(page, found)


def _in_a_row(page: int, pages: set[int]) -> bool:
    """Whether `page` is one of MIN_REPEAT_PAGES of `pages` in a row, or in a row of one
    side's pages (every other page)."""
    for step in (1, 2):
        run = 1
        q = page - step
        while q in pages:
            run, q = run + 1, q - step
        q = page + step
        while q in pages:
            run, q = run + 1, q + step
        if run >= MIN_REPEAT_PAGES:
            return True
    return False


def _edge_indexes(n: int) -> list[int]:
    """The indexes of a page's lines for which `_edge` is not None, in order."""
    top = min(EDGE_LINES, n)
    return [*range(top), *range(max(top, n - EDGE_LINES), n)]


def _edge(i: int, n: int) -> bool | None:
    """True for a line near the page's top, False near its bottom, None in between."""
    if i < EDGE_LINES:
        return True
    if i >= n - EDGE_LINES:
        return False
    return None


def _listing_page(lines: Sequence[Line], pattern: re.Pattern) -> bool:
    texts = [line.text.strip() for line in lines if line.text.strip()]
    if len(texts) < 5:
        return False
    hits = sum(1 for t in texts if pattern.search(t))
    return hits >= 0.6 * len(texts)


def contents_pages(pages: Sequence[Sequence[Line]]) -> set[int]:
    """Pages near the front that are a table of contents: most lines end with a page number,
    the page numbers go up, and the lines are not rows of numbers (a numeric table)."""
    front = max(3, len(pages) // 5)
    found: set[int] = set()
    for p in range(min(front, len(pages))):
        if _listing_page(pages[p], _ENDS_WITH_PAGE) and _contents_numbers(pages[p]):
            found.add(p)
        elif found:
            break
    return found


def _contents_numbers(lines: Sequence[Line]) -> bool:
    """Whether the numbers that end the lines read as a contents page's: they go up (or stay)
    from one entry to the next, and most entries hold no other number than their section
    number in front. A table of figures has several numbers a row, in any order."""
    numbers: list[int] = []
    rows_of_numbers = 0
    for line in lines:
        text = line.text.strip()
        m = _TRAILING_NUMBER.search(text)
        if m is None:
            continue
        numbers.append(int(m.group(1)))
        entry = SECTION_NUMBER.sub("", text[: m.start()], count=1)
        if _OTHER_NUMBER.search(entry):
            rows_of_numbers += 1
    if len(numbers) < 2:
        return True  # roman page numbers, or too few to tell
    going_up = sum(b >= a for a, b in pairwise(numbers))
    return going_up >= 0.8 * (len(numbers) - 1) and rows_of_numbers <= 0.5 * len(numbers)


def index_pages(pages: Sequence[Sequence[Line]]) -> set[int]:
    """Pages at the back that are an index (most lines are terms followed by page numbers)."""
    back = max(3, len(pages) // 5)
    found: set[int] = set()
    for p in range(len(pages) - 1, max(-1, len(pages) - 1 - back), -1):
        if _listing_page(pages[p], _INDEX_LINE):
            found.add(p)
        elif found:
            break
    return found


def in_reading_order(lines: Sequence[Line], width: float) -> list[Line]:
    """Lines of a two-column page as left column then right column, band by band (a line
    across the middle, such as a title, closes a band); other pages as they are."""
    mid = width / 2
    left = [ln for ln in lines if ln.x1 <= mid + 2]
    right = [ln for ln in lines if ln.x0 >= mid - 2]
    if len(left) < 5 or len(right) < 5 or len(left) + len(right) < 0.7 * len(lines):
        return list(lines)
    out: list[Line] = []
    band: list[Line] = []
    for line in sorted(lines, key=lambda ln: (ln.top, ln.x0)):
        if line.x0 < mid - 2 < mid + 2 < line.x1:
            out += _columns(band, mid)
            band = []
            out.append(line)
        else:
            band.append(line)
    return out + _columns(band, mid)


def column_pieces(pieces: Sequence[Line], width: float) -> list[Line] | None:
    """`pieces` (lines cut at a gutter-wide space) in reading order when they make a page of
    two prose columns, else None. Prose columns, not a two-column table: on each side the
    median piece fills at least 60% of its column (a table's cells are short), and most
    pieces lie on one side of the middle."""
    mid = width / 2
    left = [ln for ln in pieces if ln.x1 <= mid + 2]
    right = [ln for ln in pieces if ln.x0 >= mid - 2]
    if len(left) < 5 or len(right) < 5 or len(left) + len(right) < 0.7 * len(pieces):
        return None
    for side, span in ((left, mid - min(ln.x0 for ln in left)),
                       (right, max(ln.x1 for ln in right) - mid)):  # fmt: skip
        widths = sorted(ln.x1 - ln.x0 for ln in side)
        if widths[len(widths) // 2] < 0.6 * span:
            return None
    return in_reading_order(pieces, width)


def _columns(band: list[Line], mid: float) -> list[Line]:
    return [ln for ln in band if ln.x1 <= mid + 2] + [ln for ln in band if ln.x1 > mid + 2]


def _body_size(pages: Sequence[Sequence[Line]]) -> float:
    exact: Counter[float] = Counter()
    for lines in pages:
        if isinstance(lines, PageLines):
            for size, n in lines.sizes():
                exact[size] += n
            continue
        for line in lines:
            exact[line.size] += len(line.text)
    sizes: Counter[float] = Counter()
    for size, n in exact.items():  # rounded once a size, not once a line; the same order
        sizes[round(size, 1)] += n
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _looks_like_heading(text: str) -> bool:
    words = text.split()
    return (
        0 < len(words) <= MAX_HEADING_WORDS
        and any(c.isalpha() for c in text)
        and not text.endswith((".", ",", ";", ":"))
    ) or (0 < len(words) <= MAX_HEADING_WORDS and bool(_NUMBERED.match(text)))


def font_headings(pages: Sequence[Sequence[Line]]) -> dict[tuple[int, int], int]:
    """(page, index) -> level of lines that are headings by font: short lines set larger than
    the body (levels ranked by size), or bold at body size; numbered ones ("3.2 Scope") by
    their number's depth when bold or larger."""
    body = _body_size(pages)
    if not body:
        return {}
    # one pass over every line keeps the few that can be headings: set larger than the body,
    # or at body size and bold or starting with a number
    candidates: list[tuple[int, int, Line]] = []
    sizes: set[float] = set()
    for p, lines in enumerate(pages):
        for i, line in enumerate(lines):
            if line.size > body * 1.12:
                if _looks_like_heading(line.text.strip()):
                    sizes.add(round(line.size, 1))
            elif not (
                line.bold or line.text.lstrip()[:1].isdigit() or line.text.lstrip()[1:2] == "."
            ):
                continue
            candidates.append((p, i, line))
    larger = sorted(sizes, reverse=True)[:3]
    out: dict[tuple[int, int], int] = {}
    for p, i, line in candidates:
        text = line.text.strip()
        size = round(line.size, 1)
        if size not in larger and not (
            size >= body - 0.1 and (line.bold or text[:1].isdigit() or text[1:2] == ".")
        ):
            continue
        if not _looks_like_heading(text) or _VERSION_LINE.fullmatch(text):
            continue
        numbered = _NUMBERED.match(text)
        if size in larger:
            level = larger.index(size) + 1
        elif (line.bold and size >= body - 0.1) or (
            # "3.2 Scope" at body size; "1. Use IDispatch ..." at body size is a list item
            numbered and "." in numbered.group(1).rstrip(".") and size >= body - 0.1
        ):
            level = len(larger) + 1
        else:
            continue
        if numbered and "." in numbered.group(1).rstrip("."):
            level = max(level, numbered.group(1).rstrip(".").count(".") + 1)
        out[(p, i)] = min(level, 6)
    return out


def _headings_under_outline(
    pages: Sequence[Sequence[Line]], headings: dict[tuple[int, int], tuple[int, int]]
) -> dict[tuple[int, int], tuple[int, int]]:
    """Headings by font that the outline does not list, each a level under the outline's
    last heading set larger: short lines set larger than the body (`_looks_like_heading`).

    An outline may stop short of the sections: Erlang/OTP's manuals list a module and its
    functions, and a module's "Data Types" and "Exports", set larger than the text, were
    text lines ("yecc > Exports" no section path)."""
    body = _body_size(pages)
    if not body or not headings:
        return {}
    out: dict[tuple[int, int], tuple[int, int]] = {}
    above: list[tuple[int, float]] = []  # the level and size of each outline heading so far
    for p, lines in enumerate(pages):
        last: int | None = None  # this page's last heading taken here, when it ends at `i`
        for i, line in enumerate(lines):
            if (p, i) in headings:
                above.append((headings[(p, i)][0], line.size))
                continue
            text = line.text.strip()
            if not body * 1.12 < line.size or not _looks_like_heading(text):
                continue
            if _VERSION_LINE.fullmatch(text):
                continue
            # under the last outline heading set larger (not a function's, in the text's size)
            over = next((h for h in reversed(above) if line.size < h[1] - 0.5), None)
            if over is None:
                continue
            prev = lines[i - 1] if i else None
            if (
                last is not None
                and prev is not None
                and last + out[(p, last)][1] == i
                and abs(lines[last].size - line.size) < 0.1
                and line.top - prev.bottom < prev.bottom - prev.top
            ):  # a heading's next line, set close under it ("ADDENDUM: How to use this
                # License for your" / "documents"): one heading; "END OF TERMS AND
                # CONDITIONS" over "How to Apply These Terms ...", a line apart: two
                out[(p, last)] = (out[(p, last)][0], out[(p, last)][1] + 1)
            else:
                out[(p, i)] = (min(over[0] + 1, 6), 1)
                last = i
    return out


def _match_key(text: str) -> str:
    return "".join(c for c in text.lower() if c.isalnum())


def outline_headings(
    pages: Sequence[Sequence[Line]], outline: Sequence[OutlineEntry]
) -> dict[tuple[int, int], tuple[int, int]]:
    """(page, first line index) -> (level, lines it spans) of the lines an outline entry names:
    on its page (or the next), the first one to three lines whose letters spell its title."""
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for entry in outline:
        want = _match_key(entry.title)
        if entry.page is None or not want:
            continue
        found = False
        for p in (entry.page, entry.page + 1):
            if p >= len(pages) or found:
                continue
            lines = pages[p]
            matches: list[tuple[int, int]] = []  # (first line, lines spanned)
            for i in range(len(lines)):
                if (p, i) in out:
                    continue
                got, raw_text = "", ""
                for span in range(1, 4):
                    if i + span > len(lines):
                        break
                    got += _match_key(lines[i + span - 1].text)
                    raw_text += " " + lines[i + span - 1].text
                    unnumbered = _match_key(SECTION_NUMBER.sub("", raw_text, count=1))
                    if want in (got, unnumbered):
                        first, span = i, span
                        if i > 0 and _CHAPTER.fullmatch(lines[i - 1].text.strip()):
                            first, span = i - 1, span + 1  # "Chapter 3" above "Scope"
                        matches.append((first, span))
                        break
                    if not (want.startswith(got) or want.endswith(got) or _tail_match(got, want)):
                        break
            if not matches:
                matches = [
                    (i, _call_span(lines, i)) for i in _calls_named(lines, entry.title, p, out)
                ]
            if matches:
                # the largest of the lines that spell it: a running head that names the
                # section ("1.1 Introduction" atop Erlang's page, in the text's size) is not it
                first, span = max(matches, key=lambda m: (lines[m[0]].size, -m[0]))
                out[(p, first)] = (min(entry.level, 6), span)
                found = True
    return out


# an outline entry that names a function by its arity: "file/2", "Module:token/3"
_NAME_ARITY = re.compile(r"([\w:.$']+)/(\d{1,2})")


def _calls_named(
    lines: Sequence[Line], title: str, page: int, taken: dict[tuple[int, int], tuple[int, int]]
) -> list[int]:
    """The lines of `lines` that write the call an outline entry names by its arity
    ("file/2": "file(Grammarfile, Options) -> yecc_ret()"), as Erlang's manuals list their
    functions; the first of them only."""
    m = _NAME_ARITY.fullmatch(title.strip())
    if m is None:
        return []
    name, arity = m.group(1), int(m.group(2))
    for i, line in enumerate(lines):
        text = line.text.strip()
        if (page, i) in taken or not text.startswith(name + "("):
            continue
        if _arity(text[len(name) :]) == arity:
            return [i]
    return []


# a signature that goes on: its line ends in an arrow, an alternative, a comma, a type
# annotation, "=" or an opening bracket
_UNFINISHED = re.compile(r"(->|\||,|::|=|[(\[{])$")
MAX_CALL_LINES = 12
_CALL_START = re.compile(r"[\w:.$']+\(")  # a line that starts another call


def _call_span(lines: Sequence[Line], i: int) -> int:
    """How many lines the call heading at `i` spans: Erlang sets a long signature on lines
    indented under its first ("analyse() ->" over "{AllCallCount :: integer() >= 0," and
    "ModAnalysisList :: mod_analysis_list()}"), which were code under a heading of its name
    alone. A line goes on while the signature is unfinished (`_UNFINISHED`, or a bracket
    open), in the heading's font and size, indented, with no paragraph's space before it;
    with a bracket open it may start at the heading's edge ("... -> {ok," over
    "Continuation} | exit(Reason)") unless it starts another call."""
    head = lines[i]
    text, span = head.text.strip(), 1
    while span < MAX_CALL_LINES and i + span < len(lines):
        following = lines[i + span]
        bracket_open = _open_brackets(text) > 0
        if not (bracket_open or _UNFINISHED.search(text)):
            break
        wrapped = (  # a bracket left open: the line may wrap at the heading's own edge
            bracket_open
            and following.x0 >= head.x0 - 2
            and not _CALL_START.match(following.text.strip())
        )
        if (
            (following.x0 <= head.x0 + 1 and not wrapped)
            or following.mono != head.mono
            or abs(following.size - head.size) > 0.5
            or _gap(lines[i + span - 1], following)
        ):
            break
        text += " " + following.text.strip()
        span += 1
    return span


def _open_brackets(text: str) -> int:
    depth = 0
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
    return depth


def _arity(call: str) -> int | None:
    """The number of arguments of "(a, {b, c}, [d])..." (its top-level commas), or None
    when its parenthesis does not close on the line."""
    depth, commas, empty = 0, 0, True
    for ch in call:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return 0 if empty else commas + 1
        elif depth == 1:
            if ch == ",":
                commas += 1
            elif not ch.isspace():
                empty = False
    return None


def _tail_match(got: str, want: str) -> bool:
    """A heading line with its number in front ("3.2Scope" for the outline's "Scope")."""
    stripped = got.lstrip("0123456789")
    return bool(stripped) and want.startswith(stripped)


def _page_texts(pages: Sequence[Sequence[Line]]) -> Iterator[str]:
    """Each page's lines as one string (a regex runs once a page, not once a line)."""
    for lines in pages:
        yield lines.text if isinstance(lines, PageLines) else "\n".join(ln.text for ln in lines)


def _words(pages: Sequence[Sequence[Line]]) -> set[str]:
    return {w.lower() for text in _page_texts(pages) for w in _WORD.findall(text)}


def join_hyphen(
    line: str, following: str, words: set[str], compounds: frozenset[str] = frozenset()
) -> tuple[str, str] | None:
    """(line, following) with a line-end hyphen joined ("exam-" + "ple ..." -> "example",
    the rest of `following` after it), else None. Joined when the joined word occurs elsewhere
    in the document, or when the hyphenated form does not (a word such as "self-contained"
    that the document writes with its hyphen inside a line keeps it)."""
    if not line.endswith("-"):
        return None
    m = _HYPHEN_END.search(line)
    n = _FIRST_WORD.match(following)
    if not m or not n:
        return None
    joined = m.group(1) + n.group(1)
    hyphenated = f"{m.group(1)}-{n.group(1)}".lower()
    if joined.lower() not in words and hyphenated in compounds:
        return None
    rest = following[n.end() :]
    return line[: m.start(1)] + joined + rest, ""


_COMPOUND = re.compile(r"[A-Za-z]+-[A-Za-z]+")


def _compounds(pages: Sequence[Sequence[Line]]) -> frozenset[str]:
    """Hyphenated words written inside a line somewhere in the document."""
    return frozenset(w.lower() for text in _page_texts(pages) for w in _COMPOUND.findall(text))


def _as_markdown_line(text: str) -> str:
    """A body line as Markdown: a bullet as "- ", and a backslash before a line that would
    otherwise read as block syntax (a heading, a fence, a quote, code, a heading's underline,
    a rule) rather than as the line of text it is."""
    bullet = _BULLET.match(text)
    if bullet:
        # a bullet alone stays the glyph it is: "- " there would underline the line before
        return "- " + _as_markdown_line(text[bullet.end() :]) if bullet.end() < len(text) else text
    if _MARKER_ALONE.match(text):
        return text[:-1] + "\\" + text[-1] if text[0].isdigit() else "\\" + text
    if _MARKDOWN_START.match(text) or _BLOCK_LINE.match(text):
        return "\\" + text.lstrip()
    item = _LIST_ITEM.match(text)  # an item's text is read as a line of its own
    if item:
        return text[: item.end()] + _as_markdown_line(text[item.end() :])
    return text


def _code_end(
    lines: Sequence[Line], i: int, prev: Line | None, is_heading: Callable[[int], bool]
) -> int:
    """The end of the run of monospaced lines from `i` when it is a block of code, else `i`:
    two lines or more, or one set apart from the text around it by a paragraph's space (a
    name in code that a line of prose wraps to stays in its paragraph) and not over an
    indented description."""
    end = i
    while (  # an item of a list is text, its words in code or not ("• debug")
        end < len(lines)
        and lines[end].mono
        and not is_heading(end)
        and not _BULLET.match(lines[end].text.lstrip())
    ):
        end += 1
    if end - i >= 2:
        return end
    if end < len(lines) and lines[end].x0 > lines[i].x0 + max(lines[i].size, 1.0):
        return i  # a term over its indented description (Erlang's "badarg", an option)
    before = prev is None or _gap(prev, lines[i])
    after = end == len(lines) or _gap(lines[i], lines[end])
    return end if before and after else i


def code_layout(lines: Sequence[Line]) -> tuple[float, float]:
    """(the left edge, the width of a character) of monospaced lines."""
    widths = sorted(
        (ln.x1 - ln.x0) / len(ln.text.strip()) for ln in lines if len(ln.text.strip()) >= 4
    )
    width = widths[len(widths) // 2] if widths else 0.6 * max(lines[0].size, 1.0)
    return min(ln.x0 for ln in lines), width


def code_lines(lines: Sequence[Line], left: float, width: float) -> list[str]:
    """Monospaced lines as the lines of a fenced block: each line's text as PDFium gives it
    (its spaces kept), indented by how far right of `left` it starts in character widths, a
    blank line where a line is further below the one before than the block's usual spacing
    (freefem sets its examples double-spaced: that is no blank line)."""
    pitches = sorted(b.top - a.top for a, b in pairwise(lines) if b.top > a.top)
    pitch = pitches[len(pitches) // 2] if pitches else 0.0
    body: list[str] = []
    for k, ln in enumerate(lines):
        if k and pitch and ln.top - lines[k - 1].top > CODE_BLANK_PITCHES * pitch:
            body.append("")
        indent = min(max(round((ln.x0 - left) / width), 0), MAX_CODE_INDENT) if width > 0 else 0
        body.append(" " * indent + ln.text.strip())
    return body


def fence_for(body: Sequence[str]) -> str:
    """A fence longer than any run of backticks in `body`."""
    ticks = max((len(m) for m in _BACKTICKS.findall("\n".join(body))), default=0)
    return "`" * max(3, ticks + 1)


def mono_share(pages: Sequence[Sequence[Line]]) -> float:
    """The share of the pages' characters that are on monospaced lines."""
    mono = total = 0
    for lines in pages:
        for line in lines:
            total += len(line.text)
            mono += len(line.text) if line.mono else 0
    return mono / total if total else 0.0


def _margin(lines: Sequence[Line]) -> float | None:
    """The left edge of a page's text (not its code), to a point: the leftmost that
    MARGIN_LINES lines start at, else the most lines' (text indented under it is to its
    right); None on a page of code alone. Books set odd and even pages at different margins
    (Erlang's PDFs: 64 and 78 points), so code that runs on to the next page starts elsewhere
    there."""
    edges = Counter(round(ln.x0) for ln in lines if not ln.mono)
    if not edges:
        return None
    common = [x for x, n in edges.items() if n >= MARGIN_LINES]  # indented text is to its right
    return float(min(common) if common else edges.most_common(1)[0][0])


def _bullet_item(lines: Sequence[Line], i: int, text: str) -> str | None:
    """The item of a bullet set on a line of its own (`text`, the bullet alone: PDFium puts
    a glyph a little above or below its text's baseline on a line of its own) with the line
    after it, which starts to its right with no paragraph's space between: "• " and its text;
    else None. Alone, the bullet was an empty "- " under the line before, which Markdown reads
    as that line's heading underline (Erlang's STDLIB: "Indicates if the table is fixed by
    any process." headed 550 chunks)."""
    if not _BULLET.fullmatch(text) or i + 1 >= len(lines):
        return None
    bullet, item = lines[i], lines[i + 1]
    following = " ".join(item.text.split())
    if not following or item.x0 < bullet.x1 or _gap(bullet, item):
        return None
    return text.strip() + " " + following


def assemble(
    pages: Sequence[Sequence[Line]],
    outline: Sequence[OutlineEntry] = (),
    page_labels: Sequence[str] | None = None,
    title: str | None = None,
) -> PagedText:
    """The document's Markdown text and page map from its pages' lines (in reading order)."""
    pages = [_normalised(lines) for lines in pages]
    running = running_lines(pages)
    contents = contents_pages(pages)
    index = index_pages(pages) - contents
    dropped: dict[int, set[int]] = {}
    for p, i in running:
        dropped.setdefault(p, set()).add(i)
    kept = [
        _without(lines, dropped.get(p, set())) if p not in contents | index else []
        for p, lines in enumerate(pages)
    ]
    # a document typeset in a monospaced font (a text file printed to PDF, an RFC) has no
    # code set apart from its text: its lines are its text
    code_apart = mono_share(kept) <= MAX_MONO_SHARE
    headings: dict[tuple[int, int], tuple[int, int]]
    if outline:
        headings = outline_headings(kept, outline)
        headings.update(_headings_under_outline(kept, headings))
    else:
        headings = {k: (level, 1) for k, level in font_headings(kept).items()}
    # the document's words and hyphenated words, made when a line first ends with a hyphen
    lexicon: tuple[set[str], frozenset[str]] | None = None
    done: list[str] = []  # the text emitted before this page, one string a page
    out: list[str] = []  # this page's pieces (80,000 line strings at once took 2x the text)
    last = ""  # the last piece emitted
    length = 0
    starts: list[int] = []
    pending: str | None = None  # the last body line, held back for hyphen joining
    prev: Line | None = None

    def emit(piece: str) -> None:
        nonlocal length, last
        out.append(piece)
        length += len(piece)
        last = piece

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            emit(pending + "\n")
            pending = None

    page_started = False

    def open_page(p: int) -> None:
        """Page `p` starts here, at its first text (an empty page where the next one does)."""
        nonlocal page_started
        if not page_started:
            starts.extend([length] * (p + 1 - len(starts)))
            page_started = True

    def new_block(p: int, separate: bool = True) -> None:
        """A block starts: the line held back written, the page opened, a blank line before
        it when `separate`."""
        flush()
        open_page(p)
        if separate and last and not last.endswith("\n\n"):
            emit("\n")

    first_heading: str | None = None
    # the last code block emitted: (its page, its closing fence, its left edge, its character
    # width, its page's margin)
    code: tuple[int, str, float, float, float | None] | None = None
    margins: dict[int, float | None] = {}
    for p, page in enumerate(kept):
        lines = list(page)  # one page's Lines at a time
        i = 0
        page_started = False
        while i < len(lines):
            line = lines[i]
            text = " ".join(line.text.split())
            if not text:
                i += 1
                continue
            if (p, i) in headings:
                level, span = headings[(p, i)]
                text = " ".join(" ".join(ln.text.split()) for ln in lines[i : i + span])
                new_block(p)
                emit("#" * level + " " + text + "\n\n")
                first_heading = first_heading or text
                prev = None
                i += span
                continue
            if line.mono and code_apart:
                end = _code_end(lines, i, prev, lambda k, p=p: (p, k) in headings)
            else:
                end = i
            if end > i:  # lines in a monospaced font set apart: a fenced block
                run = lines[i:end]
                left, width = code_layout(run)
                if p not in margins:
                    margins[p] = _margin(lines)
                margin = margins[p]
                if code is not None:  # the block's edge where this page's margin is
                    shift = margin - code[4] if margin is not None and code[4] is not None else 0
                    edge = code[2] + shift
                if (  # the page goes on with the code the page before ended with
                    not page_started
                    and pending is None
                    and code is not None
                    and code[0] == p - 1
                    and last is code[1]
                    and done
                    and done[-1].endswith(code[1])
                    and left >= edge - MAX_CODE_SHIFT * max(width, code[3])
                ):
                    closing = code[1]
                    done[-1] = done[-1][: -len(closing)]
                    length -= len(closing)
                    left, width = edge, code[3]
                    open_page(p)
                    emit("\n" + "\n".join(code_lines(run, left, width)))
                else:
                    new_block(p)
                    body = code_lines(run, left, width)
                    fence = fence_for(body)
                    closing = "\n" + fence + "\n\n"
                    emit(fence + "\n" + "\n".join(body))
                emit(closing)
                code = (p, closing, left, width, margin)
                prev = lines[end - 1]
                i = end
                continue
            if pending is not None and pending.endswith("-"):
                if lexicon is None:
                    lexicon = (_words(kept), _compounds(kept))
                joined = join_hyphen(pending, text, *lexicon)
                if joined is not None:
                    pending = joined[0]
                    open_page(p)  # the page starts inside the joined line
                    prev = line
                    i += 1
                    continue
            new_block(p, prev is not None and _gap(prev, line))
            item = None if (p, i + 1) in headings else _bullet_item(lines, i, text)
            if item is not None:
                text = item
                i += 1
            pending = _as_markdown_line(text)
            prev = lines[i]
            i += 1
        if not page_started:
            flush()
            open_page(p)
        prev = None if p + 1 < len(kept) else prev
        done.append("".join(out))
        out.clear()
    flush()
    starts += [length] * (len(pages) - len(starts))
    done.append("".join(out))
    text = "".join(done)
    removed = {
        "running_lines": len(running),
        "contents_pages": len(contents),
        "index_pages": len(index),
    }
    labels = tuple(page_labels) if page_labels and any(page_labels) else None
    return PagedText(text, tuple(starts), labels, title or first_heading, removed)


def _normalised(lines: Sequence[Line]) -> Sequence[Line]:
    """A page's lines with ligatures as letters (a PageLines without any: itself)."""
    if isinstance(lines, PageLines):
        if not _LIGATURES.search(lines.text):
            return lines
        return PageLines([replace_text(ln, normalise(ln.text)) for ln in lines], lines.page)
    return [replace_text(ln, normalise(ln.text)) for ln in lines]


def _without(lines: Sequence[Line], left_out: set[int]) -> Sequence[Line]:
    if not left_out:
        return lines
    if isinstance(lines, PageLines):
        return lines.without(left_out)
    return [ln for i, ln in enumerate(lines) if i not in left_out]


def _gap(prev: Line, line: Line) -> bool:
    """A paragraph break: lines further apart than 1.45 times the font size (single spacing
    is about 1.2), or a new column (the line starts above the one before)."""
    size = max(prev.size, line.size, 1.0)
    if line.top < prev.top - size:
        return True
    return min(line.top - prev.top, line.bottom - prev.bottom) > 1.45 * size


def replace_text(line: Line, text: str) -> Line:
    if text == line.text:
        return line
    return line._replace(text=text)


def page_of(page_starts: Sequence[int], offset: int) -> int:
    """The 1-based page holding character `offset` (the last page that starts at or before
    it: an empty page shares its start with the page after it)."""
    from bisect import bisect_right

    return max(1, bisect_right(page_starts, offset))
