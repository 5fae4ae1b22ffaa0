"""A bad LLM reply never fails the job: it is cleaned, capped or refused, and the chunk falls
back to its path header. Each case is served by a real HTTP server on localhost."""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import threading
import time
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from transforms.chunking.tokens import make_tokenizer
from transforms.context import ContextConfig, LLMContextClient, cache_key, fit_header
from transforms.context.llm import MAX_REPLY_BYTES

KEY = "sk-test-0123456789abcdef"
# 64 MB of spaces in about 64 KB, compressed once here (the test measures the client alone).
GZIP_BOMB = gzip.compress(b" " * (64 * MAX_REPLY_BYTES))


def _answer(content: object, usage: object = None) -> bytes:
    body: dict = {"choices": [{"message": {"role": "assistant", "content": content}}]}
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body).encode()


class BadServer:
    """Answers with what the path asks for (`/<case>/v1/chat/completions`)."""

    def __init__(self) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.port = self.httpd.server_address[1]

    def url(self, case: str) -> str:
        return f"http://127.0.0.1:{self.port}/{case}/v1"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _raw(self, status: int, data: bytes, headers: dict | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for k, v in (headers or {"Content-Length": str(len(data))}).items():
                    self.send_header(k, v)
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(data)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                case = self.path.split("/")[1]
                if case == "surrogate":
                    # JSON's escape of a lone surrogate decodes to one
                    return self._raw(200, b'{"choices":[{"message":{"content":"ok \\ud83d x"}}]}')
                if case == "usage_not_object":
                    return self._raw(200, _answer("A fine line.", usage="lots"))
                if case == "usage_huge":
                    usage = {"prompt_tokens": 10**30, "completion_tokens": 5}
                    return self._raw(200, _answer("A fine line.", usage=usage))
                if case == "no_usage":
                    return self._raw(200, _answer("A fine line."))
                if case == "usage_negative":
                    usage = {"prompt_tokens": -7, "completion_tokens": -3}
                    return self._raw(200, _answer("A fine line.", usage=usage))
                if case == "controls":
                    return self._raw(200, _answer("Ring\x07 the\x1b[31m bell\u202e\u200b."))
                if case == "broken_chunked":
                    self.send_response(200)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self.wfile.write(b'5\r\n{"cho\r\nZZ\r\n')  # not a chunk size
                    self.wfile.flush()
                    self.close_connection = True
                    return None
                if case == "gzip_bomb":
                    data = GZIP_BOMB
                    headers = {"Content-Encoding": "gzip", "Content-Length": str(len(data))}
                    return self._raw(200, data, headers)
                if case == "drip":
                    data = _answer("A slow line.")
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    try:
                        for i in range(len(data)):
                            self.wfile.write(data[i : i + 1])
                            self.wfile.flush()
                            time.sleep(0.05)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    return None
                if case == "echo_cut":  # the key across the 200-byte cut of an error body
                    key = self.headers["Authorization"].split()[-1]
                    return self._raw(401, b"e" * 180 + b" key=" + key.encode())
                if case == "echo_percent":
                    key = self.headers["Authorization"].split()[-1]
                    escaped = "".join(f"%{b:02X}" for b in key.encode())
                    return self._raw(401, f"unauthorized: {escaped}".encode())
                if case == "echo_auth":
                    echoed = f"unauthorized: {self.headers['Authorization']}".encode()
                    return self._raw(401, echoed)
                return self._raw(404, b"{}")

        return Handler


@pytest.fixture(scope="module")
def server() -> Iterator[BadServer]:
    srv = BadServer()
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


@pytest.fixture(scope="module")
def cl100k():
    return make_tokenizer("cl100k_base", "tiktoken")


def client(server: BadServer, case: str, cl100k, **overrides: object) -> LLMContextClient:
    params: dict = {
        "mode": "llm",
        "llm_base_url": server.url(case),
        "llm_model": "m",
        "llm_timeout_s": 2.0,
        "llm_max_retries": 0,
        "llm_api_key_env": "BAD_SERVER_KEY",
    }
    params.update(overrides)
    return LLMContextClient(ContextConfig(**params), cl100k, sleep=lambda s: None)


@pytest.fixture(autouse=True)
def api_key(monkeypatch) -> None:
    monkeypatch.setenv("BAD_SERVER_KEY", KEY)


def test_a_lone_surrogate_in_the_reply_is_dropped(server, cl100k) -> None:
    outcome = client(server, "surrogate", cl100k).situate("doc", "chunk")
    assert outcome.context == "ok x"
    outcome.context.encode("utf-8")  # what Beam's coder does with it


@pytest.mark.parametrize(
    ("case", "completion_tokens"),
    [("usage_not_object", None), ("usage_huge", 5), ("usage_negative", None)],
)
def test_a_usage_that_is_not_a_count_is_counted_here(server, cl100k, case, completion_tokens):
    outcome = client(server, case, cl100k).situate("doc text", "chunk")
    assert outcome.context == "A fine line."
    assert 0 < outcome.prompt_tokens < 1000  # 10**30 or -7 reported: counted here instead
    assert outcome.completion_tokens == (completion_tokens or cl100k.count("A fine line."))


def test_a_document_the_tokenizer_panics_on_is_priced_in_bytes_not_a_crash(server, cl100k):
    # No usage in the reply: the prompt is counted here, and tiktoken panicked (a
    # BaseException) on the million-space run, which ended the job (issue 22, N1).
    document = " " * 1_000_000 + "x"
    outcome = client(server, "no_usage", cl100k).situate(document, "chunk")
    assert outcome.context == "A fine line."
    assert outcome.prompt_tokens >= len(document)  # its bytes, a bound no count exceeds
    assert outcome.completion_tokens == cl100k.count("A fine line.")


def test_control_and_hiding_characters_never_reach_the_context(server, cl100k) -> None:
    outcome = client(server, "controls", cl100k).situate("doc", "chunk")
    assert outcome.context == "Ring the [31m bell ."


def test_a_broken_chunked_body_is_a_failed_call_not_a_crash(server, cl100k) -> None:
    outcome = client(server, "broken_chunked", cl100k).situate("doc", "chunk")
    assert outcome.context is None
    assert outcome.error


def test_a_compressed_body_is_not_decompressed_past_the_cap(server, cl100k) -> None:
    tracemalloc.start()
    try:
        outcome = client(server, "gzip_bomb", cl100k).situate("doc", "chunk")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert outcome.context is None
    assert "over" in outcome.error
    assert peak < 8 * MAX_REPLY_BYTES  # 64 MB of spaces were on offer


def test_the_timeout_holds_for_the_whole_reply(server, cl100k) -> None:
    started = time.monotonic()
    outcome = client(server, "drip", cl100k, llm_timeout_s=0.5).situate("doc", "chunk")
    assert time.monotonic() - started < 2.0  # the drip would take about 2.5 s
    assert outcome.context is None
    assert "Timeout" in outcome.error


def test_an_echoed_key_is_redacted_from_the_error(server, cl100k, caplog) -> None:
    outcome = client(server, "echo_auth", cl100k).situate("doc", "chunk")
    assert outcome.context is None
    assert "HTTP 401" in outcome.error
    assert KEY not in outcome.error
    assert "Bearer ***" in outcome.error


@pytest.mark.parametrize("case", ["echo_cut", "echo_percent"])
def test_an_echoed_key_is_redacted_cut_or_percent_encoded(server, cl100k, case) -> None:
    outcome = client(server, case, cl100k).situate("doc", "chunk")
    assert "HTTP 401" in outcome.error
    assert KEY[:6] not in outcome.error and "%73%6B%2D%74" not in outcome.error


def test_credentials_in_the_base_url_are_refused() -> None:
    with pytest.raises(ValueError, match="--llm_base_url must not hold credentials"):
        ContextConfig(mode="llm", llm_base_url="https://u:p@llm.example/v1", llm_model="m")


def test_plain_http_to_another_host_warns(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        ContextConfig(mode="llm", llm_base_url="http://llm.example/v1", llm_model="m")
    assert "unencrypted" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        ContextConfig(mode="llm", llm_base_url="http://127.0.0.1:8000/v1", llm_model="m")
    assert "unencrypted" not in caplog.text


def test_the_cache_key_names_the_endpoint() -> None:
    a = cache_key("d", "c", "llama-3", "v1", "http://a/v1/chat/completions")
    b = cache_key("d", "c", "llama-3", "v1", "http://b/v1/chat/completions")
    assert a != b


@pytest.mark.parametrize("kb", [20, 80])
def test_fitting_a_huge_header_costs_little_memory(cl100k, kb) -> None:
    header = "Title " + "x" * (kb * 1024)
    tracemalloc.start()
    try:
        started = time.perf_counter()
        fitted = fit_header(header, "Some chunk text.", 64, cl100k, max_header_tokens=32)
        seconds = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert fitted is not None and fitted.startswith("Title ")
    assert cl100k.count(fitted) <= 32
    assert peak < 8 * 1024 * 1024  # was 381 MiB at 40 KB and 1,528 MiB at 80 KB
    assert seconds < 2.0
