"""Nothing a corpus holds, and no typo, breaks a run or loses data (issue 14, the input side).

The bad-input suite runs the whole job once over a folder of every kind of bad input
(tests/bad_inputs.py) and checks what became of each; the other tests pin one failure each.
"""

from __future__ import annotations

import gzip
import os
import re
import sys
import time
import tracemalloc

import apache_beam as beam
import pytest
from apache_beam.io import fileio
from apache_beam.io.filesystem import FileMetadata
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

import pipelines.chunk_corpus as job
from pipelines.chunk_corpus import prepare_output
from pipelines.flags import unknown_flag_error
from runs.staging import swap_in
from schemas.records import Document, RawDocument, Reject, content_hash
from tests.bad_inputs import MAX_FILE_BYTES, PROSE, fake_run, jsonl_stream_bomb
from transforms.boilerplate import BoilerplateConfig, RemoveBoilerplate
from transforms.chunking.tokens import TiktokenTokenizer
from transforms.ingest.extraction import (
    MAX_WHITESPACE_RUN,
    ExtractError,
    extract_document,
    extract_html,
    first_heading,
)
from transforms.ingest.html import HtmlTooDeep, html_to_markdown
from transforms.ingest.matching import check_patterns
from transforms.ingest.read import _ReadFileFn
from transforms.token_budget import TokenBudget

# --- Typo'd flags ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "suggestion"),
    [
        ("--chunk-size=100", "--chunk_size"),
        ("--chunksize", "--chunk_size"),
        ("--embeding_model=none", "--embedding_model"),
        ("--overwirte", "--overwrite"),
        ("--estimat", "--estimate"),
        ("--job_endpiont=localhost:8099", "--job_endpoint"),  # a Beam flag, misspelt
    ],
)
def test_an_unknown_flag_fails_before_anything_runs(
    tmp_path, monkeypatch, capsys, flag, suggestion
):
    out = tmp_path / "out"
    # an input that matches nothing: the flag error must come first, before any file is looked at
    argv = ["corpus-chunker", "--input", str(tmp_path / "none*"), "--output", str(out), flag]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_:
        job.main()
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert flag.split("=")[0] in err
    assert f"did you mean {suggestion}?" in err
    assert not out.exists()


def test_beam_flags_and_project_flags_are_known():
    argv = ["--input", "a", "--output", "b", "--chunk_size", "100", "--overwrite"]
    argv += ["--runner=PortableRunner", "--job_endpoint=localhost:8099"]
    argv += ["--environment_type=LOOPBACK", "--direct_num_workers=2", "--project=my-project"]
    argv += ["--no_auth", "--dry_run=True", "--setup_file", "./setup.py", "--parallelism=4"]
    argv += ["--flink_master=localhost:8081", "--no_save_main_session", "--experiments=x"]
    assert unknown_flag_error(argv) is None
    assert "unexpected argument 'docs/'" in unknown_flag_error([*argv, "docs/"])
    assert "invalid int value" in unknown_flag_error(["--chunk_size=abc"])


# --- Reading: special files, links, vanishing files, bombs, JSONL ----------------------------


def _read(path: str, limit: int = MAX_FILE_BYTES, matched: FileMetadata | None = None) -> list:
    """What the read stage makes of one file: RawDocuments and Rejects."""
    if matched is None:
        st = os.stat(path)
        matched = FileMetadata(path, st.st_size, st.st_mtime)
    out = []
    for item in _ReadFileFn(limit, os.path.dirname(path)).process(fileio.ReadableFile(matched)):
        out.append(item.value if isinstance(item, beam.pvalue.TaggedOutput) else item)
    return out


def test_opening_a_fifo_does_not_wait_for_a_writer(tmp_path):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    (got,) = _read(str(fifo), matched=FileMetadata(str(fifo), 0, os.stat(fifo).st_mtime))
    assert (got.stage, got.reason) == ("read", "not_a_regular_file")
    assert "fifo" in got.error


def test_a_file_that_cannot_be_opened_is_rejected_with_the_reason(tmp_path, monkeypatch):
    # The tests run as root, whom chmod 000 does not stop: the open is refused for it instead.
    path = tmp_path / "secret.txt"
    path.write_text("text")
    real_open = os.open

    def refuse(name, *args, **kwargs):
        if os.fspath(name) == str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(name, *args, **kwargs)

    monkeypatch.setattr("transforms.ingest.files.os.open", refuse)
    (got,) = _read(str(path))
    assert (got.stage, got.reason) == ("read", "permission_denied")


def test_a_file_that_changes_or_vanishes_after_matching_is_rejected(tmp_path):
    changed, gone = tmp_path / "changed.txt", tmp_path / "gone.jsonl"
    changed.write_text("first version\n")
    gone.write_text('{"id": 1, "text": "x"}\n')
    matched_changed = FileMetadata(str(changed), 14, os.stat(changed).st_mtime)
    matched_gone = FileMetadata(str(gone), 23, os.stat(gone).st_mtime)
    changed.write_text("the second, longer version\n")
    gone.unlink()
    assert [r.reason for r in _read(str(changed), matched=matched_changed)] == [
        "changed_since_match"
    ]
    assert [r.reason for r in _read(str(gone), matched=matched_gone)] == ["disappeared"]


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst", ".deflate"])
def test_a_decompression_bomb_stops_at_the_limit(tmp_path, suffix):
    import bz2
    import lzma
    import zlib

    import zstandard

    zeros = b"\x00" * 60_000_000
    compress = {
        ".gz": gzip.compress,
        ".bz2": bz2.compress,
        ".xz": lzma.compress,
        ".zst": zstandard.ZstdCompressor().compress,
        ".deflate": zlib.compress,
    }[suffix]
    bomb = tmp_path / f"zeros.txt{suffix}"
    bomb.write_bytes(compress(zeros))
    del zeros
    tracemalloc.start()
    try:
        (got,) = _read(str(bomb), limit=1000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (got.stage, got.reason) == ("read", "too_large")
    # what is left is the decompressor's own state (xz's 8 MiB dictionary), not the output
    assert peak < 16_000_000, f"{peak:,} bytes allocated to read 1,000 of a {suffix} bomb"


def test_a_compressed_jsonl_stream_stops_at_its_decompressed_budget(tmp_path):
    # --max_file_bytes holds per line: bz2 streams joined into one 10 GB line were read on
    # and on (still at it after 120 s), the line skipped as it went.
    path = tmp_path / "bomb.jsonl.bz2"
    path.write_bytes(jsonl_stream_bomb())
    started = time.monotonic()
    got = _read(str(path))
    assert time.monotonic() - started < 30
    assert [type(g).__name__ for g in got] == ["RawDocument", "Reject"]
    assert got[0].text == "A good record before the bomb."
    assert (got[1].source, got[1].stage, got[1].reason) == (str(path), "read", "too_large")
    assert "decompressed past" in got[1].error


def test_compressed_files_within_the_limit_are_read_whole(tmp_path):
    text = (PROSE * 200).encode()
    for suffix, data in ((".gz", gzip.compress(text + text)), (".txt", text)):
        path = tmp_path / f"f{suffix}"
        path.write_bytes(data)
        (doc,) = _read(str(path))
        assert isinstance(doc, RawDocument)
        assert doc.data == (text + text if suffix == ".gz" else text)


def test_one_deeply_nested_jsonl_line_is_one_reject_and_the_rest_is_read(tmp_path):
    path = tmp_path / "records.jsonl"
    lines = [
        '{"id": 1, "text": "first"}',
        '{"id": 2, "text": "x", "n": ' + "[" * 50_000 + "]" * 50_000 + "}",
        '{"id": 3, "text": "third"}',
        '{"id": 1, "text": "first again"}',
    ]
    path.write_text("\n".join(lines) + "\n")
    got = _read(str(path))
    assert [g.text if isinstance(g, RawDocument) else g.reason for g in got] == [
        "first",
        "too_deep",
        "third",
        "duplicate_id",
    ]
    assert got[1].source.endswith("#L2")


def test_a_file_that_becomes_a_symlink_out_after_matching_is_not_read_through_it(tmp_path):
    # Regular when matched (so no skip), a symlink out of the input folder when opened, to a
    # file of the same size and time: read through the link before (no O_NOFOLLOW).
    folder = tmp_path / "in"
    folder.mkdir()
    path, outside, inside = folder / "a.txt", tmp_path / "secret.txt", folder / "b.txt"
    path.write_text("an ordinary file\n")
    outside.write_text("a secret file!!!\n")
    inside.write_text("another in-file!\n")
    st = os.stat(path)
    matched = FileMetadata(str(path), st.st_size, st.st_mtime)
    for target in (outside, inside):
        os.utime(target, (st.st_atime, st.st_mtime))
    path.unlink()
    path.symlink_to(outside)
    fn = _ReadFileFn(MAX_FILE_BYTES, str(folder), [f"{folder}/*"])
    (got,) = [getattr(x, "value", x) for x in fn.process(fileio.ReadableFile(matched))]
    assert isinstance(got, Reject), got
    assert (got.stage, got.reason) == ("read", "outside_input_root")
    path.unlink()
    path.symlink_to(inside)  # a link that stays inside the input folder is read, as matched
    (got,) = [getattr(x, "value", x) for x in fn.process(fileio.ReadableFile(matched))]
    assert got.data == b"another in-file!\n"


def test_a_dangling_symlink_given_as_input_is_named(tmp_path):
    os.symlink(tmp_path / "missing.txt", tmp_path / "link.txt")
    with pytest.raises(ValueError, match="dangling symlink"):
        check_patterns([str(tmp_path / "link.txt")])


# --- Extraction: deep HTML, headings, whitespace runs ---------------------------------------


def _deep(levels: int) -> str:
    body = (
        "<div>" * levels + "<p>Text deep inside the page, worth extracting.</p>" + "</div>" * levels
    )
    return f"<html><body>{body}</body></html>"


def test_html_nested_300_deep_is_extracted():
    assert "Text deep inside the page" in html_to_markdown(_deep(300)).text


def test_html_nested_past_the_parsers_limit_is_too_deep_naming_it():
    with pytest.raises(HtmlTooDeep, match="2048"):
        html_to_markdown(_deep(100_000))
    raw = RawDocument(source="deep.html", doc_id="d", data=_deep(100_000).encode())
    with pytest.raises(ExtractError) as e:
        extract_document(raw, extract_html)
    assert e.value.reason == "too_deep"


def test_the_heading_pattern_is_linear_on_a_long_line():
    # Quadratic before: 1.9 s for 20,000 spaces, so minutes for these 200,000.
    line = "# a" + " " * 200_000 + "x"
    started = time.perf_counter()
    assert first_heading(line[:20_000] + "\n") == "a"
    from transforms.ingest.extraction import _ATX_HEADING

    assert _ATX_HEADING.search(line).group(1).rstrip() == "a" + " " * 200_000 + "x"
    assert time.perf_counter() - started < 1.0
    assert first_heading("## Title ##\n") == "Title"
    assert first_heading("#   \ntext") is None


def test_a_heading_s_closing_sequence_is_cut_only_after_a_space():
    # CommonMark: a closing run of "#" follows a space; "# C#" was titled "C" before
    assert first_heading("# C#\n") == "C#"
    assert first_heading("# C# #\n") == "C#"
    assert first_heading("## F# and C# ##  \n") == "F# and C#"
    assert first_heading("# Title ##\n") == "Title"
    assert first_heading("# ##\ntext") is None


def test_a_million_spaces_are_cut_and_tiktoken_counts_the_text(cl100k):
    raw = RawDocument(source="spaces.txt", doc_id="s", data=b" " * 1_000_000 + b"x\n")
    doc = extract_document(raw, extract_html)
    assert doc.text == " " * MAX_WHITESPACE_RUN + "x\n"
    assert cl100k.count(doc.text) > 0  # the whole run panicked inside tiktoken


def test_a_whitespace_run_that_only_extraction_makes_is_cut():
    # `&nbsp;` entities are no whitespace until trafilatura decodes them: the cut ran on the
    # page before extraction and left the run whole (a million of them panicked tiktoken).
    page = "<html><body><article><h1>Spaces</h1><p>" + PROSE + "</p><pre>"
    page += "&nbsp;" * 5_000 + "x</pre></article></body></html>"
    raw = RawDocument(source="nbsp.html", doc_id="n", data=page.encode())
    doc = extract_document(raw, extract_html)
    runs = re.findall(r"[^\S\n]+", doc.text)
    assert "\u00a0" * MAX_WHITESPACE_RUN in doc.text  # cut, not dropped
    assert max(map(len, runs)) == MAX_WHITESPACE_RUN


def test_every_tokenizer_call_turns_a_panic_into_a_tokenizer_failure():
    from transforms.chunking.tokens import TokenizerFailed

    text = "\u00a0" * 1_000_000 + "x"
    for engine in ("tiktoken", "auto"):
        tok = TiktokenTokenizer("cl100k_base", engine)
        with pytest.raises(TokenizerFailed):
            tok.count(text)  # a PanicException, a BaseException, before
        with pytest.raises(TokenizerFailed):
            tok.encode(text)
    with pytest.raises(TokenizerFailed):
        TiktokenTokenizer("cl100k_base", "tiktoken").tokenize(text)
    assert tok.count("and it still counts") == 4
    with pytest.raises(TypeError):  # a caller's own error stays what it is
        tok.count(12345)


def test_a_pricing_count_that_panics_is_a_reject_not_a_failed_job():
    # --tokenizer o200k_base (chunked with rs-bpe, which copes) priced in cl100k_base by
    # tiktoken, which panicked on the whole document and ended the job.
    from transforms.chunking.routing import ChunkingConfig, _ChunkFn

    text = "# Title\n\n" + PROSE + " " * 1_000_000 + "x\n"
    doc = Document("d", "spaces.md", "markdown", text, content_hash(text))
    fn = _ChunkFn(
        ChunkingConfig(budget=TokenBudget(chunk_size=256, tokenizer="o200k_base")), "cl100k_base"
    )
    fn.setup()
    (out,) = list(fn.process(doc))
    reject = out.value
    assert (reject.stage, reject.reason) == ("chunk", "tokenizer_failed")
    assert "panicked" in reject.error


def test_boilerplate_removal_never_counts_a_whole_document():
    # Three documents share a licence line; one also holds a million spaces before a word,
    # on which tiktoken's whole-document count panicked (a BaseException) and ended the job.
    licence = "Copyright 2024 Example Corp. All rights reserved.\n"
    texts = [licence + f"Body {i} with its own words.\n" for i in range(3)]
    texts[1] += " " * 1_000_000 + "x\n"
    docs = [
        Document(f"d{i}", f"folder/{i}.txt", "text", t, content_hash(t))
        for i, t in enumerate(texts)
    ]
    tok = TiktokenTokenizer("cl100k_base", "tiktoken")
    with TestPipeline() as p:
        out = (
            p
            | beam.Create(docs)
            | RemoveBoilerplate(BoilerplateConfig(min_docs=3))
            | beam.Map(
                lambda d: (d.doc_id, d.text.startswith("Copyright"), d.boilerplate_tokens_removed)
            )
        )
        assert_that(out, equal_to([(f"d{i}", False, tok.count(licence)) for i in range(3)]))


# --- Output safety ---------------------------------------------------------------------------


def test_a_wildcard_in_output_is_refused_and_nothing_deleted(tmp_path):
    victims = [fake_run(tmp_path / "victims" / name) for name in ("one", "two")]
    for output in (f"{tmp_path}/victims/*", f"{tmp_path}/victims/o[n]e"):
        with pytest.raises(ValueError, match="wildcard"):
            prepare_output(output, overwrite=True)
    assert all(f.exists() for files in victims for f in files)


def test_overwrite_needs_a_manifest_and_replaces_only_the_runs_own_files(tmp_path):
    home = tmp_path / "home"
    (home / "documents").mkdir(parents=True)
    thesis = home / "documents" / "thesis.docx"
    thesis.write_text("years of work")
    with pytest.raises(ValueError, match="no run of this job writes"):
        prepare_output(str(home), overwrite=True)
    assert thesis.exists()

    half = tmp_path / "half"  # shards of a run that never finished: no manifest
    (half / "chunks").mkdir(parents=True)
    (half / "chunks" / "part-00000-of-00002.parquet").write_text("x")
    with pytest.raises(ValueError, match=r"no valid run_manifest\.json"):
        prepare_output(str(half), overwrite=True)
    assert (half / "chunks" / "part-00000-of-00002.parquet").exists()

    run_folder = tmp_path / "run"
    files = fake_run(run_folder)
    notes = run_folder / "notes.txt"
    notes.write_text("kept")
    (run_folder / "chunks" / "beam-temp-x").mkdir()  # a failed run's: replaced with the rest
    with pytest.raises(ValueError, match="--overwrite"):
        prepare_output(str(run_folder), overwrite=False)
    prepare_output(str(run_folder), overwrite=True)
    assert all(f.exists() for f in files)  # checking deletes nothing: the swap replaces them

    staged = tmp_path / ".run.staging-1"
    new_files = fake_run(staged)
    (staged / "chunks" / "part-00000-of-00001.parquet").write_text("new")
    swap_in(str(staged), str(run_folder))
    assert (run_folder / "chunks" / "part-00000-of-00001.parquet").read_text() == "new"
    assert notes.read_text() == "kept"
    assert not (run_folder / "chunks" / "beam-temp-x").exists()
    assert sorted(os.listdir(tmp_path)) == ["half", "home", "run"]
    assert len(new_files) == len(files)


# --- Whole jobs ------------------------------------------------------------------------------


def test_reject_records_name_the_stage(tmp_path):
    # the read stage's rejects keep their source, so a reader can find the file
    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * 101)
    (got,) = _read(str(path), limit=100)
    assert isinstance(got, Reject)
    assert (got.source, got.stage, got.reason) == (str(path), "read", "too_large")
