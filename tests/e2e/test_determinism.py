"""Two runs on the same input and config give the same chunk ids and texts."""

import os

import pytest

from tests.jobs import run
from tests.tables import manifest, read_table, report
from transforms.chunking import tokens

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples", "*", "*")


def _ids(out):
    t = read_table(out, "chunks").sort_by("chunk_id")
    return t.column("chunk_id").to_pylist(), t.column("text").to_pylist()


@pytest.mark.slow
def test_rerun_gives_identical_ids(job_run, tmp_path, monkeypatch):
    a, b = job_run("samples_no_model").output, str(tmp_path / "b")
    flags = ["--input", SAMPLES, "--embedding_model=none"]
    assert manifest(a)["config"]["token_engine_on_launcher"].startswith("bpe (rs-bpe ")

    # The rerun takes the other token engine, and no stage may touch rs-bpe in it.
    def no_bpe(*args, **kwargs):
        raise AssertionError("the bpe engine was used under --token_engine=tiktoken")

    monkeypatch.setattr(tokens, "get_bpe_encoder", no_bpe)
    monkeypatch.setattr(tokens, "_bpe_disagrees", no_bpe)
    run([*flags, "--output", b, "--direct_num_workers=1", "--token_engine=tiktoken"])
    monkeypatch.undo()
    assert manifest(b)["config"]["token_engine_on_launcher"] == "tiktoken"
    assert _ids(a) == _ids(b)
    assert manifest(a)["config_fingerprint"] == manifest(b)["config_fingerprint"]
    # a setting that changes the output changes every id (the Markdown samples are enough)
    c = str(tmp_path / "c")
    markdown = os.path.join(ROOT, "samples", "markdown", "*")
    run(["--input", markdown, "--embedding_model=none", "--output", c, "--chunk_size=128"])
    assert manifest(c)["config_fingerprint"] != manifest(a)["config_fingerprint"]
    assert not set(_ids(a)[0]) & set(_ids(c)[0])


def test_output_folder_of_an_earlier_run_is_refused(tmp_path):
    out = str(tmp_path / "o")
    os.makedirs(os.path.join(out, "chunks"))
    with open(os.path.join(out, "chunks", "part-00000-of-00001.parquet"), "w") as f:
        f.write("x")
    with pytest.raises(ValueError, match="--overwrite"):
        run(["--input", SAMPLES, "--output", out, "--embedding_model=none"])


def test_input_that_matches_nothing_names_the_pattern(tmp_path):
    with pytest.raises(ValueError, match="nothing-here"):
        run(["--input", str(tmp_path / "nothing-here*"), "--output", str(tmp_path / "o")])


def test_a_folder_input_reads_its_files_not_hidden_ones_nor_the_jobs_output(tmp_path, capsys):
    corpus = tmp_path / "repo"
    (corpus / ".git").mkdir(parents=True)
    (corpus / "docs").mkdir()
    (corpus / "docs" / "guide.md").write_text("# Guide\n\nHow to use the tool.\n")
    (corpus / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (corpus / ".env").write_text("SECRET=1\n")
    # Outputs inside the input folder: the next night's run must not read the last one's.
    night1, night2 = str(corpus / "out" / "night1"), str(corpus / "out" / "night2")
    run(["--input", str(corpus), "--output", night1, "--embedding_model=none"])
    printed = capsys.readouterr().out
    assert "1 documents in -> 1 chunked" in printed
    assert "skipped 2 hidden files that wildcards matched" in printed
    assert read_table(night1, "documents").column("source").to_pylist() == [
        str(corpus / "docs" / "guide.md")
    ]
    assert report(night1)["files_skipped"] == {"hidden": 2}  # kept in the cost report too
    # night 2 builds on night 1; night 3 on night 2, and night 1 is an earlier run's folder
    for output, previous in ((night2, night1), (str(corpus / "out" / "night3"), night2)):
        flags = ["--output", output, "--previous_output", previous, "--embedding_model=none"]
        run(["--input", str(corpus), *flags])
        printed = capsys.readouterr().out
        assert "1 documents in -> 0 chunked, 0 rejected, 1 unchanged" in printed
        assert "files of this job's output folders that the inputs matched" in printed
    night3 = str(corpus / "out" / "night3")
    assert manifest(night3)["earlier_runs_not_read"] == [night1, night2]
    skipped = report(night3)["files_skipped"]
    assert skipped["hidden"] == 2 and skipped["output_folder"] > 0
    readable = (corpus / "out" / "night3" / "cost_report.md").read_text()
    assert "files matched but not read: 2 hidden" in readable
