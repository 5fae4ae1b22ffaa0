"""Source-code chunker: cuts at syntax boundaries (definitions, statements) found by tree-sitter.

Definitions that fit the token budget are never split, small neighbours are packed together, and
every cut falls at a line start, so a chunk is whole lines of code with their indentation.
"""

from __future__ import annotations

import bisect
import importlib
import itertools
import re
from collections.abc import Iterator
from typing import Any

from transforms.chunking.base import Chunker, ChunkSpan, common_prefix
from transforms.chunking.split import LINE, check_deadline, recursive_split
from transforms.chunking.tokens import TokenizedText, Tokenizer, count_alone

SUPPORTED_LANGUAGES = (
    "python",
    "javascript",
    "typescript",
    "tsx",
    "go",
    "rust",
    "java",
    "c",
    "cpp",
    "ruby",
    "bash",
)

# language -> (grammar module, function returning the language pointer, pip package)
_GRAMMARS: dict[str, tuple[str, str, str]] = {
    "python": ("tree_sitter_python", "language", "tree-sitter-python"),
    "javascript": ("tree_sitter_javascript", "language", "tree-sitter-javascript"),
    "typescript": ("tree_sitter_typescript", "language_typescript", "tree-sitter-typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx", "tree-sitter-typescript"),
    "go": ("tree_sitter_go", "language", "tree-sitter-go"),
    "rust": ("tree_sitter_rust", "language", "tree-sitter-rust"),
    "java": ("tree_sitter_java", "language", "tree-sitter-java"),
    "c": ("tree_sitter_c", "language", "tree-sitter-c"),
    "cpp": ("tree_sitter_cpp", "language", "tree-sitter-cpp"),
    "ruby": ("tree_sitter_ruby", "language", "tree-sitter-ruby"),
    "bash": ("tree_sitter_bash", "language", "tree-sitter-bash"),
}

# Nodes that name a scope in `section_path` (the node types of all supported grammars).
_DEFINITIONS = frozenset(
    {
        # python
        "function_definition",
        "class_definition",
        # javascript / typescript
        "function_declaration",
        "generator_function_declaration",
        "class_declaration",
        "abstract_class_declaration",
        "method_definition",
        "interface_declaration",
        "enum_declaration",
        "internal_module",
        "module",
        "lexical_declaration",
        "variable_declaration",
        # go
        "method_declaration",
        "type_declaration",
        # rust
        "function_item",
        "function_signature_item",
        "struct_item",
        "enum_item",
        "trait_item",
        "impl_item",
        "mod_item",
        # java
        "record_declaration",
        "constructor_declaration",
        "annotation_type_declaration",
        # c / c++
        "class_specifier",
        "struct_specifier",
        "union_specifier",
        "enum_specifier",
        "namespace_definition",
        # ruby
        "method",
        "singleton_method",
        "class",
    }
)
# Wrappers around one definition (decorators, `export`, templates): named after the inner one.
_WRAPPERS = frozenset({"decorated_definition", "export_statement", "template_declaration"})
# Nodes that belong to the code after them: a comment above a function, a decorator, a Rust
# attribute. No cut is made between such a node (on its own line) and the next sibling.
_GLUE = frozenset(
    {"comment", "line_comment", "block_comment", "decorator", "attribute_item", "annotation"}
)
# Deeper than this the syntax tree is a long expression chain; lines are a better guide there
# (and Python's recursion limit stays far away).
_MAX_DEPTH = 60
# Larger sources are cut by lines without tree-sitter. The parse is one C call that neither the
# chunk stage's time limit nor anything else can interrupt, and its time and memory grow with
# the file: 1 MB of "(" parses in 0.9 s and 270 MB here (16 s and 483 MB, walk included, on
# the machine of issue 22), a 19 MB .py took 5 GB. Hand-written source stays far below 1 MiB
# (the largest file of CPython's standard library is about 0.7 MB); what is larger is generated
# (API message classes, minified bundles, data tables), where definitions say little.
MAX_PARSE_BYTES = 1 << 20
_NEWLINE = re.compile("\n")


class CodeChunker(Chunker):
    """Source code in one of `SUPPORTED_LANGUAGES`, cut at syntax boundaries on whole lines.

    `section_path` holds the bare names of the enclosing definitions, outermost first, e.g.
    `("Foo", "bar")` for method `bar` of class `Foo` (`impl` blocks are named by their type);
    a chunk of several units gets the common prefix of their paths. Text in another language
    (or `language=None`, or a parser error, or a source over `MAX_PARSE_BYTES`) is cut at line
    starts only, with the same
    strategy name "code" and an empty `section_path`. Overlap, when asked for, is whole lines
    taken from the previous chunk, and the units are packed to `chunk_size - chunk_overlap`.
    """

    strategy = "code"

    # Parsers are C objects that neither pickle nor belong in a DoFn's constructor: they are
    # built on first use in each worker (`_parser`) and dropped by __getstate__.
    _parsers: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_parsers", None)
        return state

    def trim_span(self, text: str, start: int, end: int) -> tuple[int, int]:
        """Drop leading blank lines and trailing whitespace; keep the first line's indentation."""
        first = start
        while first < end and text[first].isspace():
            first += 1
        if first == end:
            return start, start
        newline = text.rfind("\n", start, first)
        start = newline + 1 if newline >= 0 else start
        while end > start and text[end - 1].isspace():
            end -= 1
        return start, end

    def split(self, doc: TokenizedText, language: str | None = None) -> list[ChunkSpan]:
        text = doc.text
        budget = self.chunk_size - self.chunk_overlap
        lines = _Lines(doc)
        # surrogatepass: a lone surrogate must not abort the document; tree-sitter rows only
        # depend on the b"\n" bytes, which survive any encoding choice.
        src = text.encode("utf-8", "surrogatepass")
        tree = self._parse(src, language)
        walker = _SyntaxWalker(doc, lines, src, budget, self.tokenizer)
        if tree is None:
            walker.walk_lines(0, lines.n_lines, ())
        else:
            walker.walk(tree.root_node, 0, lines.n_lines, (), 0)
        pieces = walker.pieces
        chunks = _pack(doc, pieces, budget)
        if self.chunk_overlap:
            chunks = _with_line_overlap(doc, lines, chunks, self.chunk_overlap)
        return [ChunkSpan(s, e, section_path=p, strategy=self.strategy) for s, e, p in chunks]

    def _parse(self, src: bytes, language: str | None) -> Any:
        """The syntax tree, or None for an unsupported language or a parser failure.

        The parser reads the source with every byte past ASCII replaced by "x": grammars' C
        scanners crash on some code points (tree-sitter-bash 0.25.1 segfaults the whole
        process on `a{` and U+F5117, found by tests/test_fuzz.py), and neither rows (the b"\n"
        bytes) nor byte offsets change, so the tree fits the real source, from which names are
        read. Non-ASCII characters stand in identifiers, strings and comments, where "x" keeps
        the syntax.
        """
        if language is None or language.lower() not in _GRAMMARS:
            return None
        if len(src) > MAX_PARSE_BYTES:
            return None
        parser = self._parser(language.lower())
        try:
            return parser.parse(src.translate(_ASCII_ONLY))
        except (ValueError, RuntimeError):
            return None

    def _parser(self, language: str) -> Any:
        if self._parsers is None:
            self._parsers = {}
        parser = self._parsers.get(language)
        if parser is None:
            module_name, function, package = _GRAMMARS[language]
            try:
                import tree_sitter

                grammar = importlib.import_module(module_name)
            except ImportError as e:
                raise ImportError(
                    f"code chunking of {language} needs `pip install tree-sitter {package}`"
                ) from e
            parser = tree_sitter.Parser(tree_sitter.Language(getattr(grammar, function)()))
            self._parsers[language] = parser
        return parser


_ASCII_ONLY = bytes(range(128)) + b"x" * 128  # bytes.translate table: past ASCII -> "x"


class _Lines:
    """Line starts of a document as token-boundary cut points, indexed by tree-sitter row.

    tree-sitter rows count b"\\n" bytes, exactly as `str` lines count "\\n" characters, so rows
    map to character offsets without converting byte offsets.
    """

    def __init__(self, doc: TokenizedText) -> None:
        self.doc = doc
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(doc.text)]
        self.n_lines = len(self.starts)
        self._cuts: dict[int, int] = {}

    def cut(self, row: int) -> int:
        """The cut point for "before line `row`": its start, or the nearest boundary that only
        moves whitespace across the cut."""
        if row <= 0:
            return 0
        if row >= self.n_lines:
            return len(self.doc.text)
        cut = self._cuts.get(row)
        if cut is None:
            cut = self._cuts[row] = self._snap(self.starts[row])
        return cut

    def _snap(self, start: int) -> int:
        doc, text = self.doc, self.doc.text
        floor = doc.floor(start)
        if floor == start or text[floor:start].isspace():
            # Usual case, or a whitespace token (blank lines) across the line start: the next
            # chunk starts with blank lines that trim_span drops.
            return floor
        ceil = doc.ceil(start)
        if text[start:ceil].isspace():
            # A token spanning "\n" and indentation, or blank lines (".\n\n\n" is one
            # token): the cut moves forward over whitespace alone, to the next line start.
            return ceil
        return floor  # never seen with cl100k on code; keeps the hard limit, cuts mid-line

    def is_blank(self, row: int) -> bool:
        end = self.starts[row + 1] if row + 1 < self.n_lines else len(self.doc.text)
        return self.doc.text[self.starts[row] : end].isspace()

    def row_at_or_after(self, pos: int) -> int:
        return bisect.bisect_left(self.starts, pos)


def _last_row(node: Any) -> int:
    end = node.end_point
    return end.row if end.column > 0 or end.row == node.start_point.row else end.row - 1


def _members(node: Any) -> Iterator[Any]:
    """The children of `node`, with its body block replaced by the block's own children.

    Once a definition is too big, its header, statements and closing brace are separate pieces
    that pack together; keeping the body whole would strand the header in a chunk of its own.
    """
    # One pass over the fields (`field_name_for_child(i)` walks the children up to i, which on a
    # flat error node of 200,000 children made this loop quadratic: 24 s).
    bodies = node.children_by_field_name("body")
    for child in node.children:
        is_body = child.type == "statement_list" or (bool(bodies) and child in bodies)
        if is_body and child.child_count and child.type not in _DEFINITIONS:
            yield from _members(child)
        else:
            yield child


def _unwrap(node: Any) -> Any:
    while node.type in _WRAPPERS:
        inner = node.child_by_field_name("definition") or node.child_by_field_name("declaration")
        if inner is None:
            named = [c for c in node.named_children if c.type in _DEFINITIONS]
            inner = named[-1] if named else None
        if inner is None:
            return node
        node = inner
    return node


def _text(src: bytes, node: Any) -> str:
    return src[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _definition_name(src: bytes, node: Any) -> str | None:
    """The bare name of a definition node (looking through wrappers), else None."""
    node = _unwrap(node)
    kind = node.type
    if kind not in _DEFINITIONS:
        return None
    if kind in ("lexical_declaration", "variable_declaration"):
        # `const handler = () => {...}`: only a single function or class value names a scope.
        declarators = [c for c in node.named_children if c.type == "variable_declarator"]
        if len(declarators) != 1:
            return None
        value = declarators[0].child_by_field_name("value")
        if value is None or value.type not in (
            "arrow_function",
            "function_expression",
            "function",
            "class",
            "generator_function",
        ):
            return None
        node = declarators[0]
    elif kind == "type_declaration":  # go: `type Foo struct {...}`
        specs = [c for c in node.named_children if c.type in ("type_spec", "type_alias")]
        if len(specs) != 1:
            return None
        node = specs[0]
    elif kind == "impl_item":  # rust: named by the implementing type
        target = node.child_by_field_name("type")
        return _text(src, target) if target is not None else None
    name = node.child_by_field_name("name")
    if name is not None:
        return _text(src, name)
    # c / c++ functions: the name is the innermost declarator (`int *Foo::bar(int x)`).
    declarator = node.child_by_field_name("declarator")
    while declarator is not None:
        inner = declarator.child_by_field_name("declarator")
        if inner is None or declarator.type in ("qualified_identifier", "operator_name"):
            return _text(src, declarator)
        declarator = inner
    return None


class _SyntaxWalker:
    """Turns a syntax tree into pieces that each fit the budget and tile the document in order.

    A node's children are grouped into row ranges that start where a child starts on a line of
    its own ("tiles"); a tile that fits is one piece, a tile that does not is walked again
    through its largest node (a class body, a function body, a long call's arguments), and a
    tile with no structure left is cut at lines.
    """

    def __init__(
        self,
        doc: TokenizedText,
        lines: _Lines,
        src: bytes,
        limit: int,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        self.doc = doc
        self.tokenizer = tokenizer
        self.lines = lines
        self.src = src
        self.limit = limit
        self.pieces: list[tuple[int, int, tuple[str, ...], bool]] = []
        # Set when a definition is too big: its first piece opens a new chunk, so a split
        # function starts with its own header instead of ending the previous chunk with it.
        self._opens_chunk = False

    def walk(
        self, node: Any, first_row: int, end_row: int, path: tuple[str, ...], depth: int
    ) -> None:
        """Emit pieces for rows [first_row, end_row), which hold `node` and nothing it does not."""
        check_deadline()
        tiles: list[tuple[int, list[Any]]] = []
        group: list[Any] = []
        tile_row = first_row
        last_row = first_row - 1
        glued = False
        for child in _members(node):
            row = child.start_point.row
            own_line = row > last_row
            if group and own_line and not glued and first_row < row < end_row:
                tiles.append((tile_row, group))
                tile_row, group = row, []
            group.append(child)
            glued = own_line and child.type in _GLUE
            last_row = max(last_row, _last_row(child))
        if group or not tiles:
            tiles.append((tile_row, group))
        for i, (row, members) in enumerate(tiles):
            next_row = tiles[i + 1][0] if i + 1 < len(tiles) else end_row
            self._tile(members, row, next_row, path, depth)

    def _tile(
        self, members: list[Any], row: int, end_row: int, path: tuple[str, ...], depth: int
    ) -> None:
        start, end = self.lines.cut(row), self.lines.cut(end_row)
        if start >= end:
            return
        main = None
        if members:
            # The node that carries the tile: the one over most lines, not a comment.
            main = max(
                enumerate(members),
                key=lambda im: (
                    im[1].type not in _GLUE,
                    _last_row(im[1]) - im[1].start_point.row,
                    im[0],
                ),
            )[1]
        name = _definition_name(self.src, main) if main is not None else None
        named_path = (*path, name) if name else path
        if _content_count(self.doc, start, end) <= self.limit:
            self._emit(start, end, named_path)
            return
        core = next((i for i, m in enumerate(members) if m.type not in _GLUE), 0)
        if core > 0:
            # Leading comments pushed the unit over: cut them off when the rest then fits, as
            # keeping a function whole matters more than keeping its comment with it.
            core_row = members[core].start_point.row
            if _content_count(self.doc, self.lines.cut(core_row), end) <= self.limit:
                self._tile(members[:core], row, core_row, path, depth)
                self._tile(members[core:], core_row, end_row, path, depth)
                return
        if name:
            self._opens_chunk = True
        if main is not None and main.child_count and end_row - row > 1 and depth < _MAX_DEPTH:
            # A wrapper is named by its inner definition, which the next level visits.
            inner_path = path if main.type in _WRAPPERS else named_path
            self.walk(main, row, end_row, inner_path, depth + 1)
            return
        self.walk_lines(row, end_row, named_path)

    def walk_lines(self, row: int, end_row: int, path: tuple[str, ...]) -> None:
        """Emit rows [row, end_row) one line per piece (packing joins them again).

        Only non-blank line starts are cuts: with cl100k a blank line's start can sit inside a
        token such as ".\\n\\n", and snapping it would cut the line before it. A single line over
        the limit goes to `recursive_split`'s sentence, word and token levels.
        """
        piece_row = row
        for r in range(row + 1, end_row + 1):
            if r < end_row and self.lines.is_blank(r):
                continue
            start, end = self.lines.cut(piece_row), self.lines.cut(r)
            piece_row = r
            if start >= end:
                continue
            if _content_count(self.doc, start, end) <= self.limit or self._fits_alone(start, end):
                self._emit(start, end, path)
            else:
                for s, e in recursive_split(self.doc, start, end, self.limit, LINE):
                    self._emit(s, e, path)

    def _fits_alone(self, start: int, end: int) -> bool:
        """Whether text[start:end], trailing whitespace aside, fits the limit encoded alone,
        as its chunk is counted (`Chunker.finalize`): a line's last token can run on into the
        newline in the document (`"\\n`) and count one more there than alone, which must not
        cut a line that fits inside (found by tests/chunking/test_code.py's property test)."""
        if self.tokenizer is None:
            return False
        stop = _content_end(self.doc.text, start, end)
        return count_alone(self.tokenizer, self.doc, start, stop) <= self.limit

    def _emit(self, start: int, end: int, path: tuple[str, ...]) -> None:
        self.pieces.append((start, end, path, self._opens_chunk))
        self._opens_chunk = False


def _content_end(text: str, start: int, end: int) -> int:
    """The end of text[start:end] without its trailing whitespace, which `trim_span` drops."""
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def _content_count(doc: TokenizedText, start: int, end: int) -> int:
    """Tokens of text[start:end] without its trailing whitespace, which `trim_span` drops.

    The blank lines after a function must not be what pushes it over the limit.
    """
    return doc.count(start, doc.ceil(_content_end(doc.text, start, end)))


def _pack(
    doc: TokenizedText, pieces: list[tuple[int, int, tuple[str, ...], bool]], limit: int
) -> list[tuple[int, int, tuple[str, ...]]]:
    """Greedily merge consecutive pieces while the merged range fits `limit` tokens.

    Pieces are contiguous and end on token boundaries, so a merged count is two look-ups;
    a piece is never cut here, which is what keeps a fitting function whole.
    """
    out: list[tuple[int, int, tuple[str, ...]]] = []
    for start, end, path, opens_chunk in pieces:
        if out and not opens_chunk:
            s, e, p = out[-1]
            if e == start and _content_count(doc, s, end) <= limit:
                out[-1] = (s, end, common_prefix(p, path))
                continue
        out.append((start, end, path))
    return out


def _with_line_overlap(
    doc: TokenizedText,
    lines: _Lines,
    chunks: list[tuple[int, int, tuple[str, ...]]],
    overlap: int,
) -> list[tuple[int, int, tuple[str, ...]]]:
    """Start each chunk (but the first) up to `overlap` tokens earlier, at a line start."""
    out = chunks[:1]
    for (prev_start, _, _), (start, end, path) in itertools.pairwise(chunks):
        window = max(doc.boundary_at_token(doc.tokens_before(start) - overlap), prev_start)
        row = lines.row_at_or_after(window)
        new_start = start
        while row < lines.n_lines:
            cut = lines.cut(row)
            if cut >= start:
                break
            if cut >= prev_start and doc.count(cut, start) <= overlap:
                new_start = cut
                break
            row += 1
        out.append((new_start, end, path))
    return out
