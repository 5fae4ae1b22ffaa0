"""Progress lines of real runs: counts arrive while the job works, in-process and from the
worker processes of the multi-process DirectRunner."""

import glob
import os
import re

import pytest

from pipelines import live_progress as progress
from tests.tables import report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINE = re.compile(r"corpus-chunker progress: \S+ \| read (\d+)/(\d+) files.*chunked (\d+)")

pytestmark = pytest.mark.slow


def check_progress_lines(out: str, lines: list[str], patterns: list[str]) -> None:
    """The progress lines of the run that wrote `out` (from `patterns`): counts that moved
    while it ran, the files matched, and a final line with the report's counts."""
    files = sum(len(glob.glob(pattern)) for pattern in patterns)
    during = [LINE.match(line) for line in lines if "progress:" in line]
    assert during, lines
    r = report(out)
    # counts that moved while the job ran, not only the final metrics
    read = [int(m.group(1)) for m in during if m]
    assert any(n > 0 for n in read), lines
    assert all(int(m.group(2)) == files for m in during if m)  # files matched
    final = lines[-1]
    assert final.startswith("corpus-chunker done: ")
    assert f"read {files} files" in final
    assert f"chunked {r['documents_chunked']} ({r['chunks']} chunks)" in final


def test_progress_in_process(job_run):
    run = job_run("samples_no_model")  # samples/, every line it printed on stderr kept
    lines = [line for line in run.stderr.splitlines() if line.startswith("corpus-chunker ")]
    check_progress_lines(run.output, lines, [os.path.join(ROOT, "samples", "*", "*")])


# From the worker processes of the multi-process DirectRunner: tests/e2e/test_runners.py
# (test_progress_counts_arrive_from_the_worker_processes), on the run it compares.


def test_quiet_prints_no_progress(capsys, monkeypatch):
    import apache_beam as beam

    from pipelines.chunk_corpus import _run_with_progress

    monkeypatch.setattr(progress, "LOG_INTERVAL_S", 0.01)
    pipeline = beam.Pipeline()
    _ = pipeline | beam.Create(range(3)) | beam.Map(lambda x: x + 1)
    result = _run_with_progress(pipeline, pipeline.options, config=None, quiet=True)
    assert result.state == "DONE"
    assert capsys.readouterr().err == ""
