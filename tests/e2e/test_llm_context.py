"""--context=llm through the whole job, against a real OpenAI-compatible server on 127.0.0.1."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from tests.jobs import run
from tests.tables import report, rows


class _Chat(BaseHTTPRequestHandler):
    requests_seen: ClassVar[list] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        type(self).requests_seen.append(prompt)
        if "FAIL-ALWAYS" in prompt.rsplit("<chunk>", 1)[-1]:
            self.send_response(503)
            self.end_headers()
            return
        answer = {
            "choices": [{"message": {"content": "This chunk situates a section of the guide."}}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 10},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def chat_server():
    _Chat.requests_seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_llm_context_is_embedded_priced_and_cached(chat_server, tmp_path):
    corpus = tmp_path / "guide.md"
    corpus.write_text(
        "# Guide\n\n## Install\n\n"
        + "Download the package and run the installer. " * 10
        + "\n\n## Trouble\n\nFAIL-ALWAYS "
        + "when the installer stops, read the log. " * 10
    )
    flags = [
        "--input",
        str(corpus),
        "--context=llm",
        f"--llm_base_url={chat_server}",
        "--llm_model=test-model",
        "--llm_max_retries=1",
        "--llm_timeout_s=5",
        f"--llm_cache_dir={tmp_path / 'cache'}",
        "--llm_price_in=3",
        "--llm_price_out=15",
        "--embedding_model=none",
        "--chunk_size=128",
    ]
    run([*flags, "--output", str(tmp_path / "one")])
    chunks = rows(str(tmp_path / "one"), "chunks")
    sources = {c["context_source"] for c in chunks}
    assert sources == {"llm", "path_fallback"}
    for c in chunks:
        if c["context_source"] == "llm":
            assert c["context"] == "This chunk situates a section of the guide."
        assert c["embed_tokens"] <= 128
    r = report(str(tmp_path / "one"))
    ok = sum(c["context_source"] == "llm" for c in chunks)
    assert r["llm_context"]["prompt_tokens"] == 1000 * ok
    assert r["llm_context"]["completion_tokens"] == 10 * ok
    assert r["llm_context"]["fallbacks"] == len(chunks) - ok
    assert r["llm_context"]["cost_usd"] == pytest.approx(ok * (1000 * 3 + 10 * 15) / 1e6)
    # the document comes first in the prompt, the chunk last (prompt caching)
    prompt = _Chat.requests_seen[0]
    assert prompt.index("Download the package") < prompt.rindex("<chunk>")

    seen = len(_Chat.requests_seen)
    failing = sum("FAIL-ALWAYS" in p.rsplit("<chunk>", 1)[-1] for p in _Chat.requests_seen)
    assert failing >= len(chunks) - ok
    run([*flags, "--output", str(tmp_path / "two")])
    again = report(str(tmp_path / "two"))
    assert again["llm_context"]["cache_hits"] == ok
    assert again["llm_context"]["prompt_tokens"] == 0
    # only the failing chunk goes back to the server
    assert len(_Chat.requests_seen) - seen == failing
