"""Tests of transforms/context.py: path headers, the fit invariant, the LLM client against a real
local OpenAI-compatible HTTP server, the cache, and AddContext in a TestPipeline."""

from __future__ import annotations

import collections
import dataclasses
import gzip
import json
import os
import random
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import given
from hypothesis import strategies as st
from urllib3.util.retry import Retry

from schemas.records import Chunk, Document, content_hash
from transforms.chunking.tokens import make_tokenizer
from transforms.common import NAMESPACE
from transforms.context import (
    CONTEXT_JOINER,
    ELLIPSIS,
    PATH_SEPARATOR,
    AddContext,
    ContextConfig,
    HeaderFitter,
    LLMContextCache,
    LLMContextClient,
    backoff_delay,
    cache_key,
    fit_header,
    llm_cost_usd,
    parse_retry_after,
    path_header,
    path_parts,
    retry_policy,
    table_line,
    without_parameters,
)
from transforms.context.path import entry_items, opens_with_title
from transforms.context.stage import _with_header, path_contexts
from transforms.stage_base import Counts
from transforms.token_budget import TokenBudget

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples")

LLM_BUDGET = TokenBudget(chunk_size=128)  # the budget the LLM stage tests fit headers to

DOCUMENT = (
    "# Widget Manual\n\nThe widget frobs gadgets.\n\n## Installation\n\nRun the installer.\n\n"
    "## Troubleshooting\n\nIf it breaks, restart it."
)
MODEL = "test-model"


# --- A real OpenAI-compatible server ------------------------------------------------------


class ChatServer:
    """Answers POST /v1/chat/completions; the chunk's text picks the behaviour.

    Markers in the chunk: RATE_LIMIT_ONCE (429 + Retry-After: 0 first), FAIL_ONCE (500 first),
    SLOW_ONCE (first answer after 3 s), ALWAYS_FAIL (500), BAD_REQUEST (400), NO_USAGE,
    LONG_ANSWER, PAUSE (answers after 0.15 s, tracking how many requests are in flight).
    """

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        self.attempts: collections.Counter = collections.Counter()
        self.active = self.max_active = 0
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def request_count(self) -> int:
        with self.lock:
            return len(self.bodies)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][0]["content"]
                chunk = re.search(r"<chunk>\n(.*)\n</chunk>", prompt, re.S).group(1)
                with server.lock:
                    server.bodies.append(body)
                    server.headers.append(dict(self.headers))
                    server.attempts[chunk] += 1
                    n = server.attempts[chunk]
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": "not found"})
                if "ALWAYS_FAIL" in chunk:
                    return self._send(500, {"error": "boom"})
                if "BAD_REQUEST" in chunk:
                    return self._send(400, {"error": "bad"})
                if "RATE_LIMIT_ONCE" in chunk and n == 1:
                    return self._send(429, {"error": "slow down"}, {"Retry-After": "0"})
                if "FAIL_ONCE" in chunk and n == 1:
                    return self._send(500, {"error": "flaky"})
                if "SLOW_ONCE" in chunk and n == 1:
                    time.sleep(3.0)
                if "PAUSE" in chunk:
                    with server.lock:
                        server.active += 1
                        server.max_active = max(server.max_active, server.active)
                    time.sleep(0.15)
                    with server.lock:
                        server.active -= 1
                content = f"This chunk about {chunk.split()[0]} is from the Widget Manual."
                if "LONG_ANSWER" in chunk:
                    content = "\n\n".join(["A very long and rambling answer sentence."] * 40)
                answer: dict = {
                    "id": "x",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                }
                if "NO_USAGE" not in chunk:
                    answer["usage"] = {"prompt_tokens": 100, "completion_tokens": 10}
                return self._send(200, answer)

        return Handler


@pytest.fixture
def server() -> Iterator[ChatServer]:
    srv = ChatServer()
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()
    srv.thread.join(timeout=5)


def llm_config(server: ChatServer, **overrides: object) -> ContextConfig:
    params: dict = {
        "mode": "llm",
        "llm_base_url": server.base_url,
        "llm_model": MODEL,
        # generous: a test that is not about timeouts must not see one on a loaded machine
        # (the 429 test timed out at 0.3 s under load and made a third request)
        "llm_timeout_s": 10.0,
        "llm_max_retries": 2,
        "llm_backoff_s": 0.01,
        "llm_backoff_max_s": 0.05,
        "llm_seed": 0,
        "llm_price_in": 3.0,
        "llm_price_out": 15.0,
    }
    params.update(overrides)
    return ContextConfig(**params)


def make_chunk(text: str, index: int = 0, **fields: object) -> Chunk:
    values: dict = {
        "chunk_id": f"c{index}",
        "doc_id": "d1",
        "source": "docs/guide/widget.md",
        "doc_type": "markdown",
        "language": None,
        "chunk_index": index,
        "text": text,
        "start_char": 0,
        "end_char": len(text),
        # as the chunker gives it: the header is fitted with this count of the text
        "token_count": make_tokenizer("cl100k_base", "tiktoken").count(text),
        "section_path": ("Widget Manual", "Installation"),
        "strategy": "recursive",
        "config_fingerprint": "f",
        "title": "Widget Manual",
        "content_hash": content_hash(DOCUMENT),
    }
    values.update(fields)
    return Chunk(**values)


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


# --- Config ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"mode": "fancy"}, "--context"),
        ({"mode": "llm", "llm_model": "m"}, "llm_base_url"),
        ({"mode": "llm", "llm_base_url": "http://x/v1"}, "llm_model"),
        ({"max_header_tokens": 0}, "--context_max_tokens"),
        ({"header_folders": -1}, "--header_folders must be >= 0"),
        ({"header_folders": 1.5}, "--header_folders must be an integer"),
        ({"llm_timeout_s": 0}, "llm_timeout_s"),
        ({"llm_max_retries": -1}, "llm_max_retries"),
        ({"llm_concurrency": 0}, "llm_concurrency"),
        ({"llm_price_in": -1.0}, "llm_price_in"),
        ({"llm_api_key_env": ""}, "llm_api_key_env"),
    ],
)
def test_config_rejects_bad_values(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        ContextConfig(**kwargs)


def test_header_reserve_and_cost() -> None:
    assert ContextConfig(mode="none").header_reserve == 0
    assert ContextConfig(mode="path", max_header_tokens=20).header_reserve == 22
    llm = ContextConfig(mode="llm", llm_base_url="http://h/v1", llm_model="m", llm_price_in=3.0)
    assert llm.header_reserve == 66
    assert llm_cost_usd(1_000_000, 0, llm) == pytest.approx(3.0)
    assert llm_cost_usd(0, 500_000, ContextConfig(llm_price_out=15.0)) == pytest.approx(7.5)


# --- Path headers and the fit invariant --------------------------------------------------


def test_path_header_prose_drops_a_first_heading_equal_to_the_title() -> None:
    chunk = make_chunk("x", section_path=("Widget Manual", "Installation", "Linux", "Debian"))
    assert path_header(chunk) == "widget.md > Widget Manual > Installation > Linux > Debian"
    # no title: the file name alone
    assert path_header(make_chunk("x", title=None, section_path=())) == "widget.md"
    untitled = make_chunk("x", title=None, section_path=("Install",))
    assert path_header(untitled) == "widget.md > Install"


def test_path_header_prose_starts_with_where_the_document_is() -> None:
    # The file name names what a title often does not: the command a page is about
    # ("sql-vacuum"); the folder only with --header_folders (see docs/decisions.md).
    chunk = make_chunk(
        "x",
        source="gs://bucket/postgresql/sql-vacuum.html?generation=3#frag",
        doc_type="html",
        title="VACUUM",
        section_path=("VACUUM", "Description"),
    )
    assert path_header(chunk) == "sql-vacuum.html > VACUUM > Description"
    # a header cut to its budget keeps its start: where the document is survives
    cut = fit_header(
        path_header(chunk, 1), "text " * 40, 52, make_tokenizer("cl100k_base"), max_header_tokens=8
    )
    assert cut is not None and cut.startswith("postgresql/sql-vacuum")


def _api_chunk(text: str, source: str, section_path: tuple[str, ...]) -> Chunk:
    """A chunk of an HTML API page titled "API"."""
    return make_chunk(text, source=source, doc_type="html", title="API", section_path=section_path)


def test_a_long_entry_is_cut_before_the_deepest_one_is_lost() -> None:
    """A long heading above the chunk's own: cut at the end, the header kept the long heading
    and lost the deepest entry; the long entries are cut to one length instead."""
    long = "Context " + " ".join(f"word{i}" for i in range(40))
    chunk = _api_chunk(
        "Invokes a command callback in exactly the way it expects.",
        "/docs/api.html",
        ("API", "Context", long, "invoke(callback, *args)"),
    )
    tokenizer = make_tokenizer("cl100k_base")
    fitter = HeaderFitter(TokenBudget(chunk_size=192), tokenizer)
    parts = path_parts(chunk)
    assert PATH_SEPARATOR.join(", ".join(p) for p in parts) == path_header(chunk)
    cut_at_end = fitter.fit(path_header(chunk), chunk.text, max_header_tokens=32).context
    assert cut_at_end is not None and "invoke" not in cut_at_end
    fitted = fitter.fit_path(parts, table_line(chunk), chunk.text, max_header_tokens=32).context
    assert fitted is not None and tokenizer.count(fitted) <= 32
    assert fitted.startswith("api.html > API > Context > Context word0 word1")
    assert fitted.endswith(" > invoke(…)")
    # merged siblings: each item is cut, not the list at its end
    merged = dataclasses.replace(
        chunk, section_path=("API", "Utilities", f"{long}, click.unstyle(text)")
    )
    assert entry_items(merged.section_path[-1]) == [long, "click.unstyle(text)"]
    fitted = fitter.fit_path(path_parts(merged), "", chunk.text, max_header_tokens=32).context
    assert fitted is not None and fitted.endswith("…, click.unstyle(…)")
    # a header that fits is the same; one whose entries cannot be cut enough leaves out the
    # entries above the deepest ones, not the deepest
    short = make_chunk("x", source="/docs/a.html", doc_type="html", title="A", section_path=("B",))
    assert fitter.fit_path(path_parts(short), "", "x", max_header_tokens=32).context == (
        "a.html > A > B"
    )
    many = make_chunk("x", source="/docs/a.html", doc_type="html", title="A",
                      section_path=tuple(f"Heading number {i}" for i in range(20)))  # fmt: skip
    assert fitter.fit_path(path_parts(many), "", "x", max_header_tokens=32).context == (
        "a.html > A > … > Heading number 15 > Heading number 16 > Heading number 17 > "
        "Heading number 18 > Heading number 19"
    )


def test_a_deep_section_keeps_its_own_heading_when_the_ones_above_it_cannot_all_fit() -> None:
    """Erlang's ERTS manual as a PDF: four levels under a long title. Even with every item cut
    to its shortest the header did not fit, and cut at its end it named "1.6 How to Im" and not
    the record the chunk describes; the entries above the deepest now give way first."""
    chunk = make_chunk(
        "The record #hs_data{} holds the handshake state. " * 8,
        source="/docs/erts-13.1.5.pdf",
        doc_type="pdf",
        title="Erlang Run-Time System Application (ERTS)",
        section_path=(
            "1 ERTS User's Guide",
            "1.6 How to Implement an Alternative Carrier for the Erlang Distribution",
            "1.6.2 Distribution Module",
            "The #hs_data{} Record",
        ),
    )
    tokenizer = make_tokenizer("cl100k_base")
    fitter = HeaderFitter(TokenBudget(chunk_size=192), tokenizer)
    cut_at_end = fitter.fit(path_header(chunk), chunk.text, max_header_tokens=32).context
    assert cut_at_end is not None and "hs_data" not in cut_at_end
    fitted = fitter.fit_path(path_parts(chunk), "", chunk.text, max_header_tokens=32).context
    assert fitted is not None and tokenizer.count(fitted) <= 32
    assert fitted.startswith("erts-13.1.5.pdf > Erlang Run-Time")
    assert fitted.endswith(" > … > The #hs_data{} Record"), fitted


def test_a_header_too_long_for_its_items_leaves_out_the_last_merged_siblings() -> None:
    """SQLite's math functions: a chunk of many merged sibling sections. Even with every item
    cut to its shortest the header did not fit, and cut at its end it lost the last
    siblings mid-word ("degrees(…), exp(…), floor(…), ln("). Now the deepest entry of
    several items keeps its first items and "…" for the rest."""
    siblings = ", ".join(f"mathfunc{i}(X)" for i in range(30))
    chunk = make_chunk("x", source="/docs/lang_mathfunc.html", doc_type="html",
                       title="Built-In Mathematical SQL Functions",
                       section_path=("Built-In Mathematical SQL Functions",
                                     "2. Descriptions of built-in scalar SQL math functions",
                                     siblings))  # fmt: skip
    tokenizer = make_tokenizer("cl100k_base")
    fitter = HeaderFitter(TokenBudget(chunk_size=192), tokenizer)
    fitted = fitter.fit_path(path_parts(chunk), "", chunk.text, max_header_tokens=32).context
    assert fitted is not None and tokenizer.count(fitted) <= 32
    last = fitted.split(PATH_SEPARATOR)[-1]
    assert last.startswith("mathfunc0(…), mathfunc1(…), ") and last.endswith(", …")
    assert all(item == "…" or item.endswith("(…)") for item in entry_items(last))
    # a table's column line after the path is kept whole, not cut with the path's end
    table = dataclasses.replace(chunk, table_header="| Name | Description |")
    fitted = fitter.fit_path(path_parts(table), table_line(table), "x", max_header_tokens=32)
    assert fitted.context is not None and fitted.context.endswith(", …\n| Name | Description |")


def test_a_signature_in_the_header_is_its_name_without_parameters() -> None:
    """Click's API page: a method under its class, both Sphinx signatures. The header names
    them without their parameter lists; the section path keeps the whole terms."""
    signature = (
        "class click.Context(command, parent=None, info_name=None, obj=None, "
        "auto_envvar_prefix=None, default_map=None, terminal_width=None, max_content_width=None)"
    )
    chunk = _api_chunk(
        "Register a function to be called when the context tears down.",
        "/docs/click/api.html",
        ("API", "Context", signature, "call_on_close(f), close()"),
    )
    assert path_header(chunk) == (
        "api.html > API > Context > class click.Context(…) > call_on_close(…), close()"
    )
    assert chunk.section_path[2] == signature
    # brackets nest; a list cut short is closed; a space before "(" is no signature
    assert without_parameters("accumulate(iterable[, func, *, initial=None])") == "accumulate(…)"
    assert without_parameters("new URL(input[, base])") == "new URL(…)"
    assert without_parameters("group(*args: Any) Group") == "group(…) Group"
    assert without_parameters("click.style(text, fg=None, bg=…") == "click.style(…)"
    assert without_parameters("Timeout (JUnit API)") == "Timeout (JUnit API)"
    assert (
        without_parameters("LIMIT TO ( table_name [, ...] )") == "LIMIT TO ( table_name [, ...] )"
    )
    assert without_parameters("close()") == "close()"
    # a manual page's section is no parameter list (asciidoc's "git-shortlog(1) Manual Page")
    assert without_parameters("git-shortlog(1) Manual Page") == "git-shortlog(1) Manual Page"
    assert without_parameters("cmake-buildsystem(7)") == "cmake-buildsystem(7)"
    assert without_parameters("printf(3p), f(x)") == "printf(3p), f(x)"  # the first list only
    # a 40 KB signature costs no more than a short one and ends closed, not cut
    huge = "f(" + "x, " * 15_000 + "y)"
    assert path_header(dataclasses.replace(chunk, section_path=("API", huge))) == (
        "api.html > API > f(…)"
    )


def test_path_header_code_uses_the_file_name() -> None:
    chunk = make_chunk(
        "def bar(): ...",
        source="/repo/src/pkg/path/to/file.py",
        doc_type="code",
        title=None,
        section_path=("class Foo", "def bar"),
    )
    assert path_header(chunk) == "file.py > class Foo > def bar"


PROSE_SOURCE = "/corpus/postgresql/html/sql-vacuum.html"
CODE_SOURCE = "/repo/src/pkg/path/to/file.py"


@pytest.mark.parametrize(
    ("folders", "prose", "code"),
    [
        (0, "sql-vacuum.html > VACUUM > Description", "file.py > class Foo > def bar"),
        # 1: prose's header before config_version 12
        (1, "html/sql-vacuum.html > VACUUM > Description", "to/file.py > class Foo > def bar"),
        # 2: code's header before config_version 12
        (
            2,
            "postgresql/html/sql-vacuum.html > VACUUM > Description",
            "path/to/file.py > class Foo > def bar",
        ),
        # more folders than the path has: all of them, no scheme or drive
        (
            9,
            "corpus/postgresql/html/sql-vacuum.html > VACUUM > Description",
            "repo/src/pkg/path/to/file.py > class Foo > def bar",
        ),
    ],
)
def test_header_folders_keeps_that_many_folders_above_the_file(folders, prose, code) -> None:
    html = make_chunk("x", source=PROSE_SOURCE, doc_type="html", title="VACUUM",
                      section_path=("VACUUM", "Description"))  # fmt: skip
    py = make_chunk("x", source=CODE_SOURCE, doc_type="code", title=None,
                    section_path=("class Foo", "def bar"))  # fmt: skip
    assert path_header(html, folders) == prose
    assert path_header(py, folders) == code


def test_header_folders_reaches_the_path_stage() -> None:
    chunk = make_chunk("Run the installer.", source="/corpus/postgresql/sql-vacuum.html")
    counters = Counts()
    fitter = HeaderFitter.for_budget(TokenBudget(chunk_size=64))
    for folders, header in ((0, "sql-vacuum.html"), (1, "postgresql/sql-vacuum.html")):
        config = ContextConfig("path", header_folders=folders)
        (out,) = path_contexts([chunk], config, fitter, counters)
        assert out.context == f"{header} > Widget Manual > Installation"


# (source, doc_type, title, section path, the document's definition terms)
ABLATION_CASES = [
    (PROSE_SOURCE, "html", "VACUUM", ("VACUUM", "Description"), ()),
    (PROSE_SOURCE, "html", "VACUUM", ("Notes", "Examples"), ()),
    (PROSE_SOURCE, "html", None, ("Description",), ()),
    (PROSE_SOURCE, "html", "VACUUM", (), ()),
    ("/corpus/zlib1g-dev/copyright", "text", None, (), ()),
    ("gs://b/docs/guide/widget.md?generation=3#L4", "markdown", "Widget", ("## widget",), ()),
    ("/x/c5/api.html", "html", "API", ("API", "Context", "class Context(c)", "invoke(f)"),
     ("class Context(c)", "invoke(f)")),
    ("/x/c5/api.html", "html", "invoke(f)", ("invoke(f)",), ("invoke(f)",)),
    ("/x/c2/sql-vacuum.html", "html", "sql-vacuum.html", ("Usage",), ()),
    (CODE_SOURCE, "code", None, ("class Foo", "def bar"), ()),
    (CODE_SOURCE, "code", None, (), ()),
    ("C:\\repo\\pkg\\mod.py", "code", None, ("def f",), ()),
]  # fmt: skip


@pytest.mark.parametrize(("source", "doc_type", "title", "sections", "terms"), ABLATION_CASES)
def test_the_job_s_header_is_the_evaluation_s_no_folder_header(
    source, doc_type, title, sections, terms
) -> None:
    """docs/evaluation.md's "no folder" row (eval.header_ablation --keep file title sections
    term) is what the job writes by default; with every part kept, it is --header_folders=1 for
    prose and 2 for code (the job's header before config_version 12)."""
    from eval.header_ablation import PARTS, ablated_header, header_parts, job_parts

    chunk = make_chunk("x", source=source, doc_type=doc_type, title=title, section_path=sections)
    parts = header_parts(source, doc_type, title, list(sections), frozenset(terms))
    assert path_header(chunk) == ablated_header(parts, {"file", "title", "sections", "term"})
    assert job_parts({"header_folders": 0}) == {"file", "title", "sections", "term"}
    assert job_parts({}) == set(PARTS) and job_parts({"header_folders": 1}) is None
    old_folders = 2 if doc_type == "code" else 1
    assert path_header(chunk, old_folders) == ablated_header(parts, set(PARTS))


class _Tally(Counts):
    def __init__(self) -> None:
        self.tally: dict[str, int] = {}

    def stat(self, name: str, n: int = 1) -> None:
        self.tally[name] = self.tally.get(name, 0) + n


def test_the_page_s_opening_goes_without_a_header() -> None:
    """A chunk whose text starts with its document's title as a heading (the page's opening:
    title, purpose line, synopsis) is embedded as it is; the page's other chunks, and a chunk
    that starts with another heading, keep theirs; code and table pieces are not openings."""
    fields = {"source": PROSE_SOURCE, "doc_type": "html", "title": "VACUUM"}
    opening = make_chunk(
        "# VACUUM\n\nVACUUM — garbage-collect and optionally analyze a database",
        section_path=("VACUUM", "Synopsis, Description"),
        **fields,
    )
    notes = make_chunk(
        "## Notes\n\nTo use VACUUM...", 1, section_path=("VACUUM", "Notes"), **fields
    )
    other = make_chunk(
        "# VACUUM FULL\n\nRewrites the table.", 2, section_path=("VACUUM",), **fields
    )
    assert opens_with_title(opening) and not opens_with_title(notes)
    assert not opens_with_title(other)
    assert opens_with_title(dataclasses.replace(opening, title="vacuum ", text="## VACUUM ##\nx"))
    assert not opens_with_title(dataclasses.replace(opening, doc_type="code"))
    assert not opens_with_title(dataclasses.replace(opening, table_header="| a | b |"))
    assert not opens_with_title(dataclasses.replace(opening, title=None))
    # the heading as plain text: Sphinx writes a module's name as inline code
    todo = make_chunk(
        "# `sphinx.ext.todo` – Support for todo items\n\nModule author: ...",
        title="sphinx.ext.todo – Support for todo items",
        section_path=("sphinx.ext.todo – Support for todo items",),
    )
    assert opens_with_title(todo)
    # a heading equal to the title below the chunk's top section, or indented as code, is not
    # the page's opening
    install = make_chunk(
        "## Install\n\nRun it.", title="Install", section_path=("Widget", "Install")
    )
    assert not opens_with_title(install)
    assert not opens_with_title(dataclasses.replace(opening, text="    # VACUUM\n\nx"))
    counts = _Tally()
    fitter = HeaderFitter.for_budget(TokenBudget(chunk_size=64))
    out = list(path_contexts([opening, notes, other], ContextConfig("path"), fitter, counts))
    assert (out[0].context, out[0].context_source) == (None, None)
    assert out[1].context == "sql-vacuum.html > VACUUM > Notes"
    assert out[2].context == "sql-vacuum.html > VACUUM"
    assert counts.tally["context_self_titled"] == 1 and counts.tally["context_headers"] == 2


def test_fit_header_keeps_a_header_that_fits_and_cuts_one_that_does_not(cl100k) -> None:
    text = "Run the installer."
    assert fit_header("Guide > Install", text, 100, cl100k) == "Guide > Install"
    long_header = " > ".join(f"Section number {i}" for i in range(30))
    cut = fit_header(long_header, text, 40, cl100k)
    assert cut is not None and cut.endswith(ELLIPSIS)
    assert long_header.startswith(cut.removesuffix(ELLIPSIS))
    assert cl100k.count(cut + CONTEXT_JOINER + text) <= 40
    capped = fit_header(long_header, text, 1000, cl100k, max_header_tokens=8)
    assert capped is not None and cl100k.count(capped) <= 8
    assert fit_header("Guide", "word " * 50, 10, cl100k) is None
    assert fit_header("   ", text, 100, cl100k) is None


@given(
    header=st.text(min_size=0, max_size=120),
    text=st.text(min_size=1, max_size=200),
    budget=st.integers(min_value=1, max_value=120),
    cap=st.one_of(st.none(), st.integers(min_value=1, max_value=40)),
)
def test_fit_header_never_exceeds_the_budget(
    cl100k, header: str, text: str, budget: int, cap: int | None
) -> None:
    fitted = fit_header(header, text, budget, cl100k, max_header_tokens=cap)
    if fitted is None:
        return
    assert cl100k.count(fitted + CONTEXT_JOINER + text) <= budget
    assert cap is None or cl100k.count(fitted) <= cap
    assert fitted.strip()
    assert header.startswith(fitted.removesuffix(ELLIPSIS)) or fitted == header
    if cap is None and cl100k.count(header + CONTEXT_JOINER + text) <= budget and header.strip():
        assert fitted == header


@given(
    header=st.text(min_size=0, max_size=120),
    text=st.one_of(st.text(min_size=1, max_size=200), st.sampled_from(["    return x", "/x"])),
    budget=st.integers(min_value=1, max_value=120),
    cap=st.one_of(st.none(), st.integers(min_value=1, max_value=40)),
)
def test_fit_header_with_the_text_count_fits_the_same(
    cl100k, header: str, text: str, budget: int, cap: int | None
) -> None:
    counted = fit_header(header, text, budget, cl100k, cap, text_tokens=cl100k.count(text))
    assert counted == fit_header(header, text, budget, cl100k, cap)


def test_headers_fitted_with_the_chunks_own_counts_are_the_same() -> None:
    """Real chunks (token_count from the chunker), path and LLM-style headers, cut or not."""
    from transforms.chunking.routing import ChunkingConfig, DocumentChunker

    document = Document("d1", "docs/guide/widget.md", "markdown", DOCUMENT, content_hash(DOCUMENT))
    code = (
        "class Widget:\n    def frob(self):\n        return 1\n\n"
        "    def stop(self):\n        pass\n"
    )
    source = Document("d2", "src/widget.py", "code", code, content_hash(code), "python")
    chunker = DocumentChunker(ChunkingConfig(budget=TokenBudget(chunk_size=16)))
    chunks = chunker.chunk_document(document) + chunker.chunk_document(source)
    # chunks of up to 24 tokens: fitted to 16, no header fits them
    chunks += DocumentChunker(ChunkingConfig(budget=TokenBudget(chunk_size=24))).chunk_document(
        document
    )
    assert any(c.text.startswith(" ") for c in chunks)  # code keeps its indentation
    tokenizer = make_tokenizer("cl100k_base")
    counters = Counts()
    line = "This chunk about frobbing is from the Widget Manual, section Installation."
    outcomes = set()  # None: no header fits; True: the whole header; False: a cut one
    for size in (16, 20, 24, 40):
        fitter = HeaderFitter(TokenBudget(chunk_size=size), tokenizer)
        for chunk in chunks:
            for header, cap in ((path_header(chunk), 4), (line, None)):
                fitted = fitter.fit(header, chunk.text, chunk.token_count, cap)
                got = _with_header(chunk, fitted, "path", fitter, counters)
                alone = fit_header(header, chunk.text, size, tokenizer, cap)  # text encoded again
                assert got.context == alone
                outcomes.add(None if got.context is None else got.context == header)
    assert outcomes == {None, True, False}


# --- LLM client against the real server --------------------------------------------------


def test_llm_success_sends_the_document_before_the_chunk(server, cl100k, monkeypatch) -> None:
    monkeypatch.setenv("CTX_TEST_KEY", "sekrit")
    client = LLMContextClient(llm_config(server, llm_api_key_env="CTX_TEST_KEY"), cl100k)
    outcome = client.situate(DOCUMENT, "Run the installer.")
    assert outcome.context == "This chunk about Run is from the Widget Manual."
    assert (outcome.prompt_tokens, outcome.completion_tokens) == (100, 10)
    assert (outcome.requests, outcome.retries, outcome.cache_hit) == (1, 0, False)
    body = server.bodies[0]
    assert body["model"] == MODEL and body["max_tokens"] == 64
    prompt = body["messages"][0]["content"]
    assert prompt.startswith("<document>\n" + DOCUMENT)
    assert prompt.index(DOCUMENT) < prompt.index("<chunk>\nRun the installer.\n</chunk>")
    assert server.headers[0]["Authorization"] == "Bearer sekrit"


def test_llm_counts_tokens_itself_when_usage_is_absent(server, cl100k) -> None:
    outcome = LLMContextClient(llm_config(server), cl100k).situate(DOCUMENT, "NO_USAGE here")
    assert outcome.context is not None
    assert outcome.completion_tokens == cl100k.count(outcome.context)
    assert outcome.prompt_tokens > cl100k.count(DOCUMENT)


def test_llm_caps_a_long_answer(server, cl100k) -> None:
    client = LLMContextClient(llm_config(server, llm_context_tokens=12), cl100k)
    outcome = client.situate(DOCUMENT, "LONG_ANSWER please")
    assert outcome.context is not None and "\n" not in outcome.context
    assert 0 < cl100k.count(outcome.context) <= 12


def test_llm_retries_a_429_honouring_retry_after(server, cl100k) -> None:
    sleeps = Sleeps()
    client = LLMContextClient(llm_config(server, llm_backoff_s=5.0), cl100k, sleep=sleeps)
    outcome = client.situate(DOCUMENT, "RATE_LIMIT_ONCE chunk")
    assert outcome.context is not None
    assert (outcome.requests, outcome.retries) == (2, 1)
    assert sleeps == [0.0]  # Retry-After: 0 wins over the 5 s backoff


def test_llm_retries_a_500_with_backoff(server, cl100k) -> None:
    sleeps = Sleeps()
    client = LLMContextClient(llm_config(server), cl100k, sleep=sleeps)
    outcome = client.situate(DOCUMENT, "FAIL_ONCE chunk")
    assert outcome.context is not None and (outcome.requests, outcome.retries) == (2, 1)
    assert len(sleeps) == 1 and 0.005 <= sleeps[0] <= 0.01


def test_llm_retries_a_timeout(server, cl100k) -> None:
    start = time.monotonic()
    config = llm_config(server, llm_timeout_s=0.3)
    outcome = LLMContextClient(config, cl100k).situate(DOCUMENT, "SLOW_ONCE chunk")
    assert outcome.context is not None and (outcome.requests, outcome.retries) == (2, 1)
    # did not wait for the slow answer (0.3 s timeout and a retry, against 3 s: a margin for
    # a loaded 2-core CI machine)
    assert time.monotonic() - start < 2.0


def test_llm_permanent_failure_returns_none(server, cl100k) -> None:
    sleeps = Sleeps()
    client = LLMContextClient(llm_config(server, llm_max_retries=3), cl100k, sleep=sleeps)
    outcome = client.situate(DOCUMENT, "ALWAYS_FAIL chunk")
    assert outcome.context is None and "500" in outcome.error
    assert (outcome.requests, outcome.retries, server.request_count) == (4, 3, 4)
    assert len(sleeps) == 3


def test_llm_does_not_retry_a_400(server, cl100k) -> None:
    outcome = LLMContextClient(llm_config(server), cl100k).situate(DOCUMENT, "BAD_REQUEST x")
    assert outcome.context is None and (outcome.requests, outcome.retries) == (1, 0)


def test_llm_connection_refused_fails_after_retries(cl100k) -> None:
    srv = ChatServer()  # bound but never served, then closed: the port refuses connections
    srv.httpd.server_close()
    sleeps = Sleeps()
    outcome = LLMContextClient(llm_config(srv), cl100k, sleep=sleeps).situate(DOCUMENT, "x")
    assert outcome.context is None and outcome.requests == 3 and len(sleeps) == 2


def test_the_retries_are_urllib3s_retry_policy(server) -> None:
    """Issue 26, item 8: which answers are retried, and how often, is urllib3's Retry, not a
    hand-written rule."""
    policy = retry_policy(llm_config(server, llm_max_retries=3))
    assert isinstance(policy, Retry) and policy.total == 3
    assert all(policy.is_retry("POST", status) for status in (429, 500, 502, 503, 504))
    assert not any(policy.is_retry("POST", status) for status in (400, 401, 404, 422))
    assert policy.is_retry("POST", 413, has_retry_after=True)  # urllib3: a temporary 413


def test_backoff_is_exponential_and_seedable() -> None:
    first = [backoff_delay(a, 1.0, 100.0, random.Random(7)) for a in range(5)]
    again = [backoff_delay(a, 1.0, 100.0, random.Random(7)) for a in range(5)]
    assert first == again
    for attempt, delay in enumerate(first):
        assert 2**attempt / 2 <= delay <= 2**attempt
    assert backoff_delay(20, 1.0, 3.0, random.Random(0)) <= 3.0
    assert parse_retry_after("2") == 2.0 and parse_retry_after(None) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert parse_retry_after("soon") is None


def test_cache_makes_a_rerun_free(server, cl100k, tmp_path) -> None:
    config = llm_config(server, llm_cache_dir=str(tmp_path))
    chunks = ["Run the installer.", "If it breaks, restart it."]
    first = [LLMContextClient(config, cl100k).situate(DOCUMENT, c) for c in chunks]
    assert server.request_count == 2 and not any(o.cache_hit for o in first)
    second = [LLMContextClient(config, cl100k).situate(DOCUMENT, c) for c in chunks]
    assert server.request_count == 2  # zero new HTTP requests
    assert all(o.cache_hit and o.prompt_tokens == o.completion_tokens == 0 for o in second)
    assert [o.context for o in second] == [o.context for o in first]
    assert len(list(tmp_path.rglob("*.json"))) == 2 and not list(tmp_path.rglob("*.tmp"))
    # A new prompt version is a new key.
    bumped = llm_config(server, llm_cache_dir=str(tmp_path), prompt_version="v2")
    assert not LLMContextClient(bumped, cl100k).situate(DOCUMENT, chunks[0]).cache_hit
    assert server.request_count == 3


def test_cache_treats_a_torn_file_as_a_miss(tmp_path) -> None:
    cache = LLMContextCache(str(tmp_path))
    key = cache_key("doc", "chunk", MODEL, "v1")
    cache.put(key, {"context": "hello"})
    assert cache.get(key) == {"context": "hello"}
    next(tmp_path.rglob("*.json")).write_text("{not json")
    assert cache.get(key) is None


# --- AddContext in a pipeline ------------------------------------------------------------


def counters_of(result: beam.runners.runner.PipelineResult) -> dict[str, int]:
    found = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    totals: dict[str, int] = collections.Counter()
    for counter in found["counters"]:
        totals[counter.key.metric.name] += counter.committed
    return dict(totals)


def pipeline_input() -> list[tuple[str, list[Chunk]]]:
    texts = [
        "Run the installer.",
        "RATE_LIMIT_ONCE restart it.",
        "FAIL_ONCE the widget frobs gadgets.",
        "ALWAYS_FAIL chunk text.",
    ]
    chunks = [make_chunk(t, i) for i, t in enumerate(texts)]
    other = "Another document about gizmos."
    gizmo = make_chunk(
        other,
        0,
        doc_id="d2",
        title="Gizmos",
        section_path=("Setup",),
        content_hash=content_hash(other),
    )
    return [(DOCUMENT, chunks), (other, [gizmo])]


def check_llm_output(chunks: list[Chunk]) -> None:
    tokenizer = make_tokenizer("cl100k_base")
    assert len(chunks) == 5
    by_text = {c.text: c for c in chunks}
    assert by_text["ALWAYS_FAIL chunk text."].context_source == "path_fallback"
    assert by_text["ALWAYS_FAIL chunk text."].context == "widget.md > Widget Manual > Installation"
    for chunk in chunks:
        assert chunk.context
        assert tokenizer.count(chunk.embed_text()) <= 128
        if "ALWAYS_FAIL" not in chunk.text:
            assert chunk.context_source == "llm"
            assert chunk.context.startswith("This chunk about")


@pytest.mark.parametrize("concurrency", [1, 3])
def test_add_context_llm_pipeline_counts_and_caches(server, tmp_path, concurrency: int) -> None:
    config = llm_config(server, llm_cache_dir=str(tmp_path), llm_concurrency=concurrency)
    p = BeamTestPipeline()
    out = p | beam.Create(pipeline_input()) | AddContext(config, LLM_BUDGET)
    assert_that(out, check_llm_output)
    counters = counters_of(p.run())
    assert counters["context_headers"] == 5
    assert counters["header_tokens"] > 0
    assert counters["llm_requests"] == 4 + 2 + 3  # 4 successes, 2 retried, 3 tries that fail
    assert counters["llm_retries"] == 4
    assert counters["llm_failures_fallback"] == 1
    assert counters["llm_prompt_tokens"] == 400 and counters["llm_completion_tokens"] == 40
    assert counters.get("llm_cache_hits", 0) == 0

    before = server.request_count
    p = BeamTestPipeline()
    out = p | beam.Create(pipeline_input()) | AddContext(config, LLM_BUDGET)
    assert_that(out, check_llm_output)
    counters = counters_of(p.run())
    # Only the chunk whose LLM call failed asks again; every other answer comes from the cache.
    assert server.request_count - before == 3
    assert counters["llm_cache_hits"] == 4
    assert counters["llm_prompt_tokens"] == 0


def check_all_llm(chunks: list[Chunk]) -> None:
    assert [c.context_source for c in chunks] == ["llm"] * 6


def test_add_context_llm_sends_requests_concurrently(server) -> None:
    chunks = [make_chunk(f"PAUSE part {i}.", i) for i in range(6)]
    p = BeamTestPipeline()
    out = (
        p
        | beam.Create([(DOCUMENT, chunks)])
        | AddContext(llm_config(server, llm_concurrency=3), LLM_BUDGET)
    )
    assert_that(out, check_all_llm)
    p.run()
    assert 1 < server.max_active <= 3


def check_path_output(chunks: list[Chunk]) -> None:
    assert (
        sorted(c.context for c in chunks)
        == ["widget.md > Gizmos > Setup"] + ["widget.md > Widget Manual > Installation"] * 4
    )
    assert {c.context_source for c in chunks} == {"path"}


def test_add_context_path_pipeline() -> None:
    p = BeamTestPipeline()
    out = (
        p
        | beam.Create(pipeline_input())
        | AddContext(ContextConfig("path"), TokenBudget(chunk_size=64))
    )
    assert_that(out, check_path_output)
    counters = counters_of(p.run())
    assert counters["context_headers"] == 5 and counters["header_tokens"] > 0


def test_add_context_none_passes_chunks_through() -> None:
    expected = [c for _, chunks in pipeline_input() for c in chunks]
    p = BeamTestPipeline()
    out = p | beam.Create(pipeline_input()) | AddContext(ContextConfig("none"), TokenBudget())
    assert_that(out, equal_to(expected))
    p.run()


# --- bounded header cost and the stage's time limit (issue 22) --------------------------------


def _chunk_with_headings(headings: tuple[str, ...], title: str | None = None) -> Chunk:
    text = "Some chunk text. " * 40
    return Chunk(
        chunk_id="c",
        doc_id="d",
        source="/corpus/docs/guide.md",
        doc_type="markdown",
        language=None,
        chunk_index=0,
        text=text,
        start_char=0,
        end_char=len(text),
        token_count=make_tokenizer("cl100k_base", "tiktoken").count(text),
        section_path=headings,
        strategy="markdown",
        config_fingerprint="f",
        title=title,
    )


def _long_heading(seed: int, chars: int = 40_000) -> str:
    rnd = random.Random(seed)
    words = ("".join(rnd.choices("abcdefghijklmnopqrstuvwxyz", k=7)) for _ in range(chars // 8))
    return " ".join(words)


class _CountingTokenizer:
    """A tokenizer that adds up the characters it is given."""

    def __init__(self) -> None:
        self.inner = make_tokenizer("cl100k_base", "tiktoken")
        self.chars = 0

    def count(self, text: str) -> int:
        self.chars += len(text)
        return self.inner.count(text)

    def tokenize(self, text: str):
        self.chars += len(text)
        return self.inner.tokenize(text)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def test_a_long_heading_is_cut_in_the_path_header() -> None:
    from transforms.context.path import MAX_HEADING_CHARS

    headings = tuple(_long_heading(i) for i in range(6))
    header = path_header(_chunk_with_headings(headings, title=_long_heading(9)))
    parts = header.split(" > ")
    assert len(parts) == 8  # file, title, six headings: each kept, each cut
    assert all(len(p) <= MAX_HEADING_CHARS + 1 and p.endswith(ELLIPSIS) for p in parts[1:])
    assert parts[1].startswith(_long_heading(9)[:100])


def test_six_40kb_headings_cost_a_header_of_bounded_size() -> None:
    """Six 40 KB headings cost 19 ms a chunk (0.2 ms is usual): what the header's fitting
    tokenizes is now bounded by the header's budget, not by the headings' length."""
    chunk = _chunk_with_headings(tuple(_long_heading(i) for i in range(6)), "Guide")
    tokenizer = _CountingTokenizer()
    fitted = fit_header(path_header(chunk), chunk.text, 192, tokenizer, 32, chunk.token_count)
    assert fitted is not None and tokenizer.inner.count(fitted) <= 32
    assert fitted.startswith("guide.md > Guide > ")
    assert tokenizer.chars < 12_000


def test_path_headers_stop_at_the_documents_time_limit(monkeypatch) -> None:
    """The context stage had no time limit: past --context_timeout_s, the document's remaining
    chunks go without a header (their text kept), in order, and none is lost."""
    from transforms.context import stage

    slow_parts = stage.path_parts

    def slow(chunk: Chunk, folders: int = 0) -> list[str]:
        time.sleep(0.05)
        return slow_parts(chunk, folders)

    monkeypatch.setattr(stage, "path_parts", slow)
    chunks = [
        dataclasses.replace(_chunk_with_headings(("Install",), "Guide"), chunk_id=f"c{i}")
        for i in range(20)
    ]
    config = ContextConfig(mode="path", timeout_s=0.2)
    budget = TokenBudget(chunk_size=192)
    fn = stage._PathContextFn(config, budget)
    fn.setup()
    out = list(fn.process(("document", chunks)))
    assert [c.chunk_id for c in out] == [c.chunk_id for c in chunks]
    with_header = [c for c in out if c.context is not None]
    assert 1 <= len(with_header) <= 6
    assert out[: len(with_header)] == with_header  # the first ones, then none
    assert all(
        c.context_source is None and c.text == chunks[0].text for c in out[len(with_header) :]
    )
    # 0: no limit, every chunk gets its header
    fn = stage._PathContextFn(dataclasses.replace(config, timeout_s=0), budget)
    fn.setup()
    assert all(c.context for c in fn.process(("document", chunks[:6])))


def test_the_context_time_limit_is_a_flag() -> None:
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.options import config_from_options

    options = PipelineOptions(
        ["--input", "x", "--output", "/tmp/o", "--embedding_model=none", "--context_timeout_s=5"]
    )
    assert config_from_options(options).context.timeout_s == 5
    with pytest.raises(ValueError, match="--context_timeout_s"):
        ContextConfig(mode="path", timeout_s=-1)


def _reference_page_headers(raw: bytes, name: str) -> tuple[list[Chunk], _Tally]:
    """A real reference page extracted, chunked at the job's default budget and headed."""
    from transforms.chunking.routing import ChunkingConfig, DocumentChunker
    from transforms.ingest.html import html_to_markdown

    e = html_to_markdown(raw)
    budget = TokenBudget(chunk_size=192, header_reserve=32, chunk_overlap=32)
    doc = Document(
        doc_id="d", source=f"html/{name}", doc_type="html", text=e.text, content_hash="h",
        title=e.title,
    )  # fmt: skip
    chunks = DocumentChunker(ChunkingConfig(budget=budget)).chunk_document(doc)
    counts = _Tally()
    fitter = HeaderFitter.for_budget(budget)
    return list(path_contexts(chunks, ContextConfig("path"), fitter, counts)), counts


def test_a_reference_page_s_name_line_heads_the_chunk_where_its_description_starts() -> None:
    """PostgreSQL's VACUUM page (samples/html/sql-vacuum.html): its opening is the title, the
    name line and a synopsis too long to leave room for the Description, whose first chunk
    then has the name line in place of the title in its header. That chunk alone: the
    opening goes without a header, the synopsis's rest and the later sections keep the title."""
    with open(os.path.join(SAMPLES, "html", "sql-vacuum.html"), "rb") as f:
        out, counts = _reference_page_headers(f.read(), "sql-vacuum.html")
    name_line = "VACUUM — garbage-collect and optionally analyze a database"
    assert out[0].context is None and out[0].text.startswith(f"# VACUUM\n\n{name_line}\n")
    named = [c for c in out if c.context and name_line in c.context]
    assert len(named) == 1 and counts.tally["context_name_lines"] == 1
    assert named[0].context == f"sql-vacuum.html > {name_line} > Description"
    assert named[0].text.startswith("## Description\n\n`VACUUM` reclaims storage")
    assert named[0].chunk_index > 1  # the synopsis's rest came between
    others = [c for c in out[1:] if c is not named[0]]
    assert others and all(c.context.startswith("sql-vacuum.html > VACUUM >") for c in others)


def test_a_name_line_of_several_names_heads_the_description_too() -> None:
    """PostgreSQL's SELECT page names three commands ("SELECT, TABLE, WITH — retrieve rows
    from a table or view") under the title SELECT; its synopsis fills six chunks. The chunk
    where the Description starts has the name line in its header, as VACUUM's has (at
    config_version 81 it did not: the names were compared with the title as one)."""
    with gzip.open(os.path.join(DATA, "postgresql15-sql-select.html.gz")) as f:
        out, counts = _reference_page_headers(f.read(), "sql-select.html")
    name_line = "SELECT, TABLE, WITH — retrieve rows from a table or view"
    assert out[0].text.startswith(f"# SELECT\n\n{name_line}\n")
    named = [c for c in out if c.context and name_line in c.context]
    assert len(named) == 1 and counts.tally["context_name_lines"] == 1
    assert named[0].text.startswith("## Description\n\n`SELECT` retrieves rows")
    assert named[0].chunk_index > 1


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("SELECT, TABLE, WITH — retrieve rows", True),
        ("TABLE, SELECT — retrieve rows", True),  # the title among the names
        ("SELECT INTO — define a new table", False),  # another name that starts like it
        ("SELECTED, TABLE — retrieve rows", False),
        ("SELECT, TABLE retrieve rows", False),  # no dash
    ],
)
def test_a_name_line_names_the_title_among_its_names(line: str, named: bool) -> None:
    from transforms.context.path import name_line_lead

    texts = [f"# SELECT\n\n{line}\n\n## Synopsis\n\n```\nSELECT x\n```\n", "## Description\n\nIt."]
    found = name_line_lead("SELECT", "html", ("SELECT",), texts)
    assert found == ((1, line) if named else None)


@pytest.mark.parametrize(
    ("page", "named_text"),
    [
        # the opening reaches the Description: the name line shares its chunk, no header names it
        ("postgresql15-sql-set.html.gz", None),
        # a synopsis of command lines, not a code block, that fills the opening
        ("postgresql15-app-pg-ctl.html.gz", "## Description"),
        # the Description starts in the chunk that ends the synopsis
        ("postgresql15-sql-revoke.html.gz", "## Description"),
    ],
)
def test_the_name_line_heads_no_chunk_where_the_opening_reaches_the_description(
    page: str, named_text: str | None
) -> None:
    with gzip.open(os.path.join(DATA, page)) as f:
        out, counts = _reference_page_headers(f.read(), page.removesuffix(".gz"))
    named = [c for c in out if c.context and " — " in c.context]
    if named_text is None:
        assert not named and "context_name_lines" not in counts.tally
        assert "## Description" in out[0].text
        return
    assert len(named) == 1 and named_text in named[0].text
    assert named_text not in out[0].text
