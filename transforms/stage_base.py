"""The base of a stage's worker (`Stage`): the stage writes `process_one`; the base turns its
exceptions into rejects with a reason, counts through one `stat()`, and emits typed events.

As datatrove's pipeline blocks: one document's failure is a counted reject on the dead-letter
output (`common.REJECTS`), never a failed job and never a silent drop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

import apache_beam as beam

from schemas.records import Reject
from transforms import progress
from transforms.common import NAMESPACE, REJECTS
from transforms.stat_events import StatEvent

EVENTS = "events"  # the tag of a stage's stat events (transforms/stat_events.py)


class Rejection(Exception):
    """Raised by a stage's core: this input is one reject with `reason`.

    `source` and `doc_id` default to the element's (`Stage.identify`); a stage that rejects
    part of an element (one line of a JSONL file) names the part. `stat`: the counter it is
    counted under, when not the stage's `REJECTED_STAT`."""

    def __init__(
        self,
        reason: str,
        error: str,
        source: str | None = None,
        doc_id: str | None = None,
        stat: str | None = None,
    ) -> None:
        super().__init__(error)
        self.reason = reason
        self.error = error
        self.source = source
        self.doc_id = doc_id
        self.stat = stat


class WorkerFailure(RuntimeError):
    """Raised where the worker, not the input, has failed: the base lets it fail the bundle,
    which the runner retries (elsewhere), instead of rejecting the input."""


class Counts:
    """`stat(name, n)`, the one way a stage counts: a Beam counter in the job's namespace that
    also adds to the live progress tally (transforms/progress.py). For a DoFn that rejects
    nothing; `Stage` has it too."""

    def stat(self, name: str, n: int = 1) -> None:
        """Add `n` to the counter `name` (Beam's, and the progress tally's)."""
        counters = self.__dict__.setdefault("_stats", {})
        found = counters.get(name)
        if found is None:
            found = counters[name] = progress.counter(NAMESPACE, name)
        found.inc(n)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_stats", None)  # made again where the DoFn is unpickled
        return state


def _with_lines(out: beam.pvalue.TaggedOutput, element: Any) -> beam.pvalue.TaggedOutput:
    """The reject of a whole document whose lines were counted for boilerplate (a document
    that fails chunking) keeps them: a rebuild takes them off its group's counts."""
    lines = getattr(element, "line_digests", None)
    reject = out.value
    if lines is None or reject.chunk_id is not None or reject.doc_id != element.doc_id:
        return out
    return beam.pvalue.TaggedOutput(out.tag, dataclasses.replace(reject, line_digests=lines))


class Stage(Counts, beam.DoFn):
    """A DoFn whose work is `process_one(element)`; what it yields goes out as it is.

    A `Rejection` it raises becomes a Reject of `STAGE` with its reason; any other exception a
    Reject with reason `FAILED` and the exception's repr, except a `WorkerFailure`, which
    fails the bundle. Each reject is counted as `REJECTED_STAT` (when set), through `stat`.
    """

    STAGE: ClassVar[str] = ""
    FAILED: ClassVar[str] = ""
    REJECTED_STAT: ClassVar[str | None] = None

    def process_one(self, element: Any) -> Iterable[Any]:
        raise NotImplementedError

    def identify(self, element: Any) -> tuple[str, str | None]:
        """(source, doc_id) of a reject of `element`."""
        return element.source, element.doc_id

    def process(self, element: Any) -> Iterator[Any]:
        try:
            yield from self.process_one(element)
        except Rejection as r:
            yield _with_lines(self.rejected(r, element), element)
        except WorkerFailure:
            raise
        except Exception as e:  # one input's failure is a reject, never a failed job
            source, doc_id = self.identify(element)
            yield _with_lines(self.reject(source, self.FAILED, e, doc_id), element)

    def reject(
        self,
        source: str,
        reason: str,
        error: BaseException | str,
        doc_id: str | None = None,
        chunk_id: str | None = None,
        stat: str | None = None,
    ) -> beam.pvalue.TaggedOutput:
        """The dead-letter output of one reject of this stage, counted as `stat` (default
        `REJECTED_STAT`)."""
        if stat or self.REJECTED_STAT:
            self.stat(stat or self.REJECTED_STAT)
        return beam.pvalue.TaggedOutput(
            REJECTS, Reject.of_error(source, self.STAGE, reason, error, doc_id, chunk_id)
        )

    def rejected(self, rejection: Rejection, element: Any) -> beam.pvalue.TaggedOutput:
        """The reject a `Rejection` raised on `element` stands for."""
        if rejection.source is not None:  # a part of the element, named with its own id
            source, doc_id = rejection.source, rejection.doc_id
        else:
            source, doc_id = self.identify(element)
            doc_id = rejection.doc_id or doc_id
        return self.reject(source, rejection.reason, rejection.error, doc_id, stat=rejection.stat)

    @staticmethod
    def event(event: StatEvent) -> beam.pvalue.TaggedOutput:
        """A stat event on the stage's EVENTS output."""
        return beam.pvalue.TaggedOutput(EVENTS, event)
