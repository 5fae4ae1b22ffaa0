"""The same job on every runner it supports: identical tables, rejects and cost counts.

One small corpus runs, with the real default embedding model, on the in-process
DirectRunner, the multi-process DirectRunner (2 workers) and the PortableRunner against
Beam's local job service with an EXTERNAL worker pool (see conftest.py). The separate worker
processes start fresh and are not sent the main session, so a job that leaned on
`save_main_session` or on module globals set at start-up would fail or differ there.
DataflowRunner is checked by translating the whole job (`--dry_run`), DaskRunner by its
refusal.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.runner import PipelineState

from pipelines import live_progress as progress
from pipelines.chunk_corpus import run
from tests.e2e.test_progress import check_progress_lines
from tests.tables import read_table, report

ROOT = Path(__file__).resolve().parents[2]
SETUP_FILE = str(ROOT / "setup.py")
EMBEDDING_TOLERANCE = 1e-5
# Wall-clock and per-run file counts differ between runners by design; everything else in
# cost_report.json is a count or derived from counts.
NOT_COUNTS = {"embedding_seconds", "files_written"}

CORPUS = {
    "guide.md": """# Retries in the ingest service

The ingest service copies documents from the upload bucket into the search index. Each copy
is one task, and a task that fails is retried with exponential back-off.

## When a task is retried

A task is retried when the index answers 429 or any 5xx status, or when the connection
drops before an answer arrives. A 4xx status other than 429 means the document itself is
wrong, so the task is moved to the dead-letter queue at once and never retried.

```python
def backoff(attempt: int, base: float = 0.5, cap: float = 30.0) -> float:
    return min(cap, base * 2**attempt)
```

## Limits

No task is tried more than eight times. After the last attempt the document goes to the
dead-letter queue with the status of its last answer, so an operator can replay it once the
index is healthy again.
""",
    "notes.txt": """Meeting notes, storage migration

We agreed to move the archive from the old file servers to object storage before the end of
the quarter. The archive holds about forty million files, most of them small scanned letters,
and a few thousand large video recordings of public hearings.

The small files will be packed into tar archives of about one gigabyte each, because object
storage charges per request and forty million single uploads would cost more than the
storage itself for the first year. The video files will be uploaded as they are.

Checksums are computed before packing and verified after upload. A file whose checksum does
not match is uploaded again; after three failures it is listed in the migration report for a
person to look at.
""",
    "geometry.py": '''"""Small geometry helpers."""

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Point:
    x: float
    y: float

    def distance(self, other: "Point") -> float:
        """Euclidean distance to another point."""
        return math.hypot(self.x - other.x, self.y - other.y)


def polygon_area(points: list[Point]) -> float:
    """Area of a simple polygon by the shoelace formula."""
    total = 0.0
    for a, b in zip(points, points[1:] + points[:1]):
        total += a.x * b.y - b.x * a.y
    return abs(total) / 2.0


def centroid(points: list[Point]) -> Point:
    """The mean of the vertices (not the area centroid)."""
    n = len(points)
    return Point(sum(p.x for p in points) / n, sum(p.y for p in points) / n)
''',
    "page.html": """<!DOCTYPE html>
<html lang="en"><head><title>Choosing a backup schedule</title></head>
<body>
<nav><a href="/">Home</a> | <a href="/docs">Docs</a> | <a href="/blog">Blog</a></nav>
<main><article>
<h1>Choosing a backup schedule</h1>
<p>A backup schedule is a trade between how much data you can afford to lose and how much
storage and time the backups take. Nightly full backups are simple to restore from, but
they copy the same unchanged data again and again.</p>
<h2>Incremental backups</h2>
<p>An incremental backup copies only what changed since the previous backup. It is fast
and small, but a restore has to replay the last full backup and every increment after it,
in order, and one damaged increment breaks the chain.</p>
<p>Most teams settle on a weekly full backup with daily increments, and test a restore at
least once a month, because a backup that was never restored is only a hope.</p>
</article></main>
<footer>Copyright 2024 Example Docs. All rights reserved.</footer>
</body></html>
""",
    "records.jsonl": "\n".join(
        [
            '{"id": "faq-1", "title": "Reset a password", "text": "Open the account page, '
            "choose Security, then Reset password. A link valid for one hour is sent to the "
            'address on file; an expired link can be requested again."}',
            '{"id": "faq-2", "title": "Export data", "doc_type": "markdown", "text": "# Export'
            "\\n\\nChoose Settings, then Export. The archive is a zip of JSON files, one per "
            'project, and is ready within a day for large accounts."}',
            '{"id": "faq-3", "title": "No text here"}',
        ]
    )
    + "\n",
}
BAD_FILE = ("legacy.txt", "Caf\xe9 menu, written in Latin-1.\n".encode("latin-1"))


@pytest.fixture(scope="module")
def runner_corpus(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Five small documents of every type, a JSONL file with a bad record, one Latin-1 file."""
    folder = tmp_path_factory.mktemp("runner_corpus")
    for name, text in CORPUS.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / BAD_FILE[0]).write_bytes(BAD_FILE[1])
    return str(folder / "*")


def _portable_flags(services) -> list[str]:
    return [
        "--runner=PortableRunner",
        f"--job_endpoint={services.job_endpoint}",
        "--environment_type=EXTERNAL",
        f"--environment_config={services.worker_pool}",
    ]


# The default backend, onnx-int8: it embeds one text a pass, so a text's vector does not
# depend on how a runner batches it, and its workers start without importing transformers.


def _run(corpus: str, output: Path, flags: list[str]) -> tuple[float, str]:
    """(seconds, what the launcher printed on stderr: its progress lines among it)."""
    err = io.StringIO()
    # progress lines four times a second, to see counts move during a short run
    interval, progress.LOG_INTERVAL_S = progress.LOG_INTERVAL_S, 0.25
    started = time.perf_counter()
    try:
        with contextlib.redirect_stderr(err):
            result = run(["--input", corpus, "--output", str(output), *flags])
    finally:
        progress.LOG_INTERVAL_S = interval
    assert result.state == PipelineState.DONE
    return time.perf_counter() - started, err.getvalue()


@dataclass(frozen=True)
class RunnerRuns:
    outputs: dict[str, Path]  # runner -> output folder
    seconds: dict[str, float]
    printed: dict[str, str]  # runner -> the launcher's stderr
    portable_workers: list[Path]  # the pool's worker folders (boot.log, staged/, site/)


@pytest.fixture(scope="module")
def runner_runs(runner_corpus, runner_portable, tmp_path_factory) -> RunnerRuns:
    """The corpus run on each runner, one after the other."""
    root = tmp_path_factory.mktemp("runner_outputs")
    runs = {
        "direct": ["--runner=DirectRunner"],
        "multi_process": [
            "--runner=DirectRunner",
            "--direct_running_mode=multi_processing",
            "--direct_num_workers=2",
        ],
        "portable": [*_portable_flags(runner_portable), f"--setup_file={SETUP_FILE}"],
    }
    outputs, seconds, printed = {}, {}, {}
    for name, flags in runs.items():
        outputs[name] = root / name
        try:
            seconds[name], printed[name] = _run(runner_corpus, outputs[name], flags)
        except Exception as e:
            logs = runner_portable.log_tails() if name == "portable" else ""
            raise AssertionError(f"{name} run failed: {e}\n{logs}") from e
    print("seconds per run:", {k: round(v, 1) for k, v in seconds.items()})
    return RunnerRuns(outputs, seconds, printed, runner_portable.worker_dirs())


def _sorted_chunks(output: Path) -> pa.Table:
    return read_table(str(output), "chunks").sort_by("chunk_id")


def _sorted_rejects(output: Path) -> list[dict]:
    rows = read_table(str(output), "rejects").to_pylist()
    return sorted(rows, key=lambda r: (r["source"], r["stage"], r["reason"], r["chunk_id"] or ""))


def _counts(value):
    if isinstance(value, dict):
        return {k: _counts(v) for k, v in value.items() if k not in NOT_COUNTS}
    return value


@pytest.mark.runners
@pytest.mark.parametrize("name", ["multi_process", "portable"])
def test_chunk_tables_are_identical(runner_runs, name):
    expected = _sorted_chunks(runner_runs.outputs["direct"])
    actual = _sorted_chunks(runner_runs.outputs[name])
    assert actual.num_rows == expected.num_rows >= 8  # every document type, a few chunks each
    assert actual.schema == expected.schema
    for column in expected.column_names:
        if column != "embedding":
            assert actual.column(column).to_pylist() == expected.column(column).to_pylist(), column
    a = np.asarray(actual.column("embedding").to_pylist(), dtype=np.float32)
    b = np.asarray(expected.column("embedding").to_pylist(), dtype=np.float32)
    assert a.shape == (expected.num_rows, 384)
    assert float(np.abs(a - b).max()) <= EMBEDDING_TOLERANCE


@pytest.mark.runners
@pytest.mark.parametrize("name", ["multi_process", "portable"])
def test_rejects_and_cost_counts_are_identical(runner_runs, name):
    outputs = runner_runs.outputs
    expected = _sorted_rejects(outputs["direct"])
    assert {(Path(r["source"]).name, r["reason"]) for r in expected} == {
        ("legacy.txt", "invalid_utf8"),
        ("records.jsonl#L3", "missing_text"),
    }
    assert _sorted_rejects(outputs[name]) == expected
    direct_report = report(str(outputs["direct"]))
    assert direct_report["balanced"]
    assert _counts(report(str(outputs[name]))) == _counts(direct_report)


@pytest.mark.runners
def test_progress_counts_arrive_from_the_worker_processes(runner_runs, runner_corpus):
    """The multi-process DirectRunner's workers are processes of their own: the launcher's
    progress lines show their counts while the job runs, not only at its end."""
    lines = [
        line
        for line in runner_runs.printed["multi_process"].splitlines()
        if line.startswith("corpus-chunker ")
    ]
    check_progress_lines(str(runner_runs.outputs["multi_process"]), lines, [runner_corpus])


@pytest.mark.runners
def test_portable_workers_use_the_staged_package(runner_runs):
    """The workers had the project only from --setup_file's sdist (nothing else provides it)."""
    assert runner_runs.portable_workers
    for worker in runner_runs.portable_workers:
        assert "staged workflow.tar.gz" in (worker / "boot.log").read_text()
        site = worker / "site"
        for module in ("pipelines/chunk_corpus.py", "transforms/chunking/routing.py"):
            assert (site / module).is_file(), module


@pytest.mark.runners
def test_portable_workers_fail_without_the_setup_file(runner_corpus, runner_portable, tmp_path):
    """The control for the test above: the worker environment really lacks the project."""
    flags = [*_portable_flags(runner_portable), "--embedding_model=none"]
    with pytest.raises(RuntimeError, match=r"No module named '(transforms|pipelines|schemas)'"):
        _run(runner_corpus, tmp_path / "out", flags)


def _dataflow_flags(*extra: str) -> list[str]:
    return [
        "--runner=DataflowRunner",
        "--dry_run=True",
        "--no_auth",
        # Beam validates the id's shape (6 to 30 characters): "p" is refused before translation.
        "--project=test-project",
        "--region=us-central1",
        "--temp_location=gs://bucket/tmp",
        f"--setup_file={SETUP_FILE}",
        *extra,
    ]


def _require_dataflow() -> None:
    try:
        import apache_beam.runners.dataflow.dataflow_runner  # noqa: F401
    except ImportError as e:
        pytest.skip(f"DataflowRunner needs the gcp extra (pip install -e '.[gcp]'): {e}")


@pytest.mark.runners
def test_dataflow_dry_run_translates_the_whole_job(runner_corpus, tmp_path):
    _require_dataflow()
    output = tmp_path / "out"
    image = "example.com/corpus-chunker:1"
    # --no_save_main_session: Dataflow saves the main session by default (with cloudpickle);
    # the job does not need it, and the runs above prove that.
    flags = _dataflow_flags(f"--sdk_container_image={image}", "--no_save_main_session")
    result = run(["--input", runner_corpus, "--output", str(output), *flags])
    assert result.state == PipelineState.DONE
    pipeline = result.job.proto_pipeline
    stages = {t.unique_name for t in pipeline.components.transforms.values()}
    for stage in ("Read documents", "Extract text", "Chunk documents", "Embed chunks"):
        assert stage in stages
    assert {"Write tables", "Account"} <= stages
    (environment,) = pipeline.components.environments.values()
    assert image.encode() in environment.payload
    staged = {
        beam_runner_api_pb2.ArtifactStagingToRolePayload.FromString(d.role_payload).staged_name
        for d in environment.dependencies
    }
    assert "workflow.tar.gz" in staged
    assert "pickled_main_session" not in staged
    assert not output.exists()  # nothing ran


@pytest.mark.runners
def test_dataflow_dry_run_does_not_touch_the_data_paths(monkeypatch):
    """Nothing of --input, --output, --previous_output or --embedding_cache is read or written
    by a dry run: every GCS access is recorded (and refused), and the translation ends well
    within the 120 s after which an anonymous GCS read was killed."""
    _require_dataflow()
    from apache_beam.io.gcp import gcsfilesystem, gcsio

    import pipelines.chunk_corpus as job

    touched: list[tuple] = []

    def refuse(*args, **kwargs):
        touched.append(args)
        raise RuntimeError(f"a dry run touched the data paths: {args}")

    class NoDataAccess(job.FileSystems):
        match = exists = open = create = delete = staticmethod(refuse)

    monkeypatch.setattr(job, "check_patterns", refuse)
    monkeypatch.setattr(job, "prepare_output", refuse)
    monkeypatch.setattr(job, "FileSystems", NoDataAccess)
    # Any module's gs:// access goes through GCSFileSystem._gcsIO or a GcsIO of its own.
    monkeypatch.setattr(gcsfilesystem.GCSFileSystem, "_gcsIO", refuse)
    monkeypatch.setattr(gcsio.GcsIO, "__init__", refuse)
    data = ["--input", "gs://bucket/docs/*.md", "--output", "gs://bucket/out"]
    data += ["--previous_output", "gs://bucket/previous", "--embedding_cache", "gs://bucket/cache"]
    started = time.monotonic()
    result = run(data + _dataflow_flags())
    assert result.state == PipelineState.DONE
    assert time.monotonic() - started < 60
    assert touched == []
    # The translated job still has the stages that read them when it runs.
    stages = {t.unique_name for t in result.job.proto_pipeline.components.transforms.values()}
    assert {"Read previous documents", "Read previous chunks", "Cached vectors"} <= stages
    # a translation fixes its run id: it is no template to launch night after night, and
    # commits nothing (a job run through the launcher commits itself: tests/e2e/test_commit.py)
    assert "Commit the run" not in stages


def test_dask_runner_is_refused_with_the_reason(tmp_path):
    corpus = tmp_path / "a.md"
    corpus.write_text("# A\n\ntext\n")
    output = tmp_path / "out"
    with pytest.raises(ValueError, match="finish_bundle"):
        run(["--input", str(corpus), "--output", str(output), "--runner=DaskRunner"])
    assert not output.exists()
    assert os.listdir(tmp_path) == ["a.md"]
