"""The whole job in the test process, as the e2e tests run it.

A test that names no runner runs on the FnApiRunner, the engine the job's DirectRunner runs
on (pipelines/local_runner.py). The runner tests (tests/e2e/test_runners.py) and the runs of
tests/e2e/conftest.py keep the DirectRunner.

Beam's construction-time type check (`--pipeline_type_check`, on by default) costs about
1.1 s of CPU per run of this job: each of its ~400 checks re-parses the pipeline options.
It depends on the graph only, not on the data, so the runs here skip it
(`--no_pipeline_type_check`) unless argv says otherwise, as do tests/e2e/test_crash.py's
jobs in processes of their own. The other runs keep it: the demo run and the others of
tests/e2e/conftest.py, the runner tests, the jobs of the interrupt, memory and bad-input
tests and of the benchmarks, and tests/test_cli.py.
"""

from __future__ import annotations

from apache_beam.runners.runner import PipelineResult

from pipelines import chunk_corpus

TYPE_CHECK_FLAGS = ("--pipeline_type_check", "--no_pipeline_type_check")


def run(argv: list[str]) -> PipelineResult:
    """`pipelines.chunk_corpus.run(argv)`, on the FnApiRunner unless argv names a runner, and
    without Beam's construction-time type check unless argv asks for it."""
    if not any(a == "--runner" or a.startswith("--runner=") for a in argv):
        argv = [*argv, "--runner=FnApiRunner"]
    if not any(a in TYPE_CHECK_FLAGS for a in argv):
        argv = [*argv, "--no_pipeline_type_check"]
    return chunk_corpus.run(argv)
