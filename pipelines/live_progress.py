"""Progress lines on stderr while the job runs: counts, the embedding rate and the time left.

On the DirectRunner (in-process or multi-process) the stages' counters also write per-process
tallies to a folder (transforms/progress.py); `Progress` sums them every few seconds and prints
one line: redrawn in place on a terminal, a plain line every `LOG_INTERVAL_S` otherwise (CI
logs). Other runners show their own progress: for them one line points to the runner's UI and
the job's Beam metrics.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from apache_beam.options.pipeline_options import (
    GoogleCloudOptions,
    PipelineOptions,
    PortableOptions,
    StandardOptions,
)

from transforms.common import NAMESPACE
from transforms.progress import PROGRESS_DIR_ENV

TTY_INTERVAL_S = 1.0
LOG_INTERVAL_S = 10.0
# What the line is made of (counter names the stages report in NAMESPACE).
COUNTERS = (
    "files_read",
    "jsonl_records_read",
    "documents_extracted",
    "documents_rejected_extract",
    "documents_unchanged",
    "documents_chunked",
    "documents_rejected_chunk",
    "documents_without_chunks",
    "chunks",
    "chunks_embedded",
    "chunks_rejected_embed",
)
LOCAL_RUNNERS = frozenset(
    {"", "directrunner", "switchingdirectrunner", "fnapirunner", "bundlebaseddirectrunner"}
)


def runner_name(options: PipelineOptions) -> str:
    """--runner, lower case, without a module path ("" when not given: the DirectRunner)."""
    runner = options.view_as(StandardOptions).runner or ""
    if not isinstance(runner, str):
        runner = type(runner).__name__
    return runner.rsplit(".", 1)[-1].lower()


def is_local(options: PipelineOptions) -> bool:
    return runner_name(options) in LOCAL_RUNNERS


def remote_pointer(options: PipelineOptions, result: Any) -> str:
    """Where a runner that is not local shows the job's progress."""
    runner = runner_name(options)
    metrics = (
        f"the job's Beam metrics in namespace {NAMESPACE!r} count files_read, "
        "documents_extracted, documents_chunked, chunks and chunks_embedded"
    )
    if runner in ("dataflowrunner", "dataflow"):
        gcp = options.view_as(GoogleCloudOptions)
        job_id = getattr(result, "job_id", lambda: None)()
        where = (
            f"https://console.cloud.google.com/dataflow/jobs/{gcp.region}/{job_id}"
            f"?project={gcp.project}"
            if job_id
            else "the Dataflow page of the Google Cloud console"
        )
        return f"corpus-chunker: progress is shown by Dataflow: {where}; {metrics}"
    if runner in ("flinkrunner", "flink"):
        master = options.get_all_options().get("flink_master") or "[auto]"
        ui = "the Flink web UI" + (f" at http://{master}" if master != "[auto]" else "")
        return f"corpus-chunker: progress is shown by Flink: {ui}; {metrics}"
    endpoint = options.view_as(PortableOptions).job_endpoint
    return (
        f"corpus-chunker: progress is shown by the runner (--runner={runner or 'default'}"
        + (f", job server {endpoint}" if endpoint else "")
        + "): Flink's web UI (the JobManager, port 8081) or Spark's (port 4040); "
        + metrics
    )


def read_counts(folder: str) -> dict[str, int]:
    """The sum of every worker process's tally in `folder` (a file being replaced is skipped)."""
    total: dict[str, int] = {}
    for path in glob.glob(os.path.join(folder, "*.json")):
        try:
            with open(path) as f:
                counts = json.load(f)
        except (OSError, ValueError):
            continue
        for name, n in counts.items():
            total[name] = total.get(name, 0) + int(n)
    return total


def metric_counts(result: Any) -> dict[str, int]:
    """The job's committed counters in NAMESPACE, summed over steps ({} if none can be read)."""
    from apache_beam.metrics.metric import MetricsFilter

    try:
        counters = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    except Exception:  # a runner without metrics support: the tallies are all there is
        return {}
    total: dict[str, int] = {}
    for c in counters:
        value = c.committed if c.committed is not None else c.attempted
        total[c.key.metric.name] = total.get(c.key.metric.name, 0) + int(value or 0)
    return total


def duration(seconds: float) -> str:
    """7s, 4m05s, 2h03m."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


@dataclass
class Estimator:
    """Rates and the time left, from successive counts (`update` with the elapsed seconds).

    Reading, extraction and boilerplate counting finish before the first document is chunked
    (the boilerplate side input and a Reshuffle separate the stages), so once chunking has
    begun every document is known: extracted less unchanged. Before that, only the time left
    to read the files matched can be told. The model gets its chunks in batches (up to
    --embedding_max_batch), so the embedded count moves in steps: the rate is taken at the
    last step, and the time left counts down between steps.
    """

    files_matched: int | None = None
    embeds: bool = True
    chunking_since: float | None = None  # elapsed seconds when the first chunk was seen
    embedded: int = 0  # embedded (or failed) chunks at the last step
    embedded_at: float | None = None  # elapsed seconds when that step was seen

    def update(self, counts: Mapping[str, int], elapsed: float) -> None:
        if self.chunking_since is None and counts.get("chunks", 0) > 0:
            self.chunking_since = elapsed
        embedded = counts.get("chunks_embedded", 0) + counts.get("chunks_rejected_embed", 0)
        if embedded != self.embedded:
            self.embedded, self.embedded_at = embedded, elapsed

    def embed_rate(self) -> float | None:
        """Chunks per second from the first chunk to the last step of the embedded count."""
        if self.chunking_since is None or self.embedded_at is None or not self.embedded:
            return None
        span = self.embedded_at - self.chunking_since
        return self.embedded / span if span > 0 else None

    def seconds_left(self, counts: Mapping[str, int], elapsed: float) -> tuple[float, str] | None:
        """(seconds, what they cover) or None while there is nothing to go by."""
        if self.chunking_since is None:
            files = counts.get("files_read", 0)
            if not self.files_matched or files == 0 or files >= self.files_matched:
                return None
            rate = files / elapsed
            return (self.files_matched - files) / rate, "to read, then " + (
                "chunk and embed" if self.embeds else "chunk"
            )
        documents = counts.get("documents_extracted", 0) - counts.get("documents_unchanged", 0)
        chunked = counts.get("documents_chunked", 0)
        done = (
            chunked
            + counts.get("documents_rejected_chunk", 0)
            + counts.get("documents_without_chunks", 0)
        )
        left_docs = max(0, documents - done)
        if not self.embeds:
            since = elapsed - self.chunking_since
            rate = done / since if since > 0 else 0.0
            return (left_docs / rate, "") if rate > 0 else None
        rate = self.embed_rate()
        if rate is None or self.embedded_at is None:
            return None
        chunks = counts.get("chunks", 0)
        expected = chunks + (chunks / chunked if chunked else 0.0) * left_docs
        left = max(0.0, expected - self.embedded) / rate - (elapsed - self.embedded_at)
        return max(0.0, left), ""


def progress_line(
    counts: Mapping[str, int], elapsed: float, estimator: Estimator, final: bool = False
) -> str:
    """One line: what was read, extracted, chunked and embedded, the rate, elapsed and left."""
    files = counts.get("files_read", 0)
    read = f"read {files:,}"
    if estimator.files_matched and not final:
        read += f"/{estimator.files_matched:,}"
    read += " files"
    records = counts.get("jsonl_records_read", 0)
    if records:
        read += f" ({records:,} records)"
    parts = [read, f"extracted {counts.get('documents_extracted', 0):,}"]
    if counts.get("documents_unchanged"):
        parts.append(f"unchanged {counts['documents_unchanged']:,}")
    chunked = counts.get("documents_chunked", 0)
    parts.append(f"chunked {chunked:,} ({counts.get('chunks', 0):,} chunks)")
    if estimator.embeds:
        embedded = f"embedded {counts.get('chunks_embedded', 0):,}"
        rate = estimator.embed_rate()
        if rate is not None:
            embedded += f" at {rate:,.1f} chunks/s"
        parts.append(embedded)
    head = f"corpus-chunker {'done' if final else 'progress'}: {duration(elapsed)}"
    line = f"{head} | " + ", ".join(parts)
    if not final:
        left = estimator.seconds_left(counts, elapsed)
        if left is None:
            line += " | left: estimating"
        else:
            seconds, what = left
            line += f" | left ~{duration(seconds)}" + (f" {what}" if what else "")
    return line


def matched_files(patterns: Sequence[str]) -> int | None:
    """How many files the local --input patterns match (None when one is remote)."""
    from apache_beam.io.filesystems import FileSystems

    if any("://" in p for p in patterns):
        return None  # listing a bucket a second time only for a progress line is not worth it
    paths = set()
    for result in FileSystems.match(list(patterns)):
        paths.update(m.path for m in result.metadata_list)
    return len(paths)


class Progress:
    """Prints progress lines to `stream` from a background thread while a local job runs.

    Use as a context manager around `pipeline.run()` and `wait_until_finish()`: it sets
    PROGRESS_DIR_ENV to a fresh temporary folder for the workers (restored and removed on
    exit); `finish(result)` prints the final line from the job's own metrics.
    """

    def __init__(
        self,
        stream: TextIO,
        estimator: Estimator,
        interval_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.estimator = estimator
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.interval_s = interval_s or (TTY_INTERVAL_S if self.tty else LOG_INTERVAL_S)
        self.clock = clock
        self.folder = ""
        self._previous_env: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0
        self._drawn = False  # a line is on the terminal without its newline

    def __enter__(self) -> Progress:
        self.folder = tempfile.mkdtemp(prefix="corpus-chunker-progress-")
        self._previous_env = os.environ.get(PROGRESS_DIR_ENV)
        os.environ[PROGRESS_DIR_ENV] = self.folder  # worker processes inherit it
        self._started = self.clock()
        self._thread = threading.Thread(target=self._loop, name="corpus-chunker-progress-lines")
        self._thread.daemon = True
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._drawn:  # an error follows: keep the last line, end it
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
        if self._previous_env is None:
            os.environ.pop(PROGRESS_DIR_ENV, None)
        else:
            os.environ[PROGRESS_DIR_ENV] = self._previous_env
        shutil.rmtree(self.folder, ignore_errors=True)

    def elapsed(self) -> float:
        return self.clock() - self._started

    def counts(self) -> dict[str, int]:
        return read_counts(self.folder)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            counts = self.counts()
            elapsed = self.elapsed()
            self.estimator.update(counts, elapsed)
            self._emit(progress_line(counts, elapsed, self.estimator))

    def _emit(self, line: str, final: bool = False) -> None:
        if self.tty:
            self.stream.write("\r" + line + "\033[K" + ("\n" if final else ""))
            self._drawn = not final
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self, result: Any) -> None:
        """Stop the periodic lines and print the final one (the job's metrics when readable)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        counts = metric_counts(result) or self.counts()
        elapsed = self.elapsed()
        self.estimator.update(counts, elapsed)
        self._emit(progress_line(counts, elapsed, self.estimator, final=True), final=True)
