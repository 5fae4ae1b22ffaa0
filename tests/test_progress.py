"""Progress lines: the per-process tallies, the time left, and the lines themselves."""

import io
import os
import pickle
import time

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines import live_progress as progress
from pipelines.live_progress import Estimator, progress_line
from transforms import progress as tally
from transforms.progress import PROGRESS_DIR_ENV


def test_counter_reports_to_the_folder_the_launcher_names(tmp_path, monkeypatch):
    monkeypatch.setenv(PROGRESS_DIR_ENV, str(tmp_path))
    counter = pickle.loads(pickle.dumps(tally.counter("corpus_chunker", "files_read")))
    counter.inc()
    counter.inc(4)
    deadline = time.monotonic() + 5
    while not progress.read_counts(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert progress.read_counts(str(tmp_path)) == {"files_read": 5}
    (written,) = os.listdir(tmp_path)
    assert written.endswith(f"-{os.getpid()}.json")


def test_counter_without_a_launcher_is_a_plain_beam_counter(monkeypatch):
    monkeypatch.delenv(PROGRESS_DIR_ENV, raising=False)
    counter = tally.counter("corpus_chunker", "chunks")
    counter.inc(3)
    assert counter._tally is None


def test_read_counts_sums_every_worker_and_skips_a_torn_file(tmp_path):
    (tmp_path / "host-1.json").write_text('{"files_read": 3, "chunks": 10}')
    (tmp_path / "host-2.json").write_text('{"files_read": 2}')
    (tmp_path / "host-3.json").write_text('{"files_re')
    assert progress.read_counts(str(tmp_path)) == {"files_read": 5, "chunks": 10}


def test_time_left_while_reading_then_from_the_embedding_rate():
    e = Estimator(files_matched=100, embeds=True)
    reading = {"files_read": 25, "documents_extracted": 25}
    e.update(reading, 10.0)
    seconds, what = e.seconds_left(reading, 10.0)
    assert seconds == pytest.approx(30.0) and "to read" in what
    # chunking starts at 20 s: 80 documents in all, 10 chunked into 100 chunks
    chunking = {"files_read": 100, "documents_extracted": 80, "documents_chunked": 10}
    chunking["chunks"] = 100
    e.update(chunking, 20.0)
    assert e.seconds_left(chunking, 20.0) is None  # nothing embedded yet
    embedded = {**chunking, "chunks_embedded": 50}
    e.update(embedded, 30.0)
    assert e.embed_rate() == pytest.approx(5.0)
    # 800 chunks expected, 750 to go at 5/s, counting down between the model's batches
    assert e.seconds_left(embedded, 30.0)[0] == pytest.approx(150.0)
    assert e.seconds_left(embedded, 40.0)[0] == pytest.approx(140.0)


def test_time_left_without_embedding_goes_by_documents():
    e = Estimator(embeds=False)
    e.update({"chunks": 5, "documents_extracted": 40, "documents_chunked": 1}, 10.0)
    counts = {"chunks": 50, "documents_extracted": 40, "documents_chunked": 10}
    assert e.seconds_left(counts, 20.0)[0] == pytest.approx(30.0)


def test_progress_line_says_what_was_done():
    e = Estimator(files_matched=40, embeds=True)
    counts = {"files_read": 40, "jsonl_records_read": 7, "documents_extracted": 45}
    counts |= {"documents_chunked": 45, "chunks": 900, "chunks_embedded": 512}
    e.update({**counts, "chunks_embedded": 0}, 5.0)
    e.update(counts, 69.0)
    line = progress_line(counts, 69.0, e)
    assert line.startswith("corpus-chunker progress: 1m09s | read 40/40 files (7 records)")
    assert "chunked 45 (900 chunks), embedded 512 at 8.0 chunks/s | left ~48s" in line
    final = progress_line({**counts, "chunks_embedded": 900}, 100.0, e, final=True)
    assert final.startswith("corpus-chunker done: 1m40s | read 40 files") and "left" not in final


def test_progress_prints_plain_lines_when_not_a_terminal(monkeypatch):
    stream = io.StringIO()
    monkeypatch.delenv(PROGRESS_DIR_ENV, raising=False)
    with progress.Progress(stream, Estimator(embeds=False), interval_s=0.05) as shown:
        assert os.environ[PROGRESS_DIR_ENV] == shown.folder
        counter = tally.counter("corpus_chunker", "files_read")
        counter.inc(2)
        time.sleep(1.0)
        shown.finish(result=None)  # no metrics to read: the tallies give the final line
    assert PROGRESS_DIR_ENV not in os.environ and not os.path.exists(shown.folder)
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert any("read 2 files" in line for line in lines[:-1])
    assert lines[-1].startswith("corpus-chunker done:") and "read 2 files" in lines[-1]


def test_other_runners_get_a_pointer_to_their_ui():
    class Result:
        def job_id(self):
            return "2024-06-01_01_02_03-123"

    options = PipelineOptions(["--runner=DataflowRunner", "--project=my-proj", "--region=eu1"])
    line = progress.remote_pointer(options, Result())
    assert "https://console.cloud.google.com/dataflow/jobs/eu1/2024-06-01_01_02_03-123" in line
    assert "project=my-proj" in line and "corpus_chunker" in line
    flink = PipelineOptions(["--runner=FlinkRunner", "--flink_master=jm:8081"])
    assert "http://jm:8081" in progress.remote_pointer(flink, object())
    assert not progress.is_local(flink)
    assert progress.is_local(PipelineOptions([]))
    assert progress.is_local(PipelineOptions(["--runner=DirectRunner"]))
