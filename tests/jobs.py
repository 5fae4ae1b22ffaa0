"""The whole job in the test process, as the e2e tests run it.

Beam 2.77's DirectRunner first offers a batch job without `RunInference` to the Prism runner,
which it tries to download; offline that fails and it falls back to the FnApiRunner, after
about 1.5 s of CPU spent translating the job for Prism. A test that names no runner runs on
the FnApiRunner directly: the same engine the DirectRunner ends on. The runner tests
(tests/e2e/test_runners.py) and the runs of tests/e2e/conftest.py keep the DirectRunner.
"""

from __future__ import annotations

from apache_beam.runners.runner import PipelineResult

from pipelines import chunk_corpus


def run(argv: list[str]) -> PipelineResult:
    """`pipelines.chunk_corpus.run(argv)`, on the FnApiRunner unless argv names a runner."""
    if not any(a == "--runner" or a.startswith("--runner=") for a in argv):
        argv = [*argv, "--runner=FnApiRunner"]
    return chunk_corpus.run(argv)
