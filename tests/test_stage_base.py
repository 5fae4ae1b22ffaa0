"""The stage base: a stage writes `process_one`; the base makes its rejects and counts."""

import pickle
import re
import time
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipelines import live_progress as progress
from schemas.records import ERROR_CHARS, RawDocument, Reject
from transforms.common import REJECTS
from transforms.progress import PROGRESS_DIR_ENV
from transforms.stage_base import EVENTS, Rejection, Stage, WorkerFailure
from transforms.stat_events import DocumentIn


class _Upper(Stage):
    """Upper-cases a document's text; "empty" is a reject, "boom" a bug, "worker" a failure
    of the worker itself."""

    STAGE = "upper"
    FAILED = "upper_failed"
    REJECTED_STAT = "documents_rejected_upper"

    def process_one(self, raw: RawDocument):
        if raw.text == "empty":
            raise Rejection("empty", "nothing to upper-case")
        if raw.text == "part":
            raise Rejection("bad_part", "line 2 is bad", f"{raw.source}#L2", "part-id")
        if raw.text == "none":
            raise Rejection("nothing", "no text", stat="documents_without_text")
        if raw.text == "boom":
            raise KeyError("x" * (2 * ERROR_CHARS))
        if raw.text == "worker":
            raise WorkerFailure("the worker's disk is gone")
        self.stat("documents_uppered")
        yield self.event(DocumentIn())
        yield raw.text.upper()


def _raw(text: str) -> RawDocument:
    return RawDocument(source=f"/c/{text}.txt", doc_id=f"id-{text}", text=text)


def _outputs(fn: Stage, raw: RawDocument) -> list:
    return list(fn.process(raw))


def test_what_the_core_yields_goes_out_and_is_counted(tmp_path, monkeypatch):
    monkeypatch.setenv(PROGRESS_DIR_ENV, str(tmp_path))
    fn = pickle.loads(pickle.dumps(_Upper()))
    out = _outputs(fn, _raw("fine"))
    assert out[1] == "FINE"
    assert (out[0].tag, out[0].value) == (EVENTS, DocumentIn())
    # one stat() feeds the progress tally (and Beam's counter of the same name)
    deadline = time.monotonic() + 10
    while not progress.read_counts(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert progress.read_counts(str(tmp_path)) == {"documents_uppered": 1}


def test_a_rejection_is_a_reject_of_the_stage_with_its_reason():
    (out,) = _outputs(_Upper(), _raw("empty"))
    assert out.tag == REJECTS
    assert out.value == Reject(
        "/c/empty.txt", "upper", "empty", "nothing to upper-case", "id-empty"
    )
    (part,) = _outputs(_Upper(), _raw("part"))  # a part of the element, named by the core
    assert part.value == Reject("/c/part.txt#L2", "upper", "bad_part", "line 2 is bad", "part-id")


def test_any_other_exception_is_a_reject_with_the_failure_reason_and_its_repr_cut():
    (out,) = _outputs(_Upper(), _raw("boom"))
    reject = out.value
    assert (reject.stage, reject.reason, reject.doc_id) == ("upper", "upper_failed", "id-boom")
    assert reject.error.startswith("KeyError('xxx") and len(reject.error) == ERROR_CHARS


def test_a_failure_of_the_worker_fails_the_bundle():
    with pytest.raises(WorkerFailure):
        _outputs(_Upper(), _raw("worker"))


def test_rejects_are_counted_under_the_stage_stat_or_the_rejection_s():
    texts = ["fine", "empty", "boom", "none"]
    with TestPipeline(options=beam.options.pipeline_options.PipelineOptions([])) as p:
        out = (
            p
            | beam.Create([_raw(t) for t in texts])
            | beam.ParDo(_Upper()).with_outputs(REJECTS, EVENTS, main="main")
        )
        assert_that(out.main, equal_to(["FINE"]), label="main")
        reasons = out[REJECTS] | beam.Map(lambda r: r.reason)
        assert_that(reasons, equal_to(["empty", "upper_failed", "nothing"]), label="rejects")
        assert_that(out[EVENTS], equal_to([DocumentIn()]), label="events")
    counters = {
        c.key.metric.name: c.committed
        for c in p.result.metrics().query()["counters"]
        if c.key.metric.namespace == "corpus_chunker"
    }
    assert counters == {
        "documents_uppered": 1,
        "documents_rejected_upper": 2,
        "documents_without_text": 1,
    }


# Where a counter may still be made other than through `stat()`: each with its reason.
_COUNTER_MAKERS = {
    "transforms/progress.py",  # makes the counter `stat()` uses (`progress.counter`)
    "transforms/stage_base.py",  # `Counts.stat` itself
}


def test_every_stage_counts_through_stat():
    root = Path(__file__).resolve().parent.parent
    found = sorted(
        path.relative_to(root).as_posix()
        for path in (root / "transforms").rglob("*.py")
        if path.relative_to(root).as_posix() not in _COUNTER_MAKERS
        and re.search(r"\b(Metrics|progress)\.counter\(", path.read_text())
    )
    assert found == [], f"count through Counts.stat(), not a counter of its own: {found}"
