"""`AddContext`, the Beam stage: path headers, or LLM lines on a thread pool, per document."""

from __future__ import annotations

import collections
import dataclasses
import logging
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import apache_beam as beam
from apache_beam.utils.windowed_value import WindowedValue

from schemas.records import Chunk, content_hash
from transforms.chunking.split import ChunkTimeout, time_limit
from transforms.context.config import ContextConfig
from transforms.context.llm import LLMContextClient, LLMOutcome, make_session
from transforms.context.path import (
    FittedHeader,
    HeaderFitter,
    name_line_chunk,
    opens_with_title,
    path_parts,
    table_line,
)
from transforms.stage_base import Counts
from transforms.token_budget import TokenBudget

_LOG = logging.getLogger(__name__)


def _with_header(
    chunk: Chunk,
    fitted: FittedHeader,
    source: str,
    fitter: HeaderFitter,
    counts: Counts,
) -> Chunk:
    if fitted.shortened_for_model:
        counts.stat("headers_shortened_for_model")
    if fitted.context is None:  # the chunk alone leaves no room: the chunker ignored the budget
        counts.stat("context_skipped")
        return dataclasses.replace(chunk, context=None, context_source=None)
    counts.stat("context_headers")
    counts.stat("header_tokens", fitter.tokenizer.count(fitted.context))
    return dataclasses.replace(
        chunk, context=fitted.context, context_source=source, model_tokens=fitted.model_tokens
    )


def _path_context(
    chunk: Chunk,
    config: ContextConfig,
    fitter: HeaderFitter,
    counts: Counts,
    source: str,
    name_line: str | None = None,
) -> Chunk:
    if source == "path" and opens_with_title(chunk):  # the page's opening names itself
        counts.stat("context_self_titled")
        return dataclasses.replace(chunk, context=None, context_source=None)
    parts = path_parts(chunk, config.header_folders)
    if name_line is not None and len(parts) > 1:
        # the page's name line in place of its title (`name_line_lead`)
        counts.stat("context_name_lines")
        parts[1] = (name_line,)
    fitted = fitter.fit_path(
        parts,
        table_line(chunk),
        chunk.text,
        chunk.token_count,
        config.max_header_tokens,
    )
    return _with_header(chunk, fitted, source, fitter, counts)


def path_contexts(
    chunks: Iterable[Chunk],
    config: ContextConfig,
    fitter: HeaderFitter,
    counts: Counts,
    source: str = "path",
) -> Iterator[Chunk]:
    """The path header of each chunk of one document, within the document's time limit
    (`config.timeout_s`): once it has passed, the document's remaining chunks go without a
    header (context None), counted in context_timeouts, so one pathological document cannot
    stall its worker."""
    limit = config.timeout_s
    deadline = time.monotonic() + limit if limit > 0 else None
    timed_out = 0
    chunks = list(chunks)
    named = name_line_chunk(chunks) if source == "path" else None
    for chunk in chunks:
        name_line = named[1] if named is not None and named[0] == chunk.chunk_id else None
        if deadline is None:
            yield _path_context(chunk, config, fitter, counts, source, name_line)
            continue
        left = deadline - time.monotonic()
        if not timed_out and left > 0:
            try:
                with time_limit(left):  # checked inside the fitting of a header too
                    with_header = _path_context(chunk, config, fitter, counts, source, name_line)
            except ChunkTimeout:
                pass
            else:
                yield with_header  # outside the limit's block: the consumer's time is its own
                continue
        timed_out += 1
        counts.stat("context_timeouts")
        yield dataclasses.replace(chunk, context=None, context_source=None)
    if timed_out:
        _LOG.warning(
            "path headers of %s took over --context_timeout_s=%g s: %d chunks go without one",
            chunk.source,
            limit,
            timed_out,
        )


def _unpack_chunks(element: tuple[str, list[Chunk]]) -> list[Chunk]:
    return list(element[1])


class _PathContextFn(Counts, beam.DoFn):
    def __init__(self, config: ContextConfig, budget: TokenBudget) -> None:
        self._config = config
        self._budget = budget

    def setup(self) -> None:
        self._fitter = HeaderFitter.for_budget(self._budget)

    def process(self, element: tuple[str, list[Chunk]]) -> Iterator[Chunk]:
        yield from path_contexts(element[1], self._config, self._fitter, self)


class _LLMContextFn(Counts, beam.DoFn):
    """Sends up to `llm_concurrency` requests at once across the documents of a bundle.

    Requests run on a thread pool; counters are only touched on the bundle's own thread, where
    Beam's metrics container lives.
    """

    def __init__(self, config: ContextConfig, budget: TokenBudget) -> None:
        self._config = config
        self._budget = budget

    def setup(self) -> None:
        self._fitter = HeaderFitter.for_budget(self._budget)
        self._session = make_session(self._config)
        self._client = LLMContextClient(self._config, self._fitter.tokenizer, session=self._session)
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
        for chunk, future in zip(chunks, futures, strict=True):
            outcome: LLMOutcome = future.result()
            self.stat("llm_requests", outcome.requests)
            self.stat("llm_retries", outcome.retries)
            self.stat("llm_prompt_tokens", outcome.prompt_tokens)
            self.stat("llm_completion_tokens", outcome.completion_tokens)
            if outcome.cache_hit:
                self.stat("llm_cache_hits")
            if outcome.cache_write_failed:
                self.stat("llm_cache_write_errors")
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
                self.stat("llm_failures_fallback")
                _LOG.warning("LLM context failed for chunk %s: %s", chunk.chunk_id, outcome.error)
                yield _path_context(chunk, self._config, self._fitter, self, "path_fallback")
            else:
                fitted = self._fitter.fit(outcome.context, chunk.text, chunk.token_count)
                yield _with_header(chunk, fitted, "llm", self._fitter, self)

    def teardown(self) -> None:
        executor = getattr(self, "_executor", None)
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        session = getattr(self, "_session", None)
        if session is not None:
            session.close()


class AddContext(beam.PTransform):
    """`(document_text, [Chunk, ...])` per document -> each Chunk with its context header,
    fitted to `budget` (and, with a model, with its model_tokens).

    mode "none" passes chunks through; "path" sets the heading path; "llm" asks the LLM and
    falls back to the path header (context_source "path_fallback") when it fails.
    """

    def __init__(
        self, config: ContextConfig, budget: TokenBudget, label: str | None = None
    ) -> None:
        super().__init__(label)
        if not isinstance(config, ContextConfig):
            raise ValueError(f"config must be a ContextConfig, got {type(config).__name__}")
        if not isinstance(budget, TokenBudget):
            raise ValueError(f"budget must be a TokenBudget, got {type(budget).__name__}")
        self._config = config
        self._budget = budget

    def expand(self, pcoll: beam.PCollection) -> beam.PCollection:
        mode = self._config.mode
        if mode == "none":
            return pcoll | "Unpack chunks" >> beam.FlatMap(_unpack_chunks).with_output_types(Chunk)
        if mode == "path":
            fn: beam.DoFn = _PathContextFn(self._config, self._budget)
            label = "Add path headers"
        else:
            fn = _LLMContextFn(self._config, self._budget)
            label = "Add LLM context"
        return pcoll | label >> beam.ParDo(fn).with_output_types(Chunk)
