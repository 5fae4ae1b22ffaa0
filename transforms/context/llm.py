"""The LLM context line: an OpenAI-compatible client with retries, backoff and a cache."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests  # a dependency of apache-beam itself
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.exceptions import InvalidHeader, MaxRetryError
from urllib3.response import HTTPResponse
from urllib3.util.retry import Retry

from schemas.records import content_hash
from transforms.chunking.tokens import Tokenizer, TokenizerFailed
from transforms.context.config import ContextConfig
from transforms.context.path import truncate_tokens
from transforms.redaction import redact

_LOG = logging.getLogger(__name__)

_DOCUMENT_PROMPT = "<document>\n{document}\n</document>\n\n"
_CHUNK_PROMPT = (
    "Here is the chunk we want to situate within the whole document\n"
    "<chunk>\n{chunk}\n</chunk>\n\n"
    "Please give one short sentence that situates this chunk within the overall document, "
    "for the purposes of improving search retrieval of the chunk. "
    "Answer only with that sentence and nothing else."
)


def build_messages(document: str, chunk_text: str) -> list[dict[str, str]]:
    """The chat messages: the whole document first (a prefix shared by every chunk of the
    document, so provider-side prompt caching applies), the chunk and the question last."""
    prompt = _DOCUMENT_PROMPT.format(document=document) + _CHUNK_PROMPT.format(chunk=chunk_text)
    return [{"role": "user", "content": prompt}]


def cache_key(
    doc_hash: str, chunk_hash: str, model: str, prompt_version: str, endpoint: str = ""
) -> str:
    """sha256 of what determines the LLM's answer: the texts, the model, the prompt, and the
    endpoint that serves the model (two servers' "llama-3" need not be the same model)."""
    payload = "\x1f".join((doc_hash, chunk_hash, model, prompt_version, endpoint))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def backoff_delay(attempt: int, base_s: float, max_s: float, rng: random.Random) -> float:
    """Exponential backoff with equal jitter: in [d/2, d], d = min(max_s, base_s * 2**attempt)."""
    ceiling = min(max_s, base_s * (2**attempt))
    return ceiling / 2 + rng.uniform(0, ceiling / 2)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), else None."""
    if not value:
        return None
    try:
        return float(Retry().parse_retry_after(value))  # urllib3's parser: 0 for a past date
    except InvalidHeader:
        return None


# Answers worth asking again: rate limited, or a server error.
RETRIED_STATUSES = frozenset([429, *range(500, 600)])


def retry_policy(config: ContextConfig) -> Retry:
    """urllib3's `Retry` as the policy of one request: which answers are retried (429, 5xx,
    and the Retry-After statuses urllib3 knows), how many retries are left, and the history
    of those made.

    It is not mounted on the session's adapter, where urllib3 would retry inside one call:
    the reply's body is read after urllib3 has handed it over (against one deadline, in
    bounded steps), so a reply that stalls or is too large fails where urllib3's retries
    cannot see it; urllib3 sleeps with time.sleep, waits nothing before the first retry,
    jitters without a seed and honours any Retry-After uncapped; and the cost report counts
    every request sent. The client's loop asks this policy, and waits `backoff_delay`.
    """
    return Retry(
        total=config.llm_max_retries,
        allowed_methods=None,  # every method, POST included: asking for a line twice is safe
        status_forcelist=RETRIED_STATUSES,
        raise_on_status=False,
        respect_retry_after_header=True,
    )


# A reply longer than this (decoded) is not one line: it is refused unread past it, so a huge
# or endlessly compressed body costs no memory.
MAX_REPLY_BYTES = 1 << 20
# A token count past this in a reply's `usage` is not a count (a Beam counter is an int64).
MAX_USAGE_TOKENS = 10**9
# Characters a context line never keeps: controls (C0, DEL, C1), lone surrogates, and the
# bidirectional and zero-width formatting marks that would hide text from a reader.
_UNPRINTABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\ud800-\udfff\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]"
)


class BadReply(ValueError):
    """The server answered with something that is not a usable reply."""


class _BoundedBody:
    """A reply body decompressed (gzip or deflate, as asked for) at most MAX_REPLY_BYTES far."""

    def __init__(self, encoding: str) -> None:
        encoding = encoding.strip().lower()
        if encoding in ("", "identity"):
            self._inflate = None
        elif encoding in ("gzip", "x-gzip", "deflate"):
            self._inflate = zlib.decompressobj(wbits=47)  # a gzip or zlib header, detected
        else:
            raise BadReply(f"unsupported Content-Encoding {encoding!r}")
        self._data = bytearray()

    def feed(self, piece: bytes) -> None:
        if self._inflate is None:
            self._data += piece
        while piece and len(self._data) <= MAX_REPLY_BYTES and self._inflate is not None:
            room = MAX_REPLY_BYTES + 1 - len(self._data)
            self._data += self._inflate.decompress(piece, room)
            piece = self._inflate.unconsumed_tail
        if len(self._data) > MAX_REPLY_BYTES:
            raise BadReply(f"reply over {MAX_REPLY_BYTES} bytes")

    def done(self) -> bytes:
        if self._inflate is not None:
            self.feed(self._inflate.flush())
        return bytes(self._data)


def clean_llm_line(content: str) -> str:
    """One line of model output: unprintable characters dropped, whitespace collapsed, wrapping
    quotes removed."""
    line = " ".join(_UNPRINTABLE.sub(" ", content).split())
    if len(line) >= 2 and line[0] == line[-1] and line[0] in "\"'`":
        line = line[1:-1].strip()
    return line


class LLMContextCache:
    """One small JSON file per key under a local folder; writes are atomic (tmp + replace)."""

    def __init__(self, directory: str) -> None:
        if not directory:
            raise ValueError(f"cache directory must not be empty, got {directory!r}")
        self.directory = directory

    def _path(self, key: str) -> str:
        return os.path.join(self.directory, key[:2], f"{key}.json")

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            with open(self._path(key), encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError):  # absent, torn or foreign: a miss, rewritten on success
            return None
        return (
            record if isinstance(record, dict) and isinstance(record.get("context"), str) else None
        )

    def put(self, key: str, record: dict[str, Any]) -> None:
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=f".{key[:8]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


@dataclass(frozen=True)
class LLMOutcome:
    """What one chunk's LLM call gave: the line (None on final failure) and its accounting."""

    context: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0  # HTTP requests sent, retries included
    retries: int = 0
    cache_hit: bool = False
    cache_write_failed: bool = False
    error: str = ""


def make_session(config: ContextConfig) -> requests.Session:
    """A requests session whose connection pool matches the request concurrency."""
    session = requests.Session()
    adapter = HTTPAdapter(pool_connections=1, pool_maxsize=config.llm_concurrency, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


class LLMContextClient:
    """Asks an OpenAI-compatible `POST {base_url}/chat/completions` to situate a chunk.

    Retries 429, 5xx, connection errors and timeouts (`retry_policy`: urllib3's Retry) with
    exponential backoff (Retry-After wins when given), up to `llm_max_retries` times. Never
    raises for a failed call: the outcome's `context` is None and the caller falls back. Safe
    to share between threads.
    """

    def __init__(
        self,
        config: ContextConfig,
        tokenizer: Tokenizer,
        session: Any = None,
        cache: LLMContextCache | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not config.llm_base_url or not config.llm_model:
            raise ValueError("LLMContextClient needs a config with llm_base_url and llm_model")
        self.config = config
        self.tokenizer = tokenizer
        self.session = session if session is not None else make_session(config)
        if cache is None and config.llm_cache_dir:
            cache = LLMContextCache(config.llm_cache_dir)
        self.cache = cache
        self._rng = rng if rng is not None else random.Random(config.llm_seed)
        self._rng_lock = threading.Lock()
        self._sleep = sleep
        self.url = config.llm_base_url.rstrip("/") + "/chat/completions"
        self._headers = {"Content-Type": "application/json", "Accept-Encoding": "gzip, deflate"}
        key = os.environ.get(config.llm_api_key_env) if config.llm_api_key_env else None
        self._key = key or ""
        if key:
            self._headers["Authorization"] = f"Bearer {key}"

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.config.llm_backoff_max_s)
        with self._rng_lock:
            return backoff_delay(
                attempt, self.config.llm_backoff_s, self.config.llm_backoff_max_s, self._rng
            )

    def _cap(self, line: str) -> str:
        return truncate_tokens(clean_llm_line(line), self.config.llm_context_tokens, self.tokenizer)

    def situate(self, document: str, chunk_text: str, doc_hash: str | None = None) -> LLMOutcome:
        """One sentence situating `chunk_text` in `document`, from the cache or the LLM."""
        cfg = self.config
        key = cache_key(
            doc_hash or content_hash(document),
            content_hash(chunk_text),
            cfg.llm_model or "",
            cfg.prompt_version,
            self.url,
        )
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return LLMOutcome(context=self._cap(hit["context"]) or None, cache_hit=True)

        messages = build_messages(document, chunk_text)
        payload = {
            "model": cfg.llm_model,
            "messages": messages,
            "max_tokens": cfg.llm_context_tokens,
            "temperature": 0,
        }
        retry = retry_policy(cfg)
        sent = 0
        while True:
            sent += 1
            try:
                status, headers, body = self._post(payload)
            except (requests.RequestException, urllib3.exceptions.HTTPError, BadReply) as e:
                # Timeouts, refused or dropped connections, a broken chunked body, a reply
                # over MAX_REPLY_BYTES or past the deadline: retried like a 5xx.
                error = self._redact(f"{type(e).__name__}: {e}")
                retry_after = None
                try:
                    retry = retry.increment("POST", self.url, error=e)
                except MaxRetryError:
                    break
            else:
                if status == 200:
                    return self._success(body, messages, key, sent, len(retry.history))
                # redacted whole, then cut: a key across the cut would leave its start
                text = self._redact(body.decode("utf-8", "replace"))
                error = f"HTTP {status}: {text[:200]}"
                if not retry.is_retry("POST", status, "Retry-After" in headers):
                    break  # a request the server will never accept: do not retry
                retry_after = parse_retry_after(headers.get("Retry-After"))
                answer = HTTPResponse(headers=dict(headers), status=status, preload_content=False)
                try:
                    retry = retry.increment("POST", self.url, response=answer)
                except MaxRetryError:
                    break
            self._sleep(self._delay(len(retry.history) - 1, retry_after))
        return LLMOutcome(context=None, requests=sent, retries=len(retry.history), error=error)

    def _post(self, payload: dict[str, Any]) -> tuple[int, Any, bytes]:
        """(status, headers, body) of one request, within `llm_timeout_s` overall.

        requests' timeout bounds each socket read, so a server that drips its body a byte at a
        time would never time out: the body is read as it arrives, against one deadline. It is
        decompressed here, in bounded steps, and no more than MAX_REPLY_BYTES of it is kept.
        """
        timeout = self.config.llm_timeout_s
        deadline = time.monotonic() + timeout
        with self.session.post(
            self.url, json=payload, headers=self._headers, timeout=timeout, stream=True
        ) as response:
            body = _BoundedBody(response.headers.get("Content-Encoding", ""))
            while piece := response.raw.read1(16384, decode_content=False):
                body.feed(piece)
                if time.monotonic() > deadline:
                    raise requests.Timeout(f"reply not complete within {timeout} s")
            return response.status_code, response.headers, body.done()

    def _redact(self, message: str) -> str:
        """An error message without the API key in any form a server may echo it in (the
        request's headers: as it is, percent-encoded, base64, cut; `redaction.redact`)."""
        return redact(message, [self._key])

    def _usage(self, usage: Any, name: str, texts: list[str]) -> int:
        """A usage count the server reported, if it is one; else our own count of `texts`.

        Where the tokenizer fails on them (its guard's TokenizerFailed: a panic on a text it
        cannot encode), their UTF-8 bytes stand in, a bound no count exceeds (every token
        holds at least one byte): the reply is still used, and never priced below its cost.
        """
        value = usage.get(name) if isinstance(usage, dict) else None
        valid = isinstance(value, int) and not isinstance(value, bool)
        if valid and 0 <= value <= MAX_USAGE_TOKENS:
            return value
        try:
            return sum(self.tokenizer.count(t) for t in texts)
        except TokenizerFailed as e:
            _LOG.warning("counting %s with the tokenizer failed (%s); using bytes", name, e)
            return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)

    def _success(
        self, raw: bytes, messages: list[dict[str, str]], key: str, sent: int, retries: int
    ) -> LLMOutcome:
        try:
            body = json.loads(raw.decode("utf-8"))
            content = body["choices"][0]["message"]["content"]
            if not isinstance(content, str):
                raise TypeError(f"content is {type(content).__name__}")
        except (ValueError, KeyError, IndexError, TypeError, RecursionError) as e:
            return LLMOutcome(
                None,
                requests=sent,
                retries=retries,
                error=self._redact(f"malformed response: {e!r}")[:300],
            )
        usage = body.get("usage")
        prompt_tokens = self._usage(usage, "prompt_tokens", [m["content"] for m in messages])
        completion_tokens = self._usage(usage, "completion_tokens", [content[:MAX_REPLY_BYTES]])
        line = clean_llm_line(content)
        if not line:
            return LLMOutcome(
                None, prompt_tokens, completion_tokens, sent, retries, error="empty answer"
            )
        write_failed = False
        if self.cache is not None:
            record = {
                "context": line,
                "model": self.config.llm_model,
                "prompt_version": self.config.prompt_version,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
            }
            try:
                self.cache.put(key, record)
            except OSError:
                write_failed = True  # the line is still used; only the rerun pays again
        return LLMOutcome(
            context=self._cap(line) or None,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            requests=sent,
            retries=retries,
            cache_write_failed=write_failed,
        )
