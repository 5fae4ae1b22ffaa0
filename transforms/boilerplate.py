"""Corpus-level removal of boilerplate lines (licence headers, generator footers, page headers).

A line is boilerplate when it recurs in many documents of one group (a source folder, or one
JSONL file). HTML is left alone (the extractor already cleaned it), and in code only comment
lines are ever removed. The pure core works without Beam; `RemoveBoilerplate` is the Beam step.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

import apache_beam as beam

from schemas.records import Document, content_hash
from transforms.stage_base import Counts

MIN_KEY_CHARS = 8
MAX_KEY_LINE_CHARS = 10_000
"""A longer line is never boilerplate (headers, footers and notices are short): its key is not
made, which for a 60 MB line split it into 10 million words (600 MB) and shuffled it whole."""
"""Shorter lines ("}", "---", "end", "#") recur naturally and are never boilerplate alone."""

_JSONL_RECORD_SUFFIX = re.compile(r"#L\d+$")


# --- Line keys and groups -------------------------------------------------------------------


def line_key(line: str) -> str | None:
    """The normalised form of a line (stripped, whitespace collapsed), or None if it is blank,
    too short, or has no letter or digit (rules such as "=====" and "/* *****" recur naturally),
    or is over MAX_KEY_LINE_CHARS characters.
    """
    if len(line) > MAX_KEY_LINE_CHARS:
        return None
    key = " ".join(line.split())
    if len(key) < MIN_KEY_CHARS or not any(c.isalnum() for c in key):
        return None
    return key


def group_of(doc: Document) -> str:
    """The group a document is compared within: its source folder, or its JSONL file."""
    return group_of_source(doc.source)


def group_of_source(source: str) -> str:
    """`group_of` a document of this source."""
    record_file, n = _JSONL_RECORD_SUFFIX.subn("", source)
    if n:
        return record_file
    return posixpath.dirname(source)


# --- Comment syntax of code -----------------------------------------------------------------


@dataclass(frozen=True)
class _CommentSyntax:
    line: tuple[str, ...] = ()
    block: tuple[tuple[str, str], ...] = ()
    # Multi-line string delimiters: lines inside them are code even if they look like comments.
    fences: tuple[str, ...] = ()


_C_BLOCK = (("/*", "*/"),)
_C_LIKE = _CommentSyntax(line=("//",), block=_C_BLOCK)
_BACKTICK = _CommentSyntax(line=("//",), block=_C_BLOCK, fences=("`",))
_HASH = _CommentSyntax(line=("#",))
_PYTHON = _CommentSyntax(line=("#",), fences=('"""', "'''"))
_SQL = _CommentSyntax(line=("--",), block=_C_BLOCK)
_LUA = _CommentSyntax(line=("--",), block=(("--[[", "]]"),))
_HASKELL = _CommentSyntax(line=("--",), block=(("{-", "-}"),))
_LISP = _CommentSyntax(line=(";",))
_PERCENT = _CommentSyntax(line=("%",))
_MARKUP = _CommentSyntax(block=(("<!--", "-->"),))
_PHP = _CommentSyntax(line=("//", "#"), block=_C_BLOCK)

_SYNTAX_BY_LANGUAGE: dict[str, _CommentSyntax] = {
    **dict.fromkeys(
        ("c", "h", "cpp", "c++", "cc", "cxx", "hpp", "java", "rust", "rs", "kotlin", "kt"),
        _C_LIKE,
    ),
    **dict.fromkeys(
        ("scala", "swift", "csharp", "c#", "cs", "dart", "objective-c", "objc", "groovy"),
        _C_LIKE,
    ),
    **dict.fromkeys(
        ("javascript", "js", "jsx", "mjs", "cjs", "typescript", "ts", "tsx", "mts", "cts", "go"),
        _BACKTICK,
    ),
    **dict.fromkeys(("golang",), _BACKTICK),
    **dict.fromkeys(("python", "py", "pyi"), _PYTHON),
    **dict.fromkeys(
        ("shell", "sh", "bash", "zsh", "ruby", "rb", "perl", "pl", "r", "yaml", "yml", "toml"),
        _HASH,
    ),
    **dict.fromkeys(("make", "makefile", "dockerfile", "cmake", "powershell", "ps1"), _HASH),
    **dict.fromkeys(("elixir", "ex", "exs", "julia", "jl", "nim"), _HASH),
    **dict.fromkeys(("sql",), _SQL),
    **dict.fromkeys(("lua",), _LUA),
    **dict.fromkeys(("haskell", "hs"), _HASKELL),
    **dict.fromkeys(("lisp", "scheme", "clojure", "clj", "elisp", "el", "scm"), _LISP),
    **dict.fromkeys(("erlang", "erl", "matlab", "tex", "latex"), _PERCENT),
    **dict.fromkeys(("html", "xml", "svg", "xhtml"), _MARKUP),
    **dict.fromkeys(("php",), _PHP),
}


def _comment_syntax(doc: Document) -> _CommentSyntax | None:
    """The comment syntax of a code document, from its language or else its file extension."""
    candidates = [doc.language or ""]
    path = _JSONL_RECORD_SUFFIX.sub("", doc.source)
    name = posixpath.basename(path).lower()
    candidates += [posixpath.splitext(name)[1].lstrip("."), name]
    for candidate in candidates:
        syntax = _SYNTAX_BY_LANGUAGE.get(candidate.strip().lower())
        if syntax is not None:
            return syntax
    return None


def _comment_only(fragment: str, syntax: _CommentSyntax) -> tuple[bool, tuple[str, str] | None]:
    """Whether a stripped fragment holds nothing but comments, and the block left open, if any."""
    while fragment:
        for opener, closer in syntax.block:
            if fragment.startswith(opener):
                end = fragment.find(closer, len(opener))
                if end < 0:
                    return True, (opener, closer)
                fragment = fragment[end + len(closer) :].strip()
                break
        else:
            return fragment.startswith(syntax.line) if syntax.line else False, None
    return True, None


@dataclass(frozen=True)
class _LineInfo:
    removable: bool  # may be removed: prose, or a comment line of code (blank ones in a block)
    delimiter: bool  # the line opens a block comment left open, or closes one
    block: int  # index of the comment block (a run of comment lines) it belongs to, else -1
    alone: bool = True  # may go without the rest of its block (prose; never code comments)


def _classify_code(lines: list[str], syntax: _CommentSyntax) -> list[_LineInfo]:
    """Which lines of a code file are comment lines. Errs on the side of calling a line code."""
    infos: list[_LineInfo] = []
    open_block: tuple[str, str] | None = None
    open_fence: str | None = None
    block = -1
    previous_comment = False
    for number, line in enumerate(lines):
        stripped = line.strip()
        comment = delimiter = False
        if open_block is not None:
            end = stripped.find(open_block[1])
            if end < 0:
                comment = True
            else:
                delimiter = True
                comment, open_block = _comment_only(stripped[end + len(open_block[1]) :], syntax)
        elif open_fence is not None:
            if stripped.count(open_fence) % 2:
                open_fence = None
        elif stripped and not (number == 0 and stripped.startswith("#!")):
            comment, open_block = _comment_only(stripped, syntax)
            delimiter = open_block is not None
            if not comment:
                open_block = None
                open_fence = next((f for f in syntax.fences if stripped.count(f) % 2), None)
        if comment and not previous_comment:
            block += 1
        previous_comment = comment
        infos.append(
            _LineInfo(
                removable=comment, delimiter=delimiter, block=block if comment else -1, alone=False
            )
        )
    return infos


# Markdown lines that belong to a list item, a table or a block quote (a list marker, a table
# row, a quote marker, or the indented continuation of an item): structure, never boilerplate.
_MARKDOWN_STRUCTURE = re.compile(r"(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)|\||>|[ \t]{2,}\S")


def _classify_prose(lines: list[str], markdown: bool) -> list[_LineInfo]:
    """Prose lines may go, but not the fenced code of Markdown; paragraphs form the blocks."""
    infos: list[_LineInfo] = []
    block = -1
    previous_comment = False
    fence: str | None = None
    in_html_comment = False
    for line in lines:
        stripped = line.strip()
        removable = bool(stripped)
        delimiter = False
        if markdown:
            marker = stripped[:3]
            if fence is not None or marker in ("```", "~~~"):
                removable = False
                if fence is None:
                    fence = marker
                elif marker == fence:
                    fence = None
            elif in_html_comment:
                in_html_comment = "-->" not in stripped
                delimiter = not in_html_comment
            elif "<!--" in stripped and "-->" not in stripped[stripped.index("<!--") :]:
                in_html_comment = delimiter = True
            elif _MARKDOWN_STRUCTURE.match(line if line[:1] in " \t" else stripped):
                removable = False
        if removable and not previous_comment:
            block += 1
        previous_comment = removable
        infos.append(
            _LineInfo(removable=removable, delimiter=delimiter, block=block if removable else -1)
        )
    return infos


def _removable(doc: Document, lines: list[str]) -> list[_LineInfo] | None:
    """Line infos of a document, or None if no line of it may be removed."""
    if not _not_html(doc):
        return None
    if doc.doc_type == "code":
        syntax = _comment_syntax(doc)
        # An unknown language: we cannot tell comments from code, so nothing is removed.
        return None if syntax is None else _classify_code(lines, syntax)
    return _classify_prose(lines, markdown=doc.doc_type == "markdown")


def candidate_keys(doc: Document) -> set[str]:
    """The distinct keys of the lines of `doc` that could be removed as boilerplate."""
    lines = doc.text.splitlines(keepends=True)
    infos = _removable(doc, lines)
    if infos is None:
        return set()
    return {
        key
        for line, info in zip(lines, infos, strict=True)
        if info.removable and (key := line_key(line)) is not None
    }


# --- Configuration and decision -------------------------------------------------------------


@dataclass(frozen=True)
class BoilerplateConfig:
    """When a line is boilerplate in its group.

    A line is boilerplate when it is found in at least `min_docs` documents of its group AND in
    at least `min_fraction` of the (non-HTML) documents of that group.
    """

    enabled: bool = True
    min_docs: int = 3
    min_fraction: float = 0.5
    # What boilerplate_tokens_removed counts in: --pricing_tokenizer (the tokens not paid for).
    tokenizer: str = "cl100k_base"

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ValueError(
                f"--boilerplate must be on or off (enabled: a bool), got {self.enabled!r}"
            )
        if isinstance(self.min_docs, bool) or not isinstance(self.min_docs, int):
            raise ValueError(f"--boilerplate_min_docs must be an int, got {self.min_docs!r}")
        if self.min_docs < 2:
            raise ValueError(f"--boilerplate_min_docs must be at least 2, got {self.min_docs}")
        if isinstance(self.min_fraction, bool) or not isinstance(self.min_fraction, int | float):
            raise ValueError(
                f"--boilerplate_min_fraction must be a number, got {self.min_fraction!r}"
            )
        if not 0.0 < self.min_fraction <= 1.0:
            raise ValueError(
                f"--boilerplate_min_fraction must be in (0, 1], got {self.min_fraction}"
            )


def is_boilerplate(docs_with_line: int, docs_in_group: int, config: BoilerplateConfig) -> bool:
    """Whether a line found in `docs_with_line` of `docs_in_group` documents is boilerplate."""
    return (
        docs_in_group > 0
        and docs_with_line >= config.min_docs
        and docs_with_line >= config.min_fraction * docs_in_group
    )


def boilerplate_keys(
    docs_per_key: Mapping[str, int], docs_in_group: int, config: BoilerplateConfig
) -> set[str]:
    """The keys of one group that are boilerplate, from how many of its documents hold each."""
    return {key for key, n in docs_per_key.items() if is_boilerplate(n, docs_in_group, config)}


# --- Removal --------------------------------------------------------------------------------


def _drop_mask(infos: list[_LineInfo], keys: list[str | None], boiler: set[str]) -> list[bool]:
    """Which lines to drop.

    A block (a paragraph, or a run of comment lines) whose every keyed line is boilerplate goes
    whole, with its short and blank lines ("#", " *", "---"). In a paragraph that also holds
    other text, only the boilerplate lines go (a running page header of a text file). A comment
    of code goes whole or not at all: its lines are part of the code unit it documents
    (JavaScript's "* @returns {void}", "/*", "*/" went one by one, cutting 9% of the units).
    """
    blocks: dict[int, bool] = {}
    for info, key in zip(infos, keys, strict=True):
        if info.block >= 0 and key is not None:
            blocks[info.block] = blocks.get(info.block, True) and key in boiler
    drop = []
    for info, key in zip(infos, keys, strict=True):
        if not info.removable:
            drop.append(False)
        elif blocks.get(info.block, False):
            drop.append(True)
        else:
            drop.append(key is not None and key in boiler and info.alone and not info.delimiter)
    return drop


def _remove(doc: Document, boiler: set[str]) -> tuple[Document, list[str], int, bool]:
    """`remove_lines` with the removed lines themselves, plus whether the whole document was
    boilerplate (and so kept as it was)."""
    classified = _classified(doc) if boiler else None
    if classified is None:
        return doc, [], 0, False
    return _remove_from(doc, *classified, boiler)


def _classified(doc: Document) -> tuple[list[str], list[_LineInfo], list[str | None]] | None:
    """A document's lines, their infos and keys; None when none of its lines can go."""
    lines = doc.text.splitlines(keepends=True)
    infos = _removable(doc, lines)
    if infos is None:
        return None
    return lines, infos, [line_key(line) for line in lines]


def _remove_from(
    doc: Document,
    lines: list[str],
    infos: list[_LineInfo],
    keys: list[str | None],
    boiler: set[str],
) -> tuple[Document, list[str], int, bool]:
    """`_remove` of a document whose lines, line infos and keys are known."""
    if not boiler:
        return doc, [], 0, False
    drop = _drop_mask(infos, keys, boiler)
    removed = [line for line, gone in zip(lines, drop, strict=True) if gone]
    if not removed:
        return doc, [], 0, False
    text = "".join(line for line, gone in zip(lines, drop, strict=True) if not gone)
    if not text.strip():
        return doc, [], 0, True
    new_doc = replace(
        doc,
        text=text,
        content_hash=content_hash(text),
        boilerplate_lines_removed=doc.boilerplate_lines_removed + len(removed),
    )
    return new_doc, removed, len(doc.text) - len(text), False


def _cleaned(doc: Document, group_lines: set[bytes]) -> tuple[Document, list[str], int, bool]:
    """`_remove` of a document by its group's boilerplate line digests: its lines are
    classified and keyed once, and not at all when its group has no boilerplate line."""
    classified = _classified(doc) if group_lines else None
    if classified is None:
        return doc, [], 0, False
    keys = classified[2]
    boiler = {key for key in set(keys) if key is not None and digest(key) in group_lines}
    return _remove_from(doc, *classified, boiler)


def remove_lines(doc: Document, boilerplate_keys: set[str]) -> tuple[Document, int, int]:
    """Drop the boilerplate lines of `doc`: (new document, lines removed, characters removed).

    Only whole lines go; the rest of the text is kept byte for byte. HTML documents, code in a
    language whose comments we do not know, and code lines are never touched. A document that
    would be left empty (nothing but boilerplate) is returned unchanged: it is more likely a
    near-duplicate the detection cannot tell from a template than a file with no content.
    """
    new_doc, removed, chars, _ = _remove(doc, boilerplate_keys)
    return new_doc, len(removed), chars


# --- Beam -----------------------------------------------------------------------------------


def _not_html(doc: Document) -> bool:
    # PDF, DOCX and PPTX are left alone too: their running headers went at extraction, and
    # their page maps point into the text as extracted.
    return doc.doc_type not in ("html", "pdf", "docx", "pptx")


DIGEST_BYTES = 8
"""What the counts shuffle of a group and of a line: a blake2b digest of its name or key, not
the text. Two groups of a million sharing a digest: odds of about 3e-8; two lines of ten million
within one group: about 3e-6, and then only their counts are added together."""


def digest(text: str) -> bytes:
    """The digest that stands for a group or a line key in the counts."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=DIGEST_BYTES).digest()


def _enough_docs(entry: tuple[bytes, int], min_docs: int) -> bool:
    return entry[1] >= min_docs


def _group_digest(doc: Document) -> bytes:
    return digest(group_of(doc))


def line_digests_of(doc: Document) -> bytes:
    """The digests of `doc`'s distinct line keys, sorted, end to end: what it adds to its
    group's counts (`documents.line_digests`)."""
    return b"".join(sorted({digest(key) for key in candidate_keys(doc)}))


def with_line_digests(doc: Document) -> Document:
    """`doc` with its `line_digests` when it is counted (not HTML, PDF, DOCX or PPTX): computed
    once, where it is extracted, for the counts and for its row."""
    if doc.line_digests is not None or not _not_html(doc):
        return doc
    return replace(doc, line_digests=line_digests_of(doc))


def split_digests(lines: bytes) -> list[bytes]:
    """`line_digests_of`'s digests, one by one."""
    return [lines[i : i + DIGEST_BYTES] for i in range(0, len(lines), DIGEST_BYTES)]


def _boilerplate_entry(
    entry: tuple[bytes, int],
    docs_in_group: Mapping[bytes, int],
    config: BoilerplateConfig,
) -> Iterator[tuple[bytes, bytes]]:
    """(group + line) and the documents holding it -> (group, line) when it is boilerplate."""
    pair, n = entry
    group, line = pair[:DIGEST_BYTES], pair[DIGEST_BYTES:]
    if is_boilerplate(n, docs_in_group.get(group, 0), config):
        yield group, line


def lines_digest(lines: Iterable[bytes]) -> str:
    """The digest of a group's boilerplate lines (their digests, as a set): what a document
    row records of the lines it was cleaned with, and a rebuild compares."""
    return hashlib.blake2b(b"".join(sorted(set(lines))), digest_size=DIGEST_BYTES).hexdigest()


def boilerplate_group(doc: Document) -> bytes | None:
    """The digest of the group whose lines are removed from `doc`; None for the documents
    that keep every line (HTML, PDF, DOCX, PPTX)."""
    return _group_digest(doc) if _not_html(doc) else None


class _RemoveLinesFn(Counts, beam.DoFn):
    """Removes a group's boilerplate lines from each of its documents, counting what went."""

    def __init__(self, tokenizer: str = "cl100k_base") -> None:
        self.tokenizer_name = tokenizer

    def setup(self) -> None:
        from transforms.chunking.tokens import make_tokenizer

        self.tokenizer = make_tokenizer(self.tokenizer_name, "tiktoken")  # counts only

    def process(
        self, doc: Document, boilerplate: Mapping[bytes, Iterable[bytes]]
    ) -> Iterator[Document]:
        if doc.doc_type == "html":
            yield doc  # never counted, never cut
            return
        group = boilerplate_group(doc)  # None: a document that keeps its lines (PDF...)
        if group is None:
            yield doc
            return
        digests = set(boilerplate[group])  # a multimap: empty for a group without boilerplate
        # the lines it is cleaned with, and those it counted for (computed where it was
        # extracted, as a rule), for the next rebuild
        doc = replace(with_line_digests(doc), boilerplate_digest=lines_digest(digests))
        new_doc, removed, chars, all_boilerplate = _cleaned(doc, digests)
        if removed:
            # Tokens the job no longer embeds (and pays for), for the cost report: those of the
            # removed lines, each counted alone. Never the whole document: tiktoken's
            # pre-tokenizer recurses over a whitespace run, and a long enough one overflows
            # its stack (a Rust panic, which no `except Exception` catches).
            tokens = self._count_lines(removed)
            if tokens is None:
                self.stat("boilerplate_count_failures")
                yield doc  # kept whole: its lines are chunked, and priced, as they are
                return
            new_doc = replace(
                new_doc, boilerplate_tokens_removed=doc.boilerplate_tokens_removed + tokens
            )
            self.stat("boilerplate_tokens_removed", tokens)
            self.stat("boilerplate_lines_removed", len(removed))
            self.stat("boilerplate_chars_removed", chars)
            self.stat("boilerplate_docs_changed")
        elif all_boilerplate:
            self.stat("boilerplate_docs_all_boilerplate_kept")
        yield new_doc

    def _count_lines(self, lines: list[str]) -> int | None:
        """The tokens of `lines`, each encoded alone; None when the tokenizer fails on one."""
        from transforms.chunking.tokens import TokenizerFailed

        try:
            return sum(self.tokenizer.count(line) for line in lines)
        except TokenizerFailed:  # the tokenizer's guard: a panic inside it
            return None


def _pair_digests(doc: Document) -> Iterator[bytes]:
    """The (group, line) pairs of a counted document's distinct line keys (not HTML, PDF, DOCX
    or PPTX), each as one key: the two digests end to end (a tuple of two would shuffle two
    length prefixes more per pair)."""
    lines = with_line_digests(doc).line_digests
    if lines is None:  # not counted
        return
    group = _group_digest(doc)
    for line in split_digests(lines):
        yield group + line


def _group_of_counted(doc: Document) -> Iterator[bytes]:
    if _not_html(doc):
        yield _group_digest(doc)


def count_row(key: bytes, docs: int) -> dict:
    """A row of the `boilerplate` table: a group's count of one line (a key of group + line
    digests) or of its documents (the group's digest alone)."""
    return {"group": key[:DIGEST_BYTES], "line": key[DIGEST_BYTES:], "docs": docs}


class LineCounts(NamedTuple):
    pairs: beam.PCollection  # (group + line digests, documents holding the line)
    groups: beam.PCollection  # (group digest, documents counted in it)

    def rows(self) -> beam.PCollection:
        """The `boilerplate` table's rows (dicts) of these counts."""
        return (
            (self.pairs, self.groups)
            | "Count rows" >> beam.Flatten()
            | "As rows" >> (beam.MapTuple(count_row))
        )


class CountLines(beam.PTransform):
    """PCollection[Document] -> LineCounts: per (group, line key), the documents holding the
    line, and per group its documents (a combine of digests). HTML, PDF, DOCX and PPTX are
    left out (their extraction removed their boilerplate)."""

    def expand(self, docs: beam.PCollection) -> LineCounts:
        groups = (
            docs
            | "Group of each document" >> beam.FlatMap(_group_of_counted).with_output_types(bytes)
            | "Count documents per group" >> beam.combiners.Count.PerElement()
        )
        pairs = (
            docs
            | "Distinct line keys per document"
            >> beam.FlatMap(_pair_digests).with_output_types(bytes)
            | "Count documents per line" >> beam.combiners.Count.PerElement()
        )
        return LineCounts(pairs, groups)


class DecideLines(beam.PTransform):
    """LineCounts -> PCollection[(group digest, line digest)]: the boilerplate lines of every
    group, each line decided against its group's size (a side input), so no step gathers a
    group's lines: a flat folder of many documents is no larger a group than any other."""

    def __init__(self, config: BoilerplateConfig) -> None:
        super().__init__()
        self.config = config

    def expand(self, counts: LineCounts) -> beam.PCollection:
        return (
            counts.pairs
            | "Keep lines in min_docs documents" >> beam.Filter(_enough_docs, self.config.min_docs)
            | "Decide boilerplate lines"
            >> beam.FlatMap(
                _boilerplate_entry, beam.pvalue.AsDict(counts.groups), self.config
            ).with_output_types(tuple[bytes, bytes])
        )


class BoilerplateLines(beam.PTransform):
    """PCollection[Document] -> PCollection[(group digest, line digest)]: the boilerplate lines
    of every group (`CountLines`, then `DecideLines`)."""

    def __init__(self, config: BoilerplateConfig) -> None:
        super().__init__()
        self.config = config

    def expand(self, docs: beam.PCollection) -> beam.PCollection:
        counts = docs | "Count" >> CountLines()
        return counts | "Decide" >> DecideLines(self.config)


class RemoveBoilerplate(beam.PTransform):
    """PCollection[Document] -> PCollection[Document] without the boilerplate lines of each group.

    The lines are `BoilerplateLines` of these documents, or `lines` when given (those of the
    whole corpus, for a rebuild that cleans only the documents that changed). They reach the
    removal as a side input: a CoGroupByKey with the documents would gather a whole folder
    into one element, which one worker must process alone (and everything fused after it).
    With `spread`, the documents are reshuffled evenly over the workers before the removal
    (and whatever fuses after it).
    """

    def __init__(
        self,
        config: BoilerplateConfig,
        label: str | None = None,
        spread: bool = False,
        lines: beam.PCollection | None = None,
    ) -> None:
        super().__init__(label)
        if not isinstance(config, BoilerplateConfig):
            raise ValueError(f"config must be a BoilerplateConfig, got {config!r}")
        self.config = config
        self.spread = spread
        self.lines = lines

    def expand(self, docs: beam.PCollection) -> beam.PCollection:
        if not self.config.enabled:
            if self.spread:
                return docs | "Spread documents" >> beam.Reshuffle()
            return docs | "Pass through (disabled)" >> beam.Map(_identity).with_output_types(
                Document
            )
        boilerplate = self.lines
        if boilerplate is None:
            boilerplate = docs | "Boilerplate lines" >> BoilerplateLines(self.config)
        if self.spread:
            # The removal waits for the side input, so its documents are held somewhere: in
            # the reshuffle, which also spreads them evenly, rather than once more before it.
            docs = docs | "Spread documents" >> beam.Reshuffle()
        return docs | "Remove boilerplate lines" >> beam.ParDo(
            _RemoveLinesFn(self.config.tokenizer), beam.pvalue.AsMultiMap(boilerplate)
        ).with_output_types(Document)


def _identity(doc: Document) -> Document:
    return doc
