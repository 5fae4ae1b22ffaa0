"""The DirectRunner runs the job on the FnApiRunner without offering it to Prism first.

Beam 2.77's DirectRunner hands a job Prism can run (one without `RunInference`) to the Prism
runner, which downloads its binary from GitHub at run time; offline it fails and falls back,
leaving temporary folders behind. These tests run such a job (`--embedding_model=none`) on
the DirectRunner and assert that Prism is never asked and that nothing is left in the
temporary folder.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability import prism_runner

from pipelines import local_runner
from tests import jobs
from tests.tables import read_table


@pytest.mark.parametrize(
    ("argv", "direct"),
    [
        ([], True),
        (["--runner=DirectRunner"], True),
        (["--runner=apache_beam.runners.direct.direct_runner.SwitchingDirectRunner"], True),
        (["--runner=FnApiRunner"], False),
        (["--runner=PortableRunner"], False),
        (["--runner=DataflowRunner"], False),
    ],
)
def test_which_runs_go_to_the_fn_api_runner(argv, direct):
    assert local_runner.runs_direct(PipelineOptions(argv)) is direct


@pytest.mark.parametrize(("argv", "direct"), [([], True), (["--runner=FnApiRunner"], False)])
def test_the_pipeline_runs_on_the_runner_named(argv, direct):
    runner = local_runner.pipeline(PipelineOptions(argv)).runner
    assert isinstance(runner, local_runner.FnApiDirectRunner) is direct


def test_a_job_without_a_model_never_asks_prism_and_leaves_no_temporary_folder(
    tmp_path, monkeypatch
):
    asked = []

    def refuse(self, pipeline, options):
        asked.append(options)
        raise RuntimeError("Prism was asked to run the job")

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", refuse)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Retries\n\nA task that fails is retried.\n")
    (corpus / "b.txt").write_text("Tasks are copied from the bucket to the index.\n")
    out = tmp_path / "out"
    jobs.run(
        [
            "--input",
            f"{corpus}/*",
            "--output",
            str(out),
            "--runner=DirectRunner",
            "--embedding_model=none",
            "--quiet",
        ]
    )
    assert asked == []
    assert sorted(read_table(str(out), "chunks").column("source").to_pylist()) == [
        str(corpus / "a.md"),
        str(corpus / "b.txt"),
    ]
    assert sorted(p.name for p in Path(temp).iterdir()) == []
