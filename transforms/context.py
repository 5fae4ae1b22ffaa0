"""Context headers for chunks: a heading path, or one LLM sentence situating the chunk (cached).

`AddContext` consumes one `(document_text, [Chunk, ...])` element per document and emits each
chunk with `context` and `context_source` set, so that `header + "\\n\\n" + text` stays within
`chunk_size` tokens. The cores (`path_header`, `fit_header`, `LLMContextClient`) know nothing
of Beam.
"""

from __future__ import annotations

import collections
import dataclasses
import email.utils
import hashlib
import json
import logging
import os
import random
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import requests  # a dependency of apache-beam itself
from apache_beam.metrics import Metrics
from apache_beam.utils.windowed_value import WindowedValue
from requests.adapters import HTTPAdapter

from schemas.records import Chunk, content_hash
from transforms.chunking.base import MIN_CHUNK_SIZE
from transforms.chunking.tokens import Tokenizer, count_with_prefix, make_tokenizer

MODES = ("none", "path", "llm")
PROMPT_VERSION = "situate-v1"  # part of the cache key: change it whenever the prompt changes
CONTEXT_JOINER = "\n\n"  # what Chunk.embed_text() puts between context and text
ELLIPSIS = "…"
PATH_SEPARATOR = " > "
METRICS_NAMESPACE = "corpus_chunker"

_LOG = logging.getLogger(__name__)

_DOCUMENT_PROMPT = "<document>\n{document}\n</document>\n\n"
_CHUNK_PROMPT = (
    "Here is the chunk we want to situate within the whole document\n"
    "<chunk>\n{chunk}\n</chunk>\n\n"
    "Please give one short sentence that situates this chunk within the overall document, "
    "for the purposes of improving search retrieval of the chunk. "
    "Answer only with that sentence and nothing else."
)


@dataclass(frozen=True)
class ContextConfig:
    """How chunks get their context header; validated at construction."""

    mode: str = "none"
    chunk_size: int = 512  # hard limit, in `tokenizer`, of context + "\n\n" + text
    tokenizer: str = "cl100k_base"
    # The tokenizer of the chunks' token_count: when it is `tokenizer`, fitting a header reuses
    # that count (exactly, see `fit_header`). None: unknown, the joined text is counted whole.
    chunk_tokenizer: str | None = None
    max_header_tokens: int = 32
    llm_base_url: str | None = None  # OpenAI-compatible, e.g. "http://localhost:8000/v1"
    llm_model: str | None = None
    llm_api_key_env: str | None = None  # name of the env var holding the key; None: no key
    llm_context_tokens: int = 64
    llm_timeout_s: float = 30.0
    llm_max_retries: int = 4
    llm_concurrency: int = 4
    llm_price_in: float = 0.0  # USD per million prompt tokens
    llm_price_out: float = 0.0  # USD per million completion tokens
    llm_cache_dir: str | None = None  # local folder; None: no cache
    llm_backoff_s: float = 0.5  # base of the exponential backoff
    llm_backoff_max_s: float = 60.0  # cap of one wait, Retry-After included
    llm_seed: int | None = None  # seeds the backoff jitter (tests); None: random
    prompt_version: str = PROMPT_VERSION

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not self.tokenizer:
            raise ValueError(f"tokenizer must name a tokenizer, got {self.tokenizer!r}")
        if self.max_header_tokens < 1:
            raise ValueError(f"max_header_tokens must be >= 1, got {self.max_header_tokens}")
        if self.llm_context_tokens < 1:
            raise ValueError(f"llm_context_tokens must be >= 1, got {self.llm_context_tokens}")
        if self.chunk_size - reserved_tokens(self) < MIN_CHUNK_SIZE:
            raise ValueError(
                f"chunk_size={self.chunk_size} leaves fewer than {MIN_CHUNK_SIZE} tokens for "
                f"the chunk once {reserved_tokens(self)} are reserved for the {self.mode} header"
            )
        if self.llm_timeout_s <= 0:
            raise ValueError(f"llm_timeout_s must be > 0, got {self.llm_timeout_s}")
        if self.llm_max_retries < 0:
            raise ValueError(f"llm_max_retries must be >= 0, got {self.llm_max_retries}")
        if self.llm_concurrency < 1:
            raise ValueError(f"llm_concurrency must be >= 1, got {self.llm_concurrency}")
        if self.llm_price_in < 0 or self.llm_price_out < 0:
            raise ValueError(
                f"llm_price_in/llm_price_out must be >= 0, got "
                f"{self.llm_price_in}/{self.llm_price_out}"
            )
        if self.llm_backoff_s < 0 or self.llm_backoff_max_s < 0:
            raise ValueError(
                f"llm_backoff_s/llm_backoff_max_s must be >= 0, got "
                f"{self.llm_backoff_s}/{self.llm_backoff_max_s}"
            )
        if self.llm_api_key_env == "":
            raise ValueError("llm_api_key_env must be None or the name of an env var, got ''")
        if not self.prompt_version:
            raise ValueError(f"prompt_version must not be empty, got {self.prompt_version!r}")
        if self.mode == "llm":
            if not self.llm_base_url or not self.llm_base_url.startswith(("http://", "https://")):
                raise ValueError(
                    f"mode 'llm' needs llm_base_url as an http(s) URL, got {self.llm_base_url!r}"
                )
            if not self.llm_model:
                raise ValueError(f"mode 'llm' needs llm_model, got {self.llm_model!r}")


def reserved_tokens(config: ContextConfig) -> int:
    """Tokens the chunker must leave free for the header and the joiner.

    Run the chunker with `chunk_size - reserved_tokens(config)`. In llm mode the reserve also
    covers the path header used when the LLM fails.
    """
    if config.mode == "path":
        return config.max_header_tokens + len(CONTEXT_JOINER)
    if config.mode == "llm":
        return max(config.llm_context_tokens, config.max_header_tokens) + len(CONTEXT_JOINER)
    return 0


def llm_cost_usd(prompt_tokens: int, completion_tokens: int, config: ContextConfig) -> float:
    """What the LLM calls cost at the configured per-million-token prices."""
    return (prompt_tokens * config.llm_price_in + completion_tokens * config.llm_price_out) / 1e6


# --- Path headers -------------------------------------------------------------------------


def _clean_heading(text: str) -> str:
    return " ".join(text.lstrip("#").split())


def _same_heading(a: str, b: str) -> bool:
    return a.casefold() == b.casefold()


def _source_tail(source: str, parts: int) -> str:
    """The last `parts` components of a path or URI, without scheme, query or #L<line>."""
    path = source.split("#", 1)[0].split("?", 1)[0]
    components = [c for c in re.split(r"[\\/]+", path) if c and not c.endswith(":")]
    return "/".join(components[-parts:])


def path_header(chunk: Chunk) -> str:
    """The chunk's place in its document, e.g. "Title > Installation > Linux".

    Prose: the title (or the file name when there is none), then the section path, without
    repeating a first heading equal to the title. Code: the last three components of the source
    path, then the enclosing class/function path.
    """
    sections = [s for s in (_clean_heading(s) for s in chunk.section_path) if s]
    if chunk.doc_type == "code":
        parts = [_source_tail(chunk.source, 3), *sections]
    else:
        title = _clean_heading(chunk.title or "") or _source_tail(chunk.source, 1)
        if sections and _same_heading(sections[0], title):
            sections = sections[1:]
        parts = [title, *sections]
    out: list[str] = []
    for part in parts:
        if part and not (out and _same_heading(out[-1], part)):
            out.append(part)
    return PATH_SEPARATOR.join(out)


def _clean_cut(prefix: str) -> str:
    """A cut header without trailing whitespace or a dangling " >" separator."""
    return prefix.rstrip().removesuffix(PATH_SEPARATOR.rstrip()).rstrip()


def _longest_prefix(text: str, tokenizer: Tokenizer, accept: Callable[[str], bool]) -> str | None:
    """The longest accepted strict prefix of `text` cut at a token boundary, else None.

    Binary search over token boundaries; every returned value was checked by `accept`, so the
    caller's invariant holds even where token counts of concatenations are not monotonic.
    """
    candidates: list[str] = []
    for boundary in tokenizer.tokenize(text).boundaries[1:-1]:
        cut = _clean_cut(text[: int(boundary)])
        if cut and (not candidates or candidates[-1] != cut):
            candidates.append(cut)
    lo, hi, best = 0, len(candidates) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if accept(candidates[mid]):
            best, lo = candidates[mid], mid + 1
        else:
            hi = mid - 1
    return best


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

    def accept(candidate: str) -> bool:
        if max_header_tokens is not None and tokenizer.count(candidate) > max_header_tokens:
            return False
        joined = count_with_prefix(tokenizer, candidate + CONTEXT_JOINER, text, text_tokens)
        return joined <= budget

    if accept(header):
        return header
    cut = _longest_prefix(header, tokenizer, accept)
    if cut is None:
        return None
    return cut + ELLIPSIS if accept(cut + ELLIPSIS) else cut


def truncate_tokens(text: str, max_tokens: int, tokenizer: Tokenizer) -> str:
    """`text` cut at a token boundary to at most `max_tokens` tokens ("" if none fits)."""
    if tokenizer.count(text) <= max_tokens:
        return text
    cut = _longest_prefix(text, tokenizer, lambda c: tokenizer.count(c) <= max_tokens)
    return cut or ""


# --- LLM context --------------------------------------------------------------------------


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


# --- Beam wrapper -------------------------------------------------------------------------


class _Counters:
    def __init__(self) -> None:
        def c(name: str) -> Any:
            return Metrics.counter(METRICS_NAMESPACE, name)

        self.context_headers = c("context_headers")
        self.context_skipped = c("context_skipped")
        self.header_tokens = c("header_tokens")
        self.llm_requests = c("llm_requests")
        self.llm_retries = c("llm_retries")
        self.llm_failures_fallback = c("llm_failures_fallback")
        self.llm_cache_hits = c("llm_cache_hits")
        self.llm_cache_write_errors = c("llm_cache_write_errors")
        self.llm_prompt_tokens = c("llm_prompt_tokens")
        self.llm_completion_tokens = c("llm_completion_tokens")


def _with_header(
    chunk: Chunk,
    header: str,
    source: str,
    config: ContextConfig,
    tokenizer: Tokenizer,
    counters: _Counters,
    max_header_tokens: int | None,
) -> Chunk:
    known = config.chunk_tokenizer == config.tokenizer
    fitted = fit_header(
        header,
        chunk.text,
        config.chunk_size,
        tokenizer,
        max_header_tokens,
        chunk.token_count if known else None,
    )
    if fitted is None:  # the chunk alone leaves no room: the chunker ignored reserved_tokens()
        counters.context_skipped.inc()
        return dataclasses.replace(chunk, context=None, context_source=None)
    counters.context_headers.inc()
    counters.header_tokens.inc(tokenizer.count(fitted))
    return dataclasses.replace(chunk, context=fitted, context_source=source)


def _path_context(
    chunk: Chunk, config: ContextConfig, tokenizer: Tokenizer, counters: _Counters, source: str
) -> Chunk:
    return _with_header(
        chunk, path_header(chunk), source, config, tokenizer, counters, config.max_header_tokens
    )


def _unpack_chunks(element: tuple[str, list[Chunk]]) -> list[Chunk]:
    return list(element[1])


class _PathContextFn(beam.DoFn):
    def __init__(self, config: ContextConfig) -> None:
        self._config = config
        self._counters = _Counters()

    def setup(self) -> None:
        self._tokenizer = make_tokenizer(self._config.tokenizer, "tiktoken")

    def process(self, element: tuple[str, list[Chunk]]) -> Iterator[Chunk]:
        for chunk in element[1]:
            yield _path_context(chunk, self._config, self._tokenizer, self._counters, "path")


class _LLMContextFn(beam.DoFn):
    """Sends up to `llm_concurrency` requests at once across the documents of a bundle.

    Requests run on a thread pool; counters are only touched on the bundle's own thread, where
    Beam's metrics container lives.
    """

    def __init__(self, config: ContextConfig) -> None:
        self._config = config
        self._counters = _Counters()

    def setup(self) -> None:
        self._tokenizer = make_tokenizer(self._config.tokenizer, "tiktoken")
        self._session = make_session(self._config)
        self._client = LLMContextClient(self._config, self._tokenizer, session=self._session)
        self._executor = ThreadPoolExecutor(
            max_workers=self._config.llm_concurrency, thread_name_prefix="llm-context"
        )

    def start_bundle(self) -> None:
        self._pending: collections.deque = collections.deque()
        self._in_flight = 0

    def process(
        self,
        element: tuple[str, list[Chunk]],
        window: Any = beam.DoFn.WindowParam,
        timestamp: Any = beam.DoFn.TimestampParam,
    ) -> Iterator[Chunk]:
        document, chunks = element
        doc_hash = next((c.content_hash for c in chunks if c.content_hash), None)
        doc_hash = doc_hash or content_hash(document)
        futures = [
            self._executor.submit(self._client.situate, document, c.text, doc_hash) for c in chunks
        ]
        self._pending.append((chunks, futures, window, timestamp))
        self._in_flight += len(futures)
        # Emit finished documents in order; block on the oldest once enough are queued, so a
        # bundle holds a bounded number of documents in memory.
        limit = 2 * self._config.llm_concurrency
        while self._pending and (
            self._in_flight > limit or all(f.done() for f in self._pending[0][1])
        ):
            chunks, futures, _, _ = self._pending.popleft()
            self._in_flight -= len(futures)
            yield from self._finish(chunks, futures)

    def finish_bundle(self) -> Iterator[WindowedValue]:
        while self._pending:
            chunks, futures, window, timestamp = self._pending.popleft()
            for chunk in self._finish(chunks, futures):
                yield WindowedValue(chunk, timestamp, [window])
        self._in_flight = 0

    def _finish(self, chunks: list[Chunk], futures: list[Future]) -> Iterable[Chunk]:
        counters = self._counters
        for chunk, future in zip(chunks, futures, strict=True):
            outcome: LLMOutcome = future.result()
            counters.llm_requests.inc(outcome.requests)
            counters.llm_retries.inc(outcome.retries)
            counters.llm_prompt_tokens.inc(outcome.prompt_tokens)
            counters.llm_completion_tokens.inc(outcome.completion_tokens)
            if outcome.cache_hit:
                counters.llm_cache_hits.inc()
            if outcome.cache_write_failed:
                counters.llm_cache_write_errors.inc()
            # The usage travels with the chunk, so the cost report (a combine, correct on every
            # runner) can price it; the counters above are for monitoring.
            usage = (
                outcome.prompt_tokens,
                outcome.completion_tokens,
                outcome.requests,
                int(outcome.cache_hit),
            )
            chunk = dataclasses.replace(chunk, llm_usage=usage)
            if outcome.context is None:
                counters.llm_failures_fallback.inc()
                _LOG.warning("LLM context failed for chunk %s: %s", chunk.chunk_id, outcome.error)
                yield _path_context(chunk, self._config, self._tokenizer, counters, "path_fallback")
            else:
                yield _with_header(
                    chunk, outcome.context, "llm", self._config, self._tokenizer, counters, None
                )

    def teardown(self) -> None:
        executor = getattr(self, "_executor", None)
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        session = getattr(self, "_session", None)
        if session is not None:
            session.close()


class AddContext(beam.PTransform):
    """`(document_text, [Chunk, ...])` per document -> each Chunk with its context header.

    mode "none" passes chunks through; "path" sets the heading path; "llm" asks the LLM and
    falls back to the path header (context_source "path_fallback") when it fails.
    """

    def __init__(self, config: ContextConfig, label: str | None = None) -> None:
        super().__init__(label)
        if not isinstance(config, ContextConfig):
            raise ValueError(f"config must be a ContextConfig, got {type(config).__name__}")
        self._config = config

    def expand(self, pcoll: beam.PCollection) -> beam.PCollection:
        mode = self._config.mode
        if mode == "none":
            return pcoll | "Unpack chunks" >> beam.FlatMap(_unpack_chunks).with_output_types(Chunk)
        if mode == "path":
            fn: beam.DoFn = _PathContextFn(self._config)
            label = "Add path headers"
        else:
            fn = _LLMContextFn(self._config)
            label = "Add LLM context"
        return pcoll | label >> beam.ParDo(fn).with_output_types(Chunk)
