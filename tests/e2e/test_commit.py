"""The job commits its own run (transforms/commit.py, issue 23 item 1): a job submitted and
not waited for, as a Dataflow template or an Airflow operator runs it, leaves --output holding
the new run, as the launcher's `run()` does."""

from __future__ import annotations

import os
import shutil

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.chunk_corpus import build_pipeline
from pipelines.options import config_from_options
from runs.run_folder import RunFolder
from runs.staging import staging_folder
from tests.tables import manifest, rows
from transforms.commit import Commit

pytestmark = pytest.mark.slow


def test_a_job_run_without_its_launcher_commits_itself(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Alpha\n\nThe first document, committed by the job. " * 5)
    out = str(tmp_path / "out")
    options = PipelineOptions(
        [
            *("--input", str(corpus / "*"), "--output", out, "--embedding_model=none"),
            *("--runner=FnApiRunner", "--no_pipeline_type_check"),
        ]
    )
    config = config_from_options(options)
    staged = staging_folder(out, config.run_id)
    p = beam.Pipeline(options=options)
    build_pipeline(p, config, write_to=staged, commit=Commit(out, staged, keep_runs=2))
    p.run()  # no wait_until_finish, no swap by the caller
    assert not os.path.exists(staged)
    assert manifest(out)["run_id"] == config.run_id
    assert "committed by the job" in " ".join(r["text"] for r in rows(out, "chunks"))
    # the step retried after it went through: nothing moves
    before = sorted(os.listdir(tmp_path))
    shards = rows(out, "chunks")
    assert RunFolder(out).commit(staged, 2, None) == []
    assert sorted(os.listdir(tmp_path)) == before
    assert manifest(out)["run_id"] == config.run_id
    # ... even where a retried report write recreated the staged folder with reports only:
    # it is deleted, not swapped in over the committed run
    os.makedirs(staged)
    for name in ("run_manifest.json", "cost_report.json", "cost_report.md"):
        shutil.copy(os.path.join(out, name), os.path.join(staged, name))
    assert RunFolder(out).commit(staged, 2, None) == []
    assert not os.path.exists(staged)
    assert rows(out, "chunks") == shards


def test_the_commit_is_a_stage_of_its_own_after_every_write(tmp_path):
    """A Reshuffle between the manifest's write and the commit: a retried commit does not
    write the reports and manifest again (fused with it, it would)."""
    from apache_beam.runners.portability.fn_api_runner.fn_runner import FnApiRunner

    out = str(tmp_path / "out")
    options = PipelineOptions(["--input", str(tmp_path / "*.md"), "--output", out])
    config = config_from_options(options)
    p = beam.Pipeline(options=options)
    build_pipeline(p, config, write_to=out + ".staged", commit=Commit(out, out + ".staged", 2))
    _, stages = FnApiRunner().create_stages(p.to_runner_api())
    names = [[t.unique_name for t in s.transforms] for s in stages]
    (commit,) = [n for n in names if any("Commit the run/Commit" in t for t in n)]
    assert not any("Write manifest" in t or "Write cost report" in t for t in commit), commit
