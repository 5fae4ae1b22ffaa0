"""The LLM context line: an OpenAI-compatible client with retries, backoff and a cache."""

from __future__ import annotations

import email.utils
import hashlib
import json
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests  # a dependency of apache-beam itself
from requests.adapters import HTTPAdapter

from schemas.records import content_hash
from transforms.chunking.tokens import Tokenizer
from transforms.context.config import ContextConfig
from transforms.context.path import truncate_tokens

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


def cache_key(doc_hash: str, chunk_hash: str, model: str, prompt_version: str) -> str:
    """sha256 of what determines the LLM's answer."""
    payload = "\x1f".join((doc_hash, chunk_hash, model, prompt_version))
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
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def clean_llm_line(content: str) -> str:
    """One line of model output: whitespace collapsed, wrapping quotes removed."""
    line = " ".join(content.split())
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

    Retries 429, 5xx, connection errors and timeouts with exponential backoff (Retry-After wins
    when given), up to `llm_max_retries` times. Never raises for a failed call: the outcome's
    `context` is None and the caller falls back. Safe to share between threads.
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
        self._headers = {"Content-Type": "application/json"}
        key = os.environ.get(config.llm_api_key_env) if config.llm_api_key_env else None
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
        sent = retries = 0
        error = ""
        for attempt in range(cfg.llm_max_retries + 1):
            retry_after = None
            sent += 1
            try:
                response = self.session.post(
                    self.url, json=payload, headers=self._headers, timeout=cfg.llm_timeout_s
                )
            except (requests.Timeout, requests.ConnectionError) as e:
                error = f"{type(e).__name__}: {e}"
            else:
                status = response.status_code
                if status == 200:
                    return self._success(response, messages, key, sent, retries)
                error = f"HTTP {status}: {response.text[:200]}"
                if status != 429 and status < 500:
                    break  # a request the server will never accept: do not retry
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
            if attempt == cfg.llm_max_retries:
                break
            self._sleep(self._delay(attempt, retry_after))
            retries += 1
        return LLMOutcome(context=None, requests=sent, retries=retries, error=error)

    def _success(
        self, response: Any, messages: list[dict[str, str]], key: str, sent: int, retries: int
    ) -> LLMOutcome:
        try:
            body = response.json()
            content = body["choices"][0]["message"]["content"]
            if not isinstance(content, str):
                raise TypeError(f"content is {type(content).__name__}")
        except (ValueError, KeyError, IndexError, TypeError) as e:
            return LLMOutcome(
                None, requests=sent, retries=retries, error=f"malformed response: {e!r}"
            )
        usage = body.get("usage") or {}
        prompt_tokens = usage.get("prompt_tokens")
        completion_tokens = usage.get("completion_tokens")
        if not isinstance(prompt_tokens, int):
            prompt_tokens = sum(self.tokenizer.count(m["content"]) for m in messages)
        if not isinstance(completion_tokens, int):
            completion_tokens = self.tokenizer.count(content)
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
