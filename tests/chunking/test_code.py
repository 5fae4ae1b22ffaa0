"""Tests of the tree-sitter code chunker: whole functions, line-start cuts, exact offsets."""

from __future__ import annotations

import ast
import glob
import itertools
import os
import pickle
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transforms.chunking.base import ChunkSpan
from transforms.chunking.code import SUPPORTED_LANGUAGES, CodeChunker
from transforms.chunking.tokens import TiktokenTokenizer
from transforms.token_budget import TokenBudget

STDLIB = "/root/.pyenv/versions/3.11.7/lib/python3.11"

# language -> (prefix, [(unit text, its section_path)], suffix). The snippet is
# prefix + "\n\n".join(units) + suffix; every unit is a definition that must stay whole.
SNIPPETS: dict[str, tuple[str, list[tuple[str, tuple[str, ...]]], str]] = {
    "python": (
        "",
        [
            (
                'def parse_header(line: str) -> tuple[str, str]:\n    """Split "Key: value"."""\n'
                '    key, _, value = line.partition(":")\n'
                '    if not key:\n        raise ValueError(f"bad header {line!r}")\n'
                "    return key.strip().lower(), value.strip()",
                ("parse_header",),
            ),
            (
                "@dataclass\nclass Request:\n    method: str\n    path: str\n"
                "    headers: dict[str, str]\n\n    def is_json(self) -> bool:\n"
                '        return self.headers.get("content-type", "")'
                '.startswith("application/json")',
                ("Request",),
            ),
            (
                "def read_request(stream) -> Request:\n"
                "    method, path, _ = stream.readline().split()\n"
                "    headers = dict(parse_header(h) for h in iter(stream.readline, '\\n'))\n"
                "    return Request(method, path, headers)",
                ("read_request",),
            ),
        ],
        "\n",
    ),
    "javascript": (
        "",
        [
            (
                "// Debounce a function: call it once the calls stop for `wait` ms.\n"
                "function debounce(fn, wait) {\n  let timer = null;\n  return (...args) => {\n"
                "    clearTimeout(timer);\n    timer = setTimeout(() => fn(...args), wait);\n"
                "  };\n}",
                ("debounce",),
            ),
            (
                "class EventBus {\n  constructor() {\n    this.handlers = new Map();\n  }\n\n"
                "  on(name, handler) {\n    const list = this.handlers.get(name) || [];\n"
                "    list.push(handler);\n    this.handlers.set(name, list);\n  }\n}",
                ("EventBus",),
            ),
            (
                "const formatBytes = (n) => {\n  const units = ['B', 'KB', 'MB', 'GB'];\n"
                "  let i = 0;\n  while (n >= 1024 && i < units.length - 1) {\n    n /= 1024;\n"
                "    i++;\n  }\n  return `${n.toFixed(1)} ${units[i]}`;\n};",
                ("formatBytes",),
            ),
        ],
        "\n",
    ),
    "typescript": (
        "",
        [
            (
                "interface User {\n  id: number;\n  name: string;\n  email?: string;\n"
                "  roles: Array<'admin' | 'viewer'>;\n  createdAt: Date;\n}",
                ("User",),
            ),
            (
                "export function isAdmin(user: User): boolean {\n"
                "  return user.roles.includes('admin') && user.email !== undefined;\n}",
                ("isAdmin",),
            ),
            (
                "class UserStore {\n  private users = new Map<number, User>();\n\n"
                "  add(user: User): void {\n    this.users.set(user.id, user);\n  }\n}",
                ("UserStore",),
            ),
        ],
        "\n",
    ),
    "tsx": (
        "type ButtonProps = { label: string; onClick: () => void };\n\n",
        [
            (
                "export function Button({ label, onClick }: ButtonProps) {\n"
                '  const cls = label.length > 12 ? "btn btn-wide" : "btn";\n'
                "  return <button className={cls} onClick={onClick}>{label}</button>;\n}",
                ("Button",),
            ),
            (
                "export function Counter() {\n  const [count, setCount] = useState<number>(0);\n"
                "  return (\n    <div>\n      <span>{count}</span>\n"
                '      <Button label="+1" onClick={() => setCount(count + 1)} />\n    </div>\n'
                "  );\n}",
                ("Counter",),
            ),
        ],
        "\n",
    ),
    "go": (
        "package store\n\n",
        [
            (
                "// Item is one cached value with its expiry.\ntype Item struct {\n"
                "\tValue   []byte\n\tExpires time.Time\n\tHits    int\n\tSize    int64\n"
                "\tTags    map[string]string\n}",
                ("Item",),
            ),
            (
                "func (c *Cache) Get(key string) ([]byte, bool) {\n\tc.mu.Lock()\n"
                "\tdefer c.mu.Unlock()\n\titem, ok := c.items[key]\n"
                "\tif !ok || time.Now().After(item.Expires) {\n\t\treturn nil, false\n\t}\n"
                "\titem.Hits++\n\treturn item.Value, true\n}",
                ("Get",),
            ),
            (
                "// NewCache returns an empty cache sized for `size` items.\n"
                "func NewCache(size int) *Cache {\n"
                "\treturn &Cache{items: make(map[string]*Item, size), limit: size}\n}",
                ("NewCache",),
            ),
        ],
        "\n",
    ),
    "rust": (
        "use std::collections::HashMap;\n\n",
        [
            (
                "#[derive(Debug, Clone)]\npub struct Counter {\n"
                "    counts: HashMap<String, usize>,\n"
                "    total: usize,\n}",
                ("Counter",),
            ),
            (
                "impl Counter {\n    pub fn add(&mut self, word: &str) {\n"
                "        *self.counts.entry(word.to_string()).or_insert(0) += 1;\n"
                "        self.total += 1;\n    }\n}",
                ("Counter",),
            ),
            (
                "fn most_common(counter: &Counter) -> Option<(&String, &usize)> {\n"
                "    counter.counts.iter().max_by_key(|(_, n)| **n)\n}",
                ("most_common",),
            ),
        ],
        "\n",
    ),
    "java": (
        "package calc;\n\npublic class Calculator {\n",
        [
            (
                "    /** Adds two numbers, saturating at the int range. */\n"
                "    public int add(int a, int b) {\n        long sum = (long) a + b;\n"
                "        return (int) Math.max(Integer.MIN_VALUE, "
                "Math.min(Integer.MAX_VALUE, sum));\n    }",
                ("Calculator", "add"),
            ),
            (
                "    public double mean(List<Integer> values) {\n        if (values.isEmpty()) {\n"
                '            throw new IllegalArgumentException("no values");\n        }\n'
                "        return values.stream().mapToInt(Integer::intValue)"
                ".average().orElse(0);\n    }",
                ("Calculator", "mean"),
            ),
        ],
        "\n}\n",
    ),
    "c": (
        "#include <stdio.h>\n#include <string.h>\n\n",
        [
            (
                "/* Reverse a string in place. */\nvoid reverse(char *s) {\n"
                "    size_t n = strlen(s);\n    for (size_t i = 0; i < n / 2; i++) {\n"
                "        char t = s[i];\n        s[i] = s[n - 1 - i];\n        s[n - 1 - i] = t;\n"
                "    }\n}",
                ("reverse",),
            ),
            (
                "int count_words(const char *s) {\n    int words = 0, in_word = 0;\n"
                "    for (; *s; s++) {\n        if (*s == ' ' || *s == '\\n') in_word = 0;\n"
                "        else if (!in_word) { in_word = 1; words++; }\n    }\n    return words;\n}",
                ("count_words",),
            ),
        ],
        "\n",
    ),
    "cpp": (
        "#include <vector>\n\n",
        [
            (
                "template <typename T>\nclass Stack {\n public:\n"
                "  void push(const T& v) { items_.push_back(v); }\n"
                "  T pop() { T v = items_.back(); items_.pop_back(); return v; }\n\n"
                " private:\n  std::vector<T> items_;\n};",
                ("Stack",),
            ),
            (
                "int Matrix::trace() const {\n  int sum = 0;\n"
                "  for (int i = 0; i < rows_ && i < cols_; ++i) {\n    sum += at(i, i);\n  }\n"
                "  return sum;\n}",
                ("Matrix::trace",),
            ),
        ],
        "\n",
    ),
    "ruby": (
        "",
        [
            (
                "# A bank account with a running balance.\nclass Account\n"
                "  attr_reader :balance\n\n  def initialize(owner)\n    @owner = owner\n"
                "    @balance = 0\n  end\n\n  def deposit(amount)\n"
                '    raise ArgumentError, "amount must be positive" unless amount.positive?\n'
                "    @balance += amount\n  end\nend",
                ("Account",),
            ),
            (
                "def format_money(cents, currency = 'USD')\n"
                "  symbol = { 'USD' => '$', 'EUR' => '€', 'GBP' => '£' }.fetch(currency, '')\n"
                "  format('%s%.2f', symbol, cents / 100.0)\nend",
                ("format_money",),
            ),
        ],
        "\n",
    ),
    "bash": (
        "#!/usr/bin/env bash\nset -euo pipefail\n\n",
        [
            (
                "# Print a message to stderr with a timestamp.\nlog() {\n"
                '  local level="${LOG_LEVEL:-info}"\n'
                '  echo "[$(date +%H:%M:%S)] [$level] $*" >&2\n}',
                ("log",),
            ),
            (
                'backup() {\n  local src="$1" dest="$2"\n  if [[ ! -d "$src" ]]; then\n'
                '    log "missing $src"\n    return 1\n  fi\n'
                '  tar -czf "$dest/$(basename "$src").tar.gz" '
                '-C "$(dirname "$src")" "$(basename "$src")"\n}',
                ("backup",),
            ),
        ],
        '\nbackup "$HOME/docs" /tmp\n',
    ),
}


def check_spans(text: str, chunks: list[ChunkSpan], tok: TiktokenTokenizer, size: int) -> None:
    """The invariants of every chunking: exact offsets, hard limit, all non-space text kept."""
    covered = bytearray(len(text))
    last_end = 0
    for c in chunks:
        assert 0 <= c.start < c.end <= len(text)
        assert c.start >= last_end, "chunks are in order and do not overlap"
        last_end = c.end
        assert tok.count(text[c.start : c.end]) == c.token_count <= size
        assert c.strategy == "code"
        covered[c.start : c.end] = b"\1" * (c.end - c.start)
    missing = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not missing, f"uncovered text at {missing[:5]}: {text[missing[0] : missing[0] + 40]!r}"


def starts_at_line_start(text: str, chunk: ChunkSpan) -> bool:
    """True when only indentation lies between the chunk start and the start of its line."""
    line_start = text.rfind("\n", 0, chunk.start) + 1
    return text[line_start : chunk.start].strip() == ""


def ends_at_line_end(text: str, chunk: ChunkSpan) -> bool:
    return chunk.end == len(text) or text[chunk.end :].split("\n", 1)[0].strip() == ""


@pytest.mark.parametrize("language", SUPPORTED_LANGUAGES)
def test_each_language_keeps_functions_whole_and_named(
    cl100k: TiktokenTokenizer, language: str
) -> None:
    prefix, units, suffix = SNIPPETS[language]
    text = prefix + "\n\n".join(u for u, _ in units) + suffix
    # The budget of the largest unit: each unit fits, no two units fit together.
    size = max(cl100k.count(u) for u, _ in units)
    assert all(2 * cl100k.count(u) > size for u, _ in units), "snippet units too uneven"
    chunks = CodeChunker(cl100k, size).chunk(text, language)
    check_spans(text, chunks, cl100k, size)
    assert len(chunks) >= len(units)
    for unit, path in units:
        start = text.index(unit)
        end = start + len(unit)
        first = start + len(unit) - len(unit.lstrip())
        home = [c for c in chunks if c.start <= first and end <= c.end]
        assert len(home) == 1, f"{path} is split: {[text[c.start : c.end] for c in chunks]}"
        # A unit alone in its chunk is named by its full path; one packed with its class
        # header (java) gets the common path of both.
        chunk = home[0]
        if text[chunk.start : chunk.end].strip() == unit.strip():
            assert chunk.section_path == path
        else:
            assert path[: len(chunk.section_path)] == chunk.section_path
    for chunk in chunks:
        assert starts_at_line_start(text, chunk), text[chunk.start : chunk.end]
        assert ends_at_line_end(text, chunk), text[chunk.start : chunk.end]


def test_supported_languages_are_the_eleven_grammars() -> None:
    assert set(SUPPORTED_LANGUAGES) == set(SNIPPETS)


BIG_FUNCTION = (
    "def handle(event, context):\n"
    + '    """Route one event to its handler and record the outcome."""\n'
    + "".join(
        f"    if event.kind == 'kind_{i}':\n"
        f"        result_{i} = process_{i}(event.payload, retries={i}, timeout={i * 1.5})\n"
        f"        metrics.increment('handled.kind_{i}', tags=[context.region])\n"
        for i in range(40)
    )
    + "    return None\n"
)


def test_oversized_function_splits_at_statement_boundaries(cl100k: TiktokenTokenizer) -> None:
    text = "import metrics\n\n\n" + BIG_FUNCTION + "\n\ndef after():\n    return 1\n"
    chunks = CodeChunker(cl100k, 100).chunk(text, "python")
    check_spans(text, chunks, cl100k, 100)
    fn_start = text.index("def handle")
    inside = [c for c in chunks if fn_start <= c.start < fn_start + len(BIG_FUNCTION)]
    assert len(inside) > 5
    statement_starts = {m.start() for m in re.finditer(r"^    (if|return)", text, re.M)}
    for c in inside:
        assert starts_at_line_start(text, c) and ends_at_line_end(text, c)
        # Each chunk starts with the function header or one of the body's statements.
        assert c.start == fn_start or c.start in statement_starts, text[c.start : c.end][:60]
        assert c.section_path == ("handle",) or c.end > fn_start + len(BIG_FUNCTION)
    # Glued back, the pieces (with the whitespace between them) compile to the function.
    fn_end = fn_start + len(BIG_FUNCTION)
    body = "".join(text[c.start : min(c.end, fn_end)] + "\n" for c in inside)
    assert ast.dump(ast.parse(body)) == ast.dump(ast.parse(BIG_FUNCTION))
    # A function that fits is never split, even next to a split one.
    assert any("def after():\n    return 1" in text[c.start : c.end] for c in chunks)


def test_single_huge_statement_falls_back_to_lines(cl100k: TiktokenTokenizer) -> None:
    table = (
        "TABLE = [\n" + "".join(f"    ({i}, 'name_{i}', {i * i}),\n" for i in range(200)) + "]\n"
    )
    chunks = CodeChunker(cl100k, 64).chunk(table, "python")
    check_spans(table, chunks, cl100k, 64)
    assert len(chunks) > 10
    assert all(starts_at_line_start(table, c) and ends_at_line_end(table, c) for c in chunks)


def test_single_line_longer_than_limit_uses_lower_levels(cl100k: TiktokenTokenizer) -> None:
    text = "x = [" + ", ".join(str(i) for i in range(500)) + "]\n\ndef f():\n    return x\n"
    chunks = CodeChunker(cl100k, 32).chunk(text, "python")
    check_spans(text, chunks, cl100k, 32)
    assert chunks[-1].section_path == ("f",)


def test_methods_of_a_big_class_are_named_with_the_class(cl100k: TiktokenTokenizer) -> None:
    methods = "".join(
        f"    def method_{i}(self, value):\n"
        f"        '''Apply step {i} to the value.'''\n"
        f"        return self.transform(value, step={i}, scale={i / 10})\n\n"
        for i in range(12)
    )
    text = f"class Pipeline(Base):\n    name = 'pipeline'\n\n{methods}"
    chunks = CodeChunker(cl100k, 48).chunk(text, "python")
    check_spans(text, chunks, cl100k, 48)
    for i in range(12):
        start = text.index(f"    def method_{i}(")
        end = text.index("\n\n", start)
        (chunk,) = [c for c in chunks if c.start <= start and end <= c.end]
        assert chunk.section_path in (("Pipeline", f"method_{i}"), ("Pipeline",))
    assert ("Pipeline", "method_3") in {c.section_path for c in chunks}
    assert all(c.section_path[:1] == ("Pipeline",) for c in chunks)


def test_non_ascii_offsets_are_exact(cl100k: TiktokenTokenizer) -> None:
    text = (
        "# 工具函数：处理用户输入 🚀\n"
        "def greet(name: str) -> str:\n"
        "    # 返回问候语，包含表情符号\n"
        '    return f"你好, {name}! 👋🏽 Grüße, café"\n\n\n'
        "class Ünïcödé:\n"
        '    """Straße ß and 日本語 テキスト."""\n\n'
        "    def emoji(self) -> str:\n"
        '        return "👨‍👩‍👧‍👦" * 3  # family, ZWJ sequence\n'
    ) * 6
    chunks = CodeChunker(cl100k, 40).chunk(text, "python")
    check_spans(text, chunks, cl100k, 40)
    assert all(starts_at_line_start(text, c) for c in chunks)
    doc = cl100k.tokenize(text)
    assert all(doc.count(c.start, c.end) <= 40 for c in chunks)
    assert {"greet", "Ünïcödé"} <= {p for c in chunks for p in c.section_path}


@pytest.mark.parametrize("language", [None, "cobol", "Markdown"])
def test_unknown_language_falls_back_to_lines(
    cl100k: TiktokenTokenizer, language: str | None
) -> None:
    text = "".join(f"       MOVE {i} TO COUNTER-{i % 7}.\n" for i in range(120))
    chunks = CodeChunker(cl100k, 50).chunk(text, language)
    check_spans(text, chunks, cl100k, 50)
    assert len(chunks) > 3
    assert all(c.section_path == () for c in chunks)
    assert all(starts_at_line_start(text, c) and ends_at_line_end(text, c) for c in chunks)


def test_broken_source_still_chunks(cl100k: TiktokenTokenizer) -> None:
    text = "def ok():\n    return 1\n\ndef broken(:\n    x = (\n\nclass C:\n    pass\n" * 5
    chunks = CodeChunker(cl100k, 20).chunk(text, "python")
    check_spans(text, chunks, cl100k, 20)


def test_overlap_is_whole_previous_lines(cl100k: TiktokenTokenizer) -> None:
    text = BIG_FUNCTION
    chunks = CodeChunker(cl100k, 100, chunk_overlap=30).chunk(text, "python")
    assert len(chunks) > 3
    for prev, cur in itertools.pairwise(chunks):
        assert cur.token_count <= 100
        assert prev.start < cur.start <= prev.end + 1
        assert starts_at_line_start(text, cur)
    assert any(cur.start < prev.end for prev, cur in itertools.pairwise(chunks))


def test_chunker_pickles_after_use(cl100k: TiktokenTokenizer) -> None:
    chunker = CodeChunker(cl100k, 64)
    text = SNIPPETS["go"][0] + SNIPPETS["go"][1][1][0]
    before = chunker.chunk(text, "go")
    clone = pickle.loads(pickle.dumps(chunker))
    assert clone.chunk(text, "go") == before


# --- property test ------------------------------------------------------------------------

_IDENT = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True)
_UNICODE = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\"\\'"),
    max_size=40,
)


@st.composite
def python_sources(draw: st.DrawFn) -> str:
    """Python-like modules: functions of random statements, unicode literals and comments,
    blank lines, and now and then a line far longer than any budget."""
    parts = []
    for _ in range(draw(st.integers(1, 6))):
        name = draw(_IDENT)
        lines = []
        if draw(st.booleans()):
            lines.append(f"# {draw(_UNICODE)}")
        lines.append(f"def {name}({draw(_IDENT)}):")
        for _ in range(draw(st.integers(1, 12))):
            kind = draw(st.integers(0, 4))
            if kind == 0:
                lines.append(f'    {draw(_IDENT)} = "{draw(_UNICODE)}"')
            elif kind == 1:
                lines.append(f"    # {draw(_UNICODE)}")
            elif kind == 2:
                # a line far over the budget; its words numbered (drawing 300 identifiers
                # one by one made most of the test's time)
                stem, n_words = draw(_IDENT), draw(st.integers(50, 300))
                words = [f"{stem}{i}" for i in range(n_words)]
                lines.append(f"    {draw(_IDENT)} = [{', '.join(words)}]")
            elif kind == 3:
                lines.append(f"    if {draw(_IDENT)}:\n        return '{draw(_UNICODE)}'")
            else:
                lines.append("")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


@given(source=python_sources(), size=st.integers(16, 300))
def test_property_offsets_limit_coverage_determinism(
    cl100k: TiktokenTokenizer, source: str, size: int
) -> None:
    chunker = CodeChunker(cl100k, size)
    chunks = chunker.chunk(source, "python")
    check_spans(source, chunks, cl100k, size)
    assert chunker.chunk(source, "python") == chunks
    assert CodeChunker(cl100k, size).chunk(source, "python") == chunks


# --- real files -----------------------------------------------------------------------------


def _stdlib_files() -> list[str]:
    files = sorted(glob.glob(f"{STDLIB}/json/*.py") + glob.glob(f"{STDLIB}/email/*.py"))
    return files[:30]


@pytest.mark.skipif(not _stdlib_files(), reason="CPython stdlib sources not found")
def test_real_stdlib_files_keep_fitting_functions_whole(cl100k: TiktokenTokenizer) -> None:
    size = 256
    chunker = CodeChunker(cl100k, size)
    fitting = split = n_chunks = tiny = 0
    for path in _stdlib_files():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        chunks = chunker.chunk(text, "python")
        check_spans(text, chunks, cl100k, size)
        n_chunks += len(chunks)
        tiny += sum(c.token_count < 16 for c in chunks)
        line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        for node in ast.parse(text).body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            start = line_starts[first - 1]
            end = line_starts[node.end_lineno] if node.end_lineno < len(line_starts) else len(text)
            start, end = chunker.trim_span(text, start, end)
            if cl100k.count(text[start:end]) > size:
                continue
            fitting += 1
            split += not any(c.start <= start and end <= c.end for c in chunks)
    assert fitting > 50
    assert split == 0, f"{split} of {fitting} fitting top-level definitions were split"
    assert tiny <= 0.05 * n_chunks, f"{tiny} of {n_chunks} chunks under 16 tokens"


@given(source=python_sources(), size=st.integers(16, 300), data=st.data())
def test_property_overlap_never_starts_a_chunk_inside_a_line(
    cl100k: TiktokenTokenizer, source: str, size: int, data: st.DataObject
) -> None:
    overlap = data.draw(st.integers(0, size // 2 - 1), label="overlap")
    chunks = CodeChunker(cl100k, size, chunk_overlap=overlap).chunk(source, "python")
    for c in chunks:
        assert tok_count_ok(cl100k, source, c, size)
        line_start = source.rfind("\n", 0, c.start) + 1
        line_end = source.find("\n", c.start)
        line = source[line_start : line_end if line_end >= 0 else len(source)]
        # Only a line that alone is over the budget may be cut inside.
        assert starts_at_line_start(source, c) or cl100k.count(line) > size - overlap


def test_a_line_that_fits_alone_is_not_cut_where_its_last_token_runs_into_the_newline(
    cl100k: TiktokenTokenizer,
) -> None:
    """In the document, the line's closing quote and the newline are one token ('"\\n'), so
    the line counts 17 tokens there and 16 alone, as its chunk is counted: it fits a budget
    of 16 and stays whole (found by the property test above)."""
    source = 'def _(_):\n    _0a_0_0 = "0\U00011440-"\n'
    line = source.split("\n")[1]
    assert cl100k.count(line) == 16
    chunks = CodeChunker(cl100k, 16).chunk(source, "python")
    assert [source[c.start : c.end] for c in chunks] == ["def _(_):", line]
    assert all(tok_count_ok(cl100k, source, c, 16) for c in chunks)


def tok_count_ok(tok: TiktokenTokenizer, text: str, c: ChunkSpan, size: int) -> bool:
    return tok.count(text[c.start : c.end]) == c.token_count <= size


# The files where chunks began mid-line with overlap on (at 256/32, before the fix: 39 chunks,
# e.g. at the `)` that closes `self.pos)`), and the chunk stage's own model limit.
OVERLAP_FILES = [
    f"{STDLIB}/json/decoder.py",
    f"{STDLIB}/statistics.py",
    f"{STDLIB}/dataclasses.py",
    "/usr/include/stdio.h",
    "/usr/include/zlib.h",
]


@pytest.mark.parametrize(("size", "overlap"), [(256, 32), (192, 32), (128, 16), (512, 64)])
def test_real_code_with_overlap_starts_every_chunk_at_a_line_start(size: int, overlap: int):
    from schemas.records import Document, content_hash
    from transforms.chunking.routing import ChunkingConfig, DocumentChunker

    files = [f for f in OVERLAP_FILES if os.path.exists(f)]
    if len(files) < 3:
        pytest.skip(f"the real sources are not here: {OVERLAP_FILES}")
    chunker = DocumentChunker(
        ChunkingConfig(
            budget=TokenBudget(
                chunk_size=size,
                chunk_overlap=overlap,
                model_tokenizer="default",
                model_max_tokens=256,
            )
        )
    )
    n = 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        language = "python" if path.endswith(".py") else "c"
        doc = Document("d", path, "code", text, content_hash(text), language=language)
        for c in chunker.chunk_document(doc):
            n += 1
            assert starts_at_line_start(text, ChunkSpan(c.start_char, c.end_char)), (
                path,
                text[max(0, c.start_char - 20) : c.start_char + 20],
            )
    assert n > 100


def test_a_flat_error_node_is_chunked_in_linear_time(cl100k: TiktokenTokenizer) -> None:
    # "x = " + "(" * N is one error node of N children; reading each child's field name by
    # index made the walk quadratic (1.7 s at 50k, 7.7 s at 100k, about 30 s at 200k).
    import time

    chunker = CodeChunker(cl100k, 256, 32)
    started = time.perf_counter()
    chunks = chunker.chunk("x = " + "(" * 200_000, "python")
    assert time.perf_counter() - started < 10.0
    assert sum(c.end - c.start for c in chunks) >= 200_000


def test_a_code_point_that_crashes_a_grammar_scanner_is_parsed_safely():
    # tree-sitter-bash 0.25.1 segfaulted the process on this (found by the fuzz tests); run in
    # a child so that a regression fails this test instead of killing the test session.
    script = (
        "from transforms.chunking.code import CodeChunker\n"
        "from transforms.chunking.tokens import make_tokenizer\n"
        "text = 'echo a{\\U000f5117 b\\nls -l ~/docs\\n'\n"
        "spans = CodeChunker(make_tokenizer('cl100k_base'), 64, 0).chunk(text, 'bash')\n"
        "assert ''.join(text[s.start:s.end] for s in spans).split() == text.split()\n"
        "print('ok')\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def _refuse_to_parse(self: CodeChunker, language: str) -> None:
    raise AssertionError(
        f"tree-sitter was asked to parse a source over MAX_PARSE_BYTES ({language})"
    )


def test_a_source_over_the_parse_limit_is_cut_by_lines_without_tree_sitter(
    cl100k: TiktokenTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 22 N6: tree-sitter's parse cannot be interrupted and grows with the file (1 MB of
    "(" took 16 s and 483 MB, a 19 MB .py 5 GB): over MAX_PARSE_BYTES, no parse at all."""
    from transforms.chunking import code

    unit = "def f():\n    return (1)\n\n"
    source = unit * (code.MAX_PARSE_BYTES // len(unit) + 1)
    monkeypatch.setattr(CodeChunker, "_parser", _refuse_to_parse)
    chunks = CodeChunker(cl100k, 256).chunk(source, "python")
    check_spans(source, chunks, cl100k, 256)
    assert all(c.section_path == () for c in chunks)


def test_the_parse_limit_is_in_bytes_and_a_source_at_it_is_parsed(
    cl100k: TiktokenTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transforms.chunking import code

    unit = "def greet_ünï():\n    return 'hello'\n\n"
    source = unit * 40
    monkeypatch.setattr(code, "MAX_PARSE_BYTES", len(source.encode("utf-8")))
    parsed = CodeChunker(cl100k, 20).chunk(source, "python")
    assert {p for c in parsed for p in c.section_path} == {"greet_ünï"}
    # One character more, in characters or only in bytes, and the source is cut by lines.
    monkeypatch.setattr(code, "MAX_PARSE_BYTES", len(source.encode("utf-8")) - 1)
    by_lines = CodeChunker(cl100k, 20).chunk(source, "python")
    check_spans(source, by_lines, cl100k, 20)
    assert all(c.section_path == () for c in by_lines)
