"""Path headers: a chunk's file (and folders), title and section path; `HeaderFitter` cuts any
header (a path or an LLM line) to fit the run's token budget in both tokenizers."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from schemas.records import CONTEXT_JOINER, Chunk
from transforms.chunking.split import longest_prefix
from transforms.chunking.tokens import Tokenizer, count_with_prefix, make_tokenizer
from transforms.context.config import ELLIPSIS, PATH_SEPARATOR
from transforms.token_budget import MODEL_SPECIAL_TOKENS, TokenBudget

# A heading (or title) longer than this is cut, with "…", before it goes into a path header:
# the header is held to a few dozen tokens anyway (--context_max_tokens, 32 by default, about
# 130 characters), and six 40 KB headings cost 19 ms a chunk to join and fit (0.2 ms is usual).
MAX_HEADING_CHARS = 256


# Where a signature's parameter list opens: "(" right after a name, a closing bracket or a
# generic's ">" ("click.Context(", "Map<K, V>(", "get()["...), never after a space (a title's
# "Timeout (JUnit API)", PostgreSQL's "LIMIT TO ( table_name").
_PARAMETERS_OPEN = re.compile(r"[\w\]>](?=\()")
# A manual page's section, no parameter list: "git-shortlog(1)", "cmake-buildsystem(7)",
# "printf(3p)" (asciidoc's and Sphinx's man pages title their pages so)
_MAN_SECTION = re.compile(r"\d[a-z]{0,3}")


def without_parameters(heading: str) -> str:
    """A signature's name without its parameter list: "class click.Context(…)" for "class
    click.Context(command, parent=None, info_name=None, obj=None, …)".

    A header names what a chunk is about; of a definition's term (`transforms.ingest.
    definitions`) the name does that, and its parameters cost the header's tokens (a Sphinx
    class's run to hundreds of characters) and pull the embedding towards every chunk under
    the same class. On the evaluation's tune half, headers with parameter lists elided (in
    every entry, the chunk's own term too) raised MRR@10 0.592 -> 0.608 with Recall@10 level
    (docs/evaluation.md, "signatures named without parameters"). The first list only; an
    empty one ("close()"), a manual page's section ("git-shortlog(1)") and a heading without
    one stay as they are; a list cut short (MAX_HEADING_CHARS) is closed.
    The section path keeps the whole term: only the header is shortened.
    """
    opening = _PARAMETERS_OPEN.search(heading)
    if opening is None:
        return heading
    start, depth = opening.end(), 0
    for i in range(start, len(heading)):
        c = heading[i]
        if c in _OPENING:
            depth += 1
        elif c in _CLOSING:
            depth -= 1
            if depth == 0:
                inside = heading[start + 1 : i].strip()
                if not inside or _MAN_SECTION.fullmatch(inside):
                    return heading
                return heading[: start + 1] + ELLIPSIS + heading[i:]
    return heading[: start + 1] + ELLIPSIS + ")"


def _clean_heading(text: str) -> str:
    text = text.lstrip("#")
    cut = len(text) > 4 * MAX_HEADING_CHARS  # only the start is kept: whitespace runs aside
    clean = without_parameters(" ".join(text[: 4 * MAX_HEADING_CHARS].split()))
    cut = cut and not clean.endswith(ELLIPSIS + ")")
    if cut or len(clean) > MAX_HEADING_CHARS:
        return clean[:MAX_HEADING_CHARS].rstrip() + ELLIPSIS
    return clean


def _clean_entry(entry: str) -> tuple[str, ...]:
    """A section path entry as its items (`entry_items`: merged siblings' headings), each
    cleaned and held to MAX_HEADING_CHARS, so that a long signature does not hide the
    siblings after it."""
    return tuple(c for c in (_clean_heading(i) for i in entry_items(entry)) if c)


def _joined(entries: list[tuple[str, ...]]) -> str:
    return PATH_SEPARATOR.join(", ".join(items) for items in entries)


def _same_heading(a: str, b: str) -> bool:
    return a.casefold() == b.casefold()


def _source_tail(source: str, parts: int) -> str:
    """The last `parts` components of a path or URI, without scheme, query or #L<line>."""
    path = source.split("#", 1)[0].split("?", 1)[0]
    components = [c for c in re.split(r"[\\/]+", path) if c and not c.endswith(":")]
    return "/".join(components[-parts:])


def path_header(chunk: Chunk, folders: int = 0) -> str:
    """The chunk's place in its corpus and document, e.g. "guide.md > Guide > Installation".

    The file name of its source ("sql-vacuum.html", "copyright") with the last `folders`
    folders above it (--header_folders: 1 gives "postgresql/sql-vacuum.html"), then for prose
    the title and the section path, without repeating a first heading equal to the title, and
    for code the enclosing class/function path. By default (0) no folder: on the evaluation's
    tune half with neutral folder names, a folder that names nothing cost Recall@10 and MRR@10
    (docs/evaluation.md, "no folder"); this is the header `eval.header_ablation` builds with
    `--keep file title sections term`. The path comes first: a header over its budget has its
    long entries cut to one length (`HeaderFitter.fit_path`), then its end, never where the
    document is. A chunk that starts inside a Markdown
    table (one too large for a chunk, split between rows) gets the table's header row on a
    line after the path.
    """
    return _joined(path_parts(chunk, folders)) + table_line(chunk)


def path_parts(chunk: Chunk, folders: int = 0) -> list[tuple[str, ...]]:
    """The entries `path_header` joins, each as its items (`entry_items`), the items of one
    entry joined by ", ": the place first, then the title and the sections."""
    place = _source_tail(chunk.source, folders + 1)
    sections = [s for s in (_clean_entry(s) for s in chunk.section_path) if s]
    if chunk.doc_type == "code":
        parts = [(place,), *sections]
    else:
        title = (_clean_heading(chunk.title or ""),)
        if sections and title[0] and _same_heading(", ".join(sections[0]), title[0]):
            sections = sections[1:]
        parts = [(place,), title, *sections]
    out: list[tuple[str, ...]] = []
    for part in parts:
        if not any(part):
            continue
        if not (out and _same_heading(", ".join(out[-1]), ", ".join(part))):
            out.append(part)
    return out


# A chunk's first line as an ATX heading: its text
_OPENING_HEADING = re.compile(r"#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*")


def opens_with_title(chunk: Chunk) -> bool:
    """Whether the chunk is its page's opening: its text starts with the document's title as
    a heading, the chunk's top section ("# ABORT", its purpose line, synopsis and first
    paragraph). Such a chunk says itself what a path header would, so it is embedded
    without one.

    On the evaluation's tune half (docs/evaluation.md, "the opening chunk without a header"),
    the file, title and section names before such a chunk drew the page's later chunks level
    with it and lowered its own similarity to questions about the page: PostgreSQL's MRR@10
    0.621 -> 0.690 without them (0.619 with the file name alone), overall 0.607 -> 0.617,
    Recall@10 level. Prose only (code has no title heading); a piece of a split table keeps
    its column line."""
    if chunk.table_header:
        return False
    return text_opens_with_title(chunk.text, chunk.title, chunk.doc_type, chunk.section_path)


def text_opens_with_title(
    text: str, title: str | None, doc_type: str, section_path: Sequence[str]
) -> bool:
    """`opens_with_title` on a chunk's fields (the header ablation reads them from Parquet).
    The heading is compared as plain text (`heading_text`: Sphinx's "# `sphinx.ext.todo` –
    ..." is the title "sphinx.ext.todo – ..."), and must be the chunk's top section, so
    that a later chunk that starts with a heading equal to the title is not taken for the
    opening; a line indented as code is no heading."""
    if doc_type == "code" or not title or not section_path:
        return False
    m = _OPENING_HEADING.fullmatch(text.split("\n", 1)[0])
    if m is None:
        return False
    from transforms.chunking.markdown import heading_text

    heading = _clean_heading(heading_text(m[1]))
    return (
        bool(heading)
        and _same_heading(heading, _clean_heading(section_path[0]))
        and _same_heading(heading, _clean_heading(heading_text(title)))
    )


# A reference page's name line: the name, a dash, what it is for ("VACUUM — garbage-collect
# and optionally analyze a database", a man page's "git-blame - Show what revision ...")
_NAME_LINE_DASH = re.compile(r"[ \t]+(?:—|–|-{1,2})[ \t]+")
_FENCE_LINE = re.compile(r"(?:```|~~~)")


def name_line_lead(
    title: str | None, doc_type: str, section_path: Sequence[str], texts: Sequence[str]
) -> tuple[int, str] | None:
    """(index in `texts`, name line) when a document's chunk texts (in order, parents left
    out; `title`, `doc_type` and `section_path` are its first chunk's) open as a reference
    page whose opening chunk could not reach the page's description.

    DocBook's reference pages and man pages open with a title, a name line (the title, or
    names among which the title, a dash, what the command is for: "VACUUM — garbage-collect
    and optionally analyze a database", "SELECT, TABLE, WITH — retrieve rows from a table or
    view"), a synopsis and a description. The opening chunk goes on into the
    description's first paragraphs where they fit (`MarkdownChunker`), so that the sentence
    saying what the page is for shares the chunk of the phrase saying it; where the synopsis
    fills the opening (the opening holds no heading after the synopsis's), the chunk that
    holds the next section's heading gets the name line in place of the title in its path header
    ("sql-vacuum.html > VACUUM — garbage-collect and optionally analyze a database >
    Description"). That chunk only: the name line in every chunk's header made each of them
    match the page's questions (docs/decisions.md)."""
    if not texts or not text_opens_with_title(texts[0], title, doc_type, section_path):
        return None
    blocks = [line.rstrip() for line in texts[0].split("\n")[1:] if line.strip()]
    if len(blocks) < 3:
        return None
    name, heading = blocks[0], blocks[1]
    dash = _NAME_LINE_DASH.search(name)
    # the names before the dash: one, or several that share the page (DocBook's "SELECT,
    # TABLE, WITH — retrieve rows from a table or view", a man page's "printf, fprintf -"),
    # of which the title is one
    names = name[: dash.start()].split(", ") if dash is not None else []
    titled = _clean_heading(title or "")
    named = any(_same_heading(_clean_heading(n), titled) for n in names)
    if not named or not _OPENING_HEADING.fullmatch(heading):
        return None
    # The opening holds no other heading (outside code): it ends in its first section. Then
    # the chunk that holds the next heading is where the page's prose starts.
    in_code = False
    for i, text in enumerate(texts):
        lines = blocks[2:] if i == 0 else text.split("\n")
        for line in lines:
            if _FENCE_LINE.match(line.lstrip()):
                in_code = not in_code
            elif not in_code and _OPENING_HEADING.fullmatch(line):
                return None if i == 0 else (i, " ".join(name.split()))
    return None


def name_line_chunk(chunks: Iterable[Chunk]) -> tuple[str, str] | None:
    """(chunk id, name line): of one document's chunks (in any order, parents among them),
    the one that takes the page's name line in its header (`name_line_lead`). The job calls
    it on its chunks, eval.header_ablation on the rows it read back."""
    children = sorted((c for c in chunks if not c.is_parent), key=lambda c: c.chunk_index)
    if not children:
        return None
    first = children[0]
    found = name_line_lead(
        first.title, first.doc_type, first.section_path or (), [c.text for c in children]
    )
    return None if found is None else (children[found[0]].chunk_id, found[1])


def table_line(chunk: Chunk) -> str:
    """A piece of a split table: its column names on a line after the path; else ""."""
    return "\n" + chunk.table_header if chunk.table_header else ""


# The shortest an item of a path header's entry is cut to (then the header is cut at its end).
MIN_ITEM_CHARS = 16
_OPENING, _CLOSING = "([{", ")]}"


def entry_items(entry: str) -> list[str]:
    """The items of a path entry: merged siblings' headings joined by ", " (the chunker's
    `SIBLING_JOINER`), split at the commas outside brackets, so that a signature's parameter
    list stays one item: "click.style(text, fg=None), click.unstyle(text)" is two."""
    if ", " not in entry:  # one item (most entries): no scan
        return [entry]
    items, depth, start = [], 0, 0
    for i, c in enumerate(entry):
        if c in _OPENING:
            depth += 1
        elif c in _CLOSING:
            depth = max(depth - 1, 0)
        elif c == ELLIPSIS:  # an item cut short (MAX_HEADING_CHARS): its brackets end there
            depth = 0
        elif c == "," and depth == 0 and entry.startswith(", ", i):
            items.append(entry[start:i])
            start = i + 2
    items.append(entry[start:])
    return items


def _cut(item: str, cap: int) -> str:
    return item if len(item) <= cap else item[:cap].rstrip() + ELLIPSIS


def _capped(parts: list[tuple[str, ...]], tail: str, cap: int) -> str:
    """The header of `parts` with every item after the place cut to `cap` characters."""
    return _joined([parts[0], *(tuple(_cut(i, cap) for i in p) for p in parts[1:])]) + tail


def balanced_header(parts: list[tuple[str, ...]], tail: str, fits: Callable[[str], bool]) -> str:
    """A header of `parts` with its long items (`entry_items`: a heading, a merged sibling's
    heading) cut to one length, the longest that `fits` (an item shorter than that stays
    whole; the place, `parts[0]`, always does): a Sphinx class's signature of hundreds of
    characters no longer pushes the method under it, or a long signature the sibling after it,
    out of the chunk's header. When even items of MIN_ITEM_CHARS do not fit: an entry of
    several items (merged siblings) with its last items left out for one "…" (`_fewer_items`),
    else the entries above the deepest written "…" (`_fewer_entries`), else items of
    MIN_ITEM_CHARS for the caller to cut at the end."""
    balanced = _balanced(parts, tail, fits)
    if balanced is not None:
        return balanced
    capped = min(MIN_ITEM_CHARS, _longest_item(parts))
    return (
        _fewer_items(parts, tail, capped, fits)
        or _fewer_entries(parts, tail, fits)
        or _capped(parts, tail, capped)
    )


def _longest_item(parts: list[tuple[str, ...]]) -> int:
    return max((len(i) for p in parts[1:] for i in p), default=0)


def _balanced(parts: list[tuple[str, ...]], tail: str, fits: Callable[[str], bool]) -> str | None:
    """The header of `parts`, which does not fit whole, with its items cut to the longest one
    length that `fits`, no shorter than MIN_ITEM_CHARS; None when none does."""
    longest = _longest_item(parts)
    lo, hi = MIN_ITEM_CHARS, longest - 1
    if hi < lo or not fits(_capped(parts, tail, lo)):
        return None
    while lo < hi:  # the largest cap in [lo, hi] that fits
        mid = (lo + hi + 1) // 2
        if fits(_capped(parts, tail, mid)):
            lo = mid
        else:
            hi = mid - 1
    return _capped(parts, tail, lo)


def _fewer_entries(
    parts: list[tuple[str, ...]], tail: str, fits: Callable[[str], bool]
) -> str | None:
    """The header of `parts` with the fewest of the entries between its first two (the place
    and the title, or a code file's outermost scope) and its deepest written as one "…", so
    that the deepest entries, which name what the chunk holds, stay: a deep manual's
    "erts-13.1.5.pdf > Erlang Run-Time… > 1 ERTS User's Gu… > 1.6 How to Im" lost its
    "1.6.2 Distribution Module" and the record under it when the header was cut at its end.
    Their items cut to one length as in `balanced_header`: the fewest entries left out that
    keep the deepest entry whole, else the fewest that fit at all; None when none fits."""
    first_fit = None
    for drop in range(1, len(parts) - 2):
        fewer = [*parts[:2], (ELLIPSIS,), *parts[2 + drop :]]
        whole = _joined(fewer) + tail
        candidate = whole if fits(whole) else _balanced(fewer, tail, fits)
        if candidate is None:
            candidate = _fewer_items(fewer, tail, min(MIN_ITEM_CHARS, _longest_item(fewer)), fits)
        if candidate is None:
            continue
        if candidate.removesuffix(tail).endswith(", ".join(parts[-1])):
            return candidate
        first_fit = first_fit or candidate
    return first_fit


def _fewer_items(
    parts: list[tuple[str, ...]], tail: str, cap: int, fits: Callable[[str], bool]
) -> str | None:
    """The header of `parts` (items cut to `cap`) whose deepest entry of several items keeps
    as many of its first items as `fits`, the rest written "…"; None when none fits. A
    header cut at its end lost the deepest entry's last items mid-word: SQLite's math
    functions, "acos(…), acosh(…), asin(…)," and "degrees(…), exp(…), floor(…), ln("."""
    deepest = next((k for k in range(len(parts) - 1, 0, -1) if len(parts[k]) > 1), None)
    if deepest is None:
        return None
    items = parts[deepest]
    for keep in range(len(items) - 1, 0, -1):
        fewer = [*parts[:deepest], (*items[:keep], ELLIPSIS), *parts[deepest + 1 :]]
        candidate = _capped(fewer, tail, cap)
        if fits(candidate):
            return candidate
    return None


def _clean_cut(prefix: str) -> str:
    """A cut header without trailing whitespace or a dangling " >" separator."""
    return prefix.rstrip().removesuffix(PATH_SEPARATOR.rstrip()).rstrip()


# No token of the tiktoken encodings is longer than this many characters (cl100k_base's longest
# is 128 bytes, o200k_base's 128 too), so no text of more than n * this characters fits in n
# tokens: a header or an LLM line is cut to that before fitting, and a 80 KB title costs no
# more than a short one.
MAX_TOKEN_CHARS = 128


def _longest_fit(tokens: int) -> int:
    return max(tokens, 1) * MAX_TOKEN_CHARS


# A header is cut to this many characters a token of its budget before it is fitted: fitting
# probes prefixes at every token boundary, so its cost grows with the square of what it is
# given (a 4,096-character header, the MAX_TOKEN_CHARS bound of 32 tokens, cost 10 ms a
# chunk). Headers are words, paths and " > ": about 4 characters a token; one of longer
# tokens is only cut shorter than it could be, never over its budget.
HEADER_CHARS_PER_TOKEN = 16


def _header_chars(tokens: int) -> int:
    return max(tokens, 1) * HEADER_CHARS_PER_TOKEN


def header_fits(
    header: str,
    text: str,
    budget: int,
    tokenizer: Tokenizer,
    max_header_tokens: int | None = None,
    text_tokens: int | None = None,
) -> bool:
    """Whether `fit_header` would keep `header` whole before `text` (no cut)."""
    if not header.strip() or len(header) > _header_chars(min(budget, max_header_tokens or budget)):
        return False
    return _fits(header, text, budget, tokenizer, max_header_tokens, text_tokens)


def _fits(
    header: str,
    text: str,
    budget: int,
    tokenizer: Tokenizer,
    max_header_tokens: int | None,
    text_tokens: int | None,
) -> bool:
    """Whether `header` + joiner + `text` is within `budget` tokens, and `header` alone within
    `max_header_tokens` where given."""
    if max_header_tokens is not None and tokenizer.count(header) > max_header_tokens:
        return False
    return count_with_prefix(tokenizer, header + CONTEXT_JOINER, text, text_tokens) <= budget


def fit_header(
    header: str,
    text: str,
    budget: int,
    tokenizer: Tokenizer,
    max_header_tokens: int | None = None,
    text_tokens: int | None = None,
) -> str | None:
    """`header`, cut at the end if needed, so that `count(header + "\\n\\n" + text) <= budget`.

    A cut header keeps its start and ends in "…" when that still fits. With `max_header_tokens`
    the header alone is also held to that many tokens. None when no non-empty header fits.
    `text_tokens`, the tokenizer's count of `text` when known, spares encoding `text` again for
    each candidate where the joined count provably adds up (`count_joined`).
    """
    if not header.strip():
        return None
    header = header[: _header_chars(min(budget, max_header_tokens or budget))]

    def accept(candidate: str) -> bool:
        return _fits(candidate, text, budget, tokenizer, max_header_tokens, text_tokens)

    if accept(header):
        return header
    cut = longest_prefix(header, tokenizer, accept, _clean_cut)
    if cut is None:
        return None
    return cut + ELLIPSIS if accept(cut + ELLIPSIS) else cut


@dataclass(frozen=True)
class FittedHeader:
    """A header fitted to the budget, and the model's count of what it will read."""

    context: str | None  # None: no non-empty header fits
    # The model's word pieces of header + joiner + text, [CLS] and [SEP] included (None: no
    # model, or no header)
    model_tokens: int | None = None
    shortened_for_model: bool = False  # cut further, in word pieces, for the model's limit


class HeaderFitter:
    """Fits a chunk's header to a `TokenBudget`, in both tokenizers at once.

    First in the chunk tokenizer: header + joiner + text within `chunk_size` (and the header
    alone within `max_header_tokens` where given). Then, with an embedding model, in its word
    pieces: a header that would push the text past the model's max_seq_length is cut further,
    so the model reads every chunk whole (the chunk's text itself already fits: the chunkers
    keep the model's header room free).
    """

    def __init__(
        self, budget: TokenBudget, tokenizer: Tokenizer, model: Tokenizer | None = None
    ) -> None:
        if (model is None) != (budget.model_input_tokens is None):
            raise ValueError(
                "HeaderFitter needs the model's tokenizer exactly when the budget has a model"
            )
        self.budget = budget
        self.tokenizer = tokenizer
        self.model = model

    @classmethod
    def for_budget(cls, budget: TokenBudget) -> HeaderFitter:
        """The fitter of `budget` with its tokenizers (tiktoken itself: headers are counted
        alone, and the model's from its folder)."""
        return cls(budget, make_tokenizer(budget.tokenizer, "tiktoken"), budget.model())

    def fit(
        self,
        header: str,
        text: str,
        text_tokens: int | None = None,
        max_header_tokens: int | None = None,
    ) -> FittedHeader:
        """`header` cut to fit before `text`; `text_tokens` is the chunk tokenizer's count of
        `text` when known (the chunk's token_count), which spares encoding it again."""
        budget = self.budget
        fitted = fit_header(
            header, text, budget.chunk_size, self.tokenizer, max_header_tokens, text_tokens
        )
        if fitted is None:
            return FittedHeader(None)
        read_whole = self._read_whole(fitted, text)
        if read_whole is not None:
            return read_whole
        assert self.model is not None and budget.model_input_tokens is not None
        limit = budget.model_input_tokens
        shortened = fit_header(fitted, text, limit, self.model)
        if shortened is None:
            return FittedHeader(None, None, shortened_for_model=True)
        pieces = self.model.count(shortened + CONTEXT_JOINER + text)
        return FittedHeader(shortened, pieces + MODEL_SPECIAL_TOKENS, shortened_for_model=True)

    def _read_whole(self, header: str, text: str) -> FittedHeader | None:
        """`header` as it is, with the model's count of what it reads, when the model reads it
        and `text` whole (always without a model); None when it would not."""
        if self.model is None:
            return FittedHeader(header)
        limit = self.budget.model_input_tokens
        assert limit is not None
        pieces = self.model.count(header + CONTEXT_JOINER + text)
        if pieces > limit:
            return None
        return FittedHeader(header, pieces + MODEL_SPECIAL_TOKENS)

    def fit_path(
        self,
        parts: list[tuple[str, ...]],
        tail: str,
        text: str,
        text_tokens: int | None = None,
        max_header_tokens: int | None = None,
    ) -> FittedHeader:
        """The path header of `parts` (`path_parts`) and `tail` (`table_line`) fitted before
        `text`: whole when it fits; else with its long items cut to one length
        (`balanced_header`), so that the deepest entry, the one that names what the chunk
        holds, stays, and cut at its end (`fit`) when that is not enough."""
        header = _joined(parts) + tail
        budget = self.budget

        def whole(candidate: str) -> FittedHeader | None:
            """What `fit` gives when it keeps `candidate` whole; None when it would cut it."""
            if not header_fits(
                candidate, text, budget.chunk_size, self.tokenizer, max_header_tokens, text_tokens
            ):
                return None
            return self._read_whole(candidate, text)

        fitted = whole(header)
        if fitted is not None:
            return fitted
        if len(parts) < 2:
            return self.fit(header, text, text_tokens, max_header_tokens)
        balanced = balanced_header(parts, tail, lambda c: whole(c) is not None)
        return self.fit(balanced, text, text_tokens, max_header_tokens)


def truncate_tokens(text: str, max_tokens: int, tokenizer: Tokenizer) -> str:
    """`text` cut at a token boundary to at most `max_tokens` tokens ("" if none fits)."""
    text = text[: _longest_fit(max_tokens)]
    if tokenizer.count(text) <= max_tokens:
        return text
    cut = longest_prefix(text, tokenizer, lambda c: tokenizer.count(c) <= max_tokens, _clean_cut)
    return cut or ""
