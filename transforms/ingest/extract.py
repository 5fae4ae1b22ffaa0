"""The extraction stage: every RawDocument becomes a Document or a Reject naming the reason
(binary, invalid_utf8, invalid_encoding, empty, too_deep, extract_timeout, extract_failed,
empty_after_extraction, redirect; for PDF and Office files encrypted, no_text_layer, corrupt_pdf,
corrupt_docx, corrupt_pptx, extract_memory).

The pure core is transforms/ingest/extraction.py. HTML and paged files are extracted in a child
process (one per process and thread of work, kept between stages), which stops an extraction
past its CPU-time limit and is killed past a wall-clock backstop.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import NamedTuple

import apache_beam as beam

from schemas.records import Document, RawDocument, hash_extracted
from transforms.common import REJECTS
from transforms.ingest.extraction import (
    PAGED_MEMORY_BYTES,
    CpuTimeUp,
    ExtractError,
    child_environment,
    child_ready,
    extract_document,
    extract_html,
    extract_paged,
    restrict_environment,
    within_cpu_time,
)
from transforms.stage_base import Rejection, Stage

CHILD_START_TIMEOUT_S = 300.0
# The limit counts the child's CPU time, which load on the machine does not stretch: the same
# pages are rejected on a busy night as on a quiet one. The wall clock only backs it up, for
# an extraction stuck where no signal reaches Python (inside one C call), at this many times
# the limit plus a margin for a machine that is very busy indeed.
WALL_CLOCK_FACTOR = 10.0
WALL_CLOCK_MARGIN_S = 30.0


def _kill(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    """End the extraction child now (shutdown alone would wait for a runaway extraction)."""
    for proc in list(getattr(pool, "_processes", {}).values()):
        proc.kill()
    pool.shutdown(wait=False, cancel_futures=True)


def _alive(pool: concurrent.futures.ProcessPoolExecutor) -> bool:
    processes = getattr(pool, "_processes", None) or {}
    return (
        not getattr(pool, "_broken", False)
        and not getattr(pool, "_shutdown_thread", False)
        and bool(processes)
        and all(p.is_alive() for p in processes.values())
    )


class _IdleChildren:
    """Extraction children that a stage's teardown handed back, for the next stage instance of
    this process to take (as Beam's `shared.Shared` keeps a model across DoFn instances).

    A child is started once per process and thread of work, not once per DoFn instance: a
    worker that tears DoFns down and sets them up again (a retried bundle, the DirectRunner
    running one job after another) does not pay a new interpreter each time (2.5-3 s of CPU
    here). A child is only ever handed back healthy: one that timed out or died is killed,
    never kept. It holds nothing between documents (each extraction sets its own limits), and
    is taken only while the part of the environment it was started with
    (`child_environment`) is still the parent's.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._idle: list[tuple[tuple, concurrent.futures.ProcessPoolExecutor]] = []

    @staticmethod
    def environment_key() -> tuple:
        return tuple(sorted(child_environment(dict(os.environ)).items()))

    def take(self) -> tuple[tuple, concurrent.futures.ProcessPoolExecutor | None]:
        """(the environment key, an idle child started with it, or None)."""
        key = self.environment_key()
        with self._lock:
            if self._pid != os.getpid():  # a forked copy of this process: not its children
                self._pid, self._idle = os.getpid(), []
            alive, stale = [], []
            for started_with, pool in self._idle:
                (alive if _alive(pool) else stale).append((started_with, pool))
            match = next((i for i, (k, _) in enumerate(alive) if k == key), None)
            found = alive.pop(match)[1] if match is not None else None
            self._idle = alive
        for _, pool in stale:
            _kill(pool)
        return key, found

    def give_back(self, key: tuple, pool: concurrent.futures.ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pid == os.getpid() and _alive(pool):
                self._idle.append((key, pool))
                return
        _kill(pool)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for _, pool in idle:
            _kill(pool)


_IDLE_CHILDREN = _IdleChildren()
atexit.register(_IDLE_CHILDREN.close)


class _ExtractFn(Stage):
    """Runs the pure core; HTML and paged documents go to a child process, which stops an
    extraction past its CPU-time limit (and is killed past a wall-clock backstop)."""

    STAGE = "extract"
    FAILED = "extract_failed"  # a parser bug on one document must not fail the job
    REJECTED_STAT = "documents_rejected_extract"

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._environment: tuple = ()  # what _IDLE_CHILDREN keys the child by

    def setup(self) -> None:
        self._pool = None

    def _pool_or_new(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            self._environment, self._pool = _IDLE_CHILDREN.take()
        if self._pool is None:
            ctx = multiprocessing.get_context("spawn")
            pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=1, mp_context=ctx, initializer=restrict_environment
            )
            # The child's start (a new interpreter importing Beam and trafilatura: 2.5 s here,
            # far more on a loaded machine) is waited for apart from the time limit, which is
            # the extraction's alone: counted in it, the document after each timeout (the
            # child is then started again) timed out too, and a busy night rejected pages that
            # the night before had chunked.
            try:
                pool.submit(child_ready).result(timeout=CHILD_START_TIMEOUT_S)
            except Exception as e:
                _kill(pool)
                raise ExtractError(
                    "extract_failed", f"the extraction process did not start: {e!r}"
                ) from None
            self._pool = pool
        return self._pool

    def _kill_pool(self) -> None:
        if self._pool is not None:
            _kill(self._pool)
            self._pool = None

    def _html(self, html: str):
        return self._in_child("HTML", extract_html, html)

    def _paged(self, doc_type: str, data: bytes):
        return self._in_child(doc_type.upper(), extract_paged, doc_type, data)

    def _in_child(self, what: str, fn: Callable, *args):
        if self.timeout_s <= 0:
            return fn(*args)
        future = self._pool_or_new().submit(within_cpu_time, self.timeout_s, fn, *args)
        wall_s = self.timeout_s * WALL_CLOCK_FACTOR + WALL_CLOCK_MARGIN_S
        try:
            return future.result(timeout=wall_s)
        except (CpuTimeUp, concurrent.futures.TimeoutError) as e:
            # a new child for the next document: the signal may have cut the parser anywhere
            self._kill_pool()
            self.stat("extract_timeouts")
            spent = "CPU seconds" if isinstance(e, CpuTimeUp) else f"{wall_s:g} s of wall clock"
            raise ExtractError(
                "extract_timeout",
                f"{what} extraction over --extract_timeout_s={self.timeout_s} ({spent})",
            ) from None
        except concurrent.futures.process.BrokenProcessPool as e:
            self._kill_pool()
            why = "" if what == "HTML" else f" (capped at {PAGED_MEMORY_BYTES} bytes of memory)"
            raise ExtractError("extract_failed", f"extraction process died{why}: {e}") from None

    def process_one(self, raw: RawDocument) -> Iterator[Document]:
        try:
            doc = extract_document(raw, self._html, self._paged)
        except ExtractError as e:
            raise Rejection(e.reason, str(e)) from None
        self.stat("documents_extracted")
        yield replace(doc, extracted_hash=hash_extracted(doc))

    def teardown(self) -> None:
        if self._pool is not None:
            # healthy: kept for this process's next stage
            _IDLE_CHILDREN.give_back(self._environment, self._pool)
            self._pool = None


class ExtractResult(NamedTuple):
    documents: beam.PCollection  # Document
    rejects: beam.PCollection  # Reject


class ExtractText(beam.PTransform):
    """RawDocument -> ExtractResult: a Document, or a Reject with the reason."""

    def __init__(self, timeout_s: float = 5.0) -> None:
        """`timeout_s`: the CPU-time limit of one HTML or paged extraction (0: none), already
        validated."""
        super().__init__()
        self.timeout_s = timeout_s

    def expand(self, raws: beam.PCollection) -> ExtractResult:
        out = raws | "Extract text" >> beam.ParDo(_ExtractFn(self.timeout_s)).with_outputs(
            REJECTS, main="documents"
        )
        return ExtractResult(out.documents, out[REJECTS])
