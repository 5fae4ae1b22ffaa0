"""The command line around the job: --help, --version, --max_file_bytes sizes, the summary."""

import argparse
import dataclasses
import subprocess
import sys

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.chunk_corpus import SUBCOMMANDS, main, summary, version
from pipelines.options import ChunkCorpusOptions
from pipelines.sizes import human_bytes, parse_byte_size
from transforms.cost_combine import CostReportFn
from transforms.cost_report import ChangeTotals, Pricing, build_report


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("20MB", 20_000_000),
        ("20 MB", 20_000_000),
        ("20mb", 20_000_000),
        ("1.5GB", 1_500_000_000),
        ("512KiB", 524_288),
        ("2MiB", 2_097_152),
        ("20000000", 20_000_000),
        ("7B", 7),
        ("3k", 3_000),
    ],
)
def test_byte_sizes(text, expected):
    assert parse_byte_size(text, "--max_file_bytes") == expected


@pytest.mark.parametrize("junk", ["20XB", "MB", "", "twenty", "-5MB", "1e6"])
def test_a_size_that_is_not_one_names_the_flag(junk):
    with pytest.raises(ValueError, match=r"--max_file_bytes=.* is not a size"):
        parse_byte_size(junk, "--max_file_bytes")


def test_max_file_bytes_flag_reads_sizes():
    options = PipelineOptions(["--max_file_bytes=20MB"]).view_as(ChunkCorpusOptions)
    assert options.max_file_bytes == 20_000_000
    assert PipelineOptions([]).view_as(ChunkCorpusOptions).max_file_bytes == 20_000_000


def test_max_file_bytes_junk_fails_naming_the_flag():
    command = [sys.executable, "-m", "pipelines.chunk_corpus", "--input=x", "--output=y"]
    done = subprocess.run(
        [*command, "--max_file_bytes=20XB"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "--max_file_bytes='20XB' is not a size" in done.stderr.splitlines()[-1]


def test_help_marks_the_required_flags_and_every_default():
    parser = argparse.ArgumentParser()
    ChunkCorpusOptions._add_argparse_args(parser)
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        text = action.help or ""
        if action.dest in ("input", "output"):
            assert text.startswith("Required."), action.dest
        else:
            assert "default" in text.lower(), f"--{action.dest} does not show its default"
    helps = {a.dest: a.help for a in parser._actions}
    assert "(default 30 s)" in helps["llm_timeout_s"]
    assert "(default 4 requests)" in helps["llm_concurrency"]
    assert "(default 4 retries)" in helps["llm_max_retries"]
    assert "(default 1.0: every file)" in helps["estimate_sample"]
    assert "20MB" in helps["max_file_bytes"]


def test_version_and_subcommands(capsys):
    main(["--version"])
    out = capsys.readouterr().out.strip()
    assert out == version() and out.startswith("corpus-chunker ") and "apache-beam 2." in out
    assert SUBCOMMANDS["inspect"] == "commands.inspect:main"


def test_summary_lists_rejects_by_reason_removals_and_size():
    empty = build_report(CostReportFn().create_accumulator(), Pricing(), "run")
    report = dataclasses.replace(
        empty,
        documents_in=10,
        documents_chunked=5,
        documents_rejected=3,
        documents_unchanged=2,
        documents_removed=1,
        previous_output="/last-night",
        changes={
            "added": ChangeTotals(4, 30, 0, 0),
            "changed": ChangeTotals(1, 10, 9, 0),
            "unchanged": ChangeTotals(2, 0, 0, 0),
            "removed": ChangeTotals(1, 0, 44, 0),
        },
        chunks_reused=7,
        reused_tokens=300,
        chunks_cached=5,
        chunks_deduplicated=0,
        saved_usd=0.000006,
        model_read_tokens=900,
        chunks=40,
        chunks_rejected=0,
        chunks_truncated=0,
        document_tokens=1000,
        embedded_tokens=1200,
        overlap_inflation=1.2,
        cost_usd=0.000024,
        price_per_million_tokens=0.02,
        rejects={"extract:empty": 2, "read:invalid_json": 1},
        files_skipped={},
    )
    text = summary(report, "/out", 3.0, {"chunks": 2_500_000, "documents": 40_000})
    lines = text.splitlines()
    assert "  rejected at extract: empty 2" in lines
    assert "  rejected at read: invalid_json 1" in lines
    assert (
        "  since --previous_output: 4 added (+30 chunks), 1 changed (+10/-9 chunks), 2 unchanged, "
        "1 removed (-44 chunks), 0 rejected"
    ) in lines
    assert (
        "  reused: 300 tokens not embedded again (7 chunks of unchanged documents, 5 from the "
        "embedding cache, 0 identical texts), saving $0.000006"
    ) in lines
    assert "1,200 embedded (inflation 1.2), 900 read by the model" in text
    assert lines[-1] == "  output: /out (2.5 MB: chunks 2.5 MB, documents 40.0 KB)"
    assert human_bytes(17) == "17 B"
