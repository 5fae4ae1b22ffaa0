"""The whole job over bad inputs: one run over a folder of every kind of bad input
(tests/bad_inputs.py) and what became of each, files that change between matching and reading,
a run that chunks nothing, and a rebuild from a previous run that cannot be read."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import pipelines.chunk_corpus as job
import transforms.ingest.matching as read_module
from pipelines.chunk_corpus import NothingChunkedError, prepare_output
from tests.bad_inputs import CHUNKED, EXPECTED, MAX_FILE_BYTES, PROSE, fake_run, write_bad_corpus
from tests.jobs import run
from tests.tables import cost_report, report, rows
from transforms.chunking.tokens import TiktokenTokenizer
from transforms.ingest.extraction import MAX_WHITESPACE_RUN

pytestmark = pytest.mark.slow
CHUNK_SIZE = 192
# The job's peak RSS over the whole suite (64 files, records and links, bombs included):
# 321 MiB measured here (VmHWM); the bound leaves room for other machines, not for a file held
# whole.
PEAK_RSS_MIB = 768


def test_previous_output_is_read_by_real_path_and_survives_a_failed_rebuild(tmp_path):
    previous = tmp_path / "previous"
    files = fake_run(previous)  # its shards are not Parquet: the rebuild fails reading them
    before = {f: f.read_bytes() for f in files}
    link = tmp_path / "link"
    link.symlink_to(previous)
    corpus = tmp_path / "a.md"
    corpus.write_text("# A\n\ntext\n")
    argv = ["--input", str(corpus), "--output", str(link), "--previous_output", str(previous)]
    with pytest.raises(ValueError, match="--overwrite to rebuild it in place"):
        run([*argv, "--embedding_model=none"])
    with pytest.raises(Exception, match="Parquet"):
        run([*argv, "--overwrite", "--embedding_model=none"])
    assert {f: f.read_bytes() for f in files} == before  # byte for byte
    assert sorted(os.listdir(tmp_path)) == ["a.md", "link", "previous"]  # no staging left
    with pytest.raises(ValueError, match=r"has no run_manifest\.json: not a complete"):
        prepare_output(str(tmp_path / "new"), True, str(tmp_path / "not-a-run"))


def _outcomes(out: str, base: str) -> tuple[dict, dict]:
    documents = {os.path.relpath(d["source"], base): d for d in rows(out, "documents")}
    rejects = {os.path.relpath(r["source"], base): r for r in rows(out, "rejects")}
    return documents, rejects


# The job's own high-water mark (VmHWM), printed as it exits. Not os.wait4's ru_maxrss: the
# child starts as a copy of this test process (fork or vfork before exec) and the kernel keeps
# that copy's peak, so under xdist, in a worker holding models, it read 1,385 MiB for a job
# whose own peak was about 420. The extraction child has its own memory cap (RLIMIT_AS).
_PEAK_WRAPPER = """
import atexit, sys

def _peak():
    with open("/proc/self/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    print(f"peak_rss_kib {kib}", file=sys.stderr)

atexit.register(_peak)
from pipelines.chunk_corpus import main
main(sys.argv[1:])
"""


def _cli_peak_rss(argv: list[str]) -> tuple[int, str, float]:
    """The job's command line in a process of its own: its exit status, its stderr and its
    peak RSS in MiB."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_WRAPPER, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=600,
    )
    peaks = re.findall(r"^peak_rss_kib (\d+)$", done.stderr, re.MULTILINE)
    assert peaks, done.stderr[-3000:]
    return done.returncode, done.stderr, int(peaks[-1]) / 1024


def test_every_kind_of_bad_input_is_chunked_rejected_or_skipped_with_a_reason(tmp_path):
    """Every kind in one job, which exits 0 within PEAK_RSS_MIB; each document chunked or
    rejected with its reason, each file skipped counted, nothing lost."""
    assert len(EXPECTED) >= 40  # issue 22: at least 40 kinds of bad input (64 now)
    base = str(write_bad_corpus(tmp_path))
    out = str(tmp_path / "out")
    status, stderr, peak_mib = _cli_peak_rss(
        [
            *("--input", base, "--output", out, "--embedding_model=none", "--quiet"),
            *(f"--max_file_bytes={MAX_FILE_BYTES}", f"--chunk_size={CHUNK_SIZE}"),
            "--runner=FnApiRunner",  # as tests/jobs.py runs the e2e jobs
        ]
    )
    assert status == 0, stderr[-3000:]
    assert peak_mib < PEAK_RSS_MIB, peak_mib
    documents, rejects = _outcomes(out, base)
    r = report(out)
    chunked = {name for name, o in EXPECTED.items() if o == CHUNKED}
    rejected = {name: o for name, o in EXPECTED.items() if o.what == "rejected"}
    skipped: dict[str, int] = {}
    for o in EXPECTED.values():
        if o.what == "skipped":
            skipped[o.reason] = skipped.get(o.reason, 0) + 1

    assert set(documents) == chunked
    assert {name: (x["stage"], x["reason"]) for name, x in rejects.items()} == {
        name: (o.stage, o.reason) for name, o in rejected.items()
    }
    assert all(x["error"] for x in rejects.values())
    assert r["files_skipped"] == skipped
    assert r["documents_in"] == len(chunked) + len(rejected)
    assert r["documents_in"] == (
        r["documents_chunked"] + r["documents_unchanged"] + r["documents_rejected"]
    )
    assert r["balanced"] and r["documents_chunked"] == len(chunked)

    # every chunked document has chunks within the limit, counted again here
    tok = TiktokenTokenizer("cl100k_base", "tiktoken")
    chunks = rows(out, "chunks")
    by_doc = {c["doc_id"] for c in chunks}
    assert {d["doc_id"] for d in documents.values()} <= by_doc
    for c in chunks:
        assert tok.count(c["text"]) <= CHUNK_SIZE and c["embed_tokens"] <= CHUNK_SIZE
        assert documents_text(documents, c)[c["start_char"] : c["end_char"]] == c["text"]
    # no whitespace run longer than the cut reaches a tokenizer, however extraction made it
    for d in documents.values():
        assert not re.search(rf"[^\S\n]{{{MAX_WHITESPACE_RUN + 1}}}", d["text"]), d["source"]
    # the link that leads out of the input folder was not read; nothing was written outside out/
    assert not any("secret" in c["text"] for c in chunks)
    assert sorted(os.listdir(tmp_path)) == ["in", "out", "outside_secret.txt"]


def documents_text(documents: dict, chunk: dict) -> str:
    (doc,) = [d for d in documents.values() if d["doc_id"] == chunk["doc_id"]]
    return doc["text"]


def test_files_that_change_or_vanish_between_matching_and_reading(tmp_path, monkeypatch):
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "stays.txt").write_text(PROSE)
    (corpus / "changes.txt").write_text(PROSE)
    (corpus / "vanishes.txt").write_text(PROSE)
    (corpus / "vanishes.jsonl").write_text('{"id": 1, "text": "a record"}\n')
    original = read_module.MatchFn.process

    def match_then_change(self, pattern):
        # The read stage's own match: whatever else lists the inputs (the up-front check, the
        # progress line's file count) comes before the job reads.
        found = list(original(self, pattern))
        (corpus / "changes.txt").write_text(PROSE + " and a new sentence.")
        for name in ("vanishes.txt", "vanishes.jsonl"):
            (corpus / name).unlink(missing_ok=True)
        yield from found

    monkeypatch.setattr(read_module.MatchFn, "process", match_then_change)
    out = str(tmp_path / "out")
    run(["--input", str(corpus), "--output", out, "--embedding_model=none"])
    documents, rejects = _outcomes(out, str(corpus))
    assert set(documents) == {"stays.txt"}
    assert {name: (x["stage"], x["reason"]) for name, x in rejects.items()} == {
        "changes.txt": ("read", "changed_since_match"),
        "vanishes.txt": ("read", "disappeared"),
        "vanishes.jsonl": ("read", "disappeared"),
    }
    assert report(out)["balanced"]


def test_a_run_that_chunks_nothing_says_so_and_fails(tmp_path, monkeypatch, capsys):
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "empty.txt").write_text("")
    (corpus / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    out = str(tmp_path / "out")
    argv = ["corpus-chunker", "--input", str(corpus), "--output", out, "--embedding_model=none"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_:
        job.main()
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert "nothing was chunked: all 2 documents were rejected" in err
    assert report(out)["documents_rejected"] == 2  # the run is complete: its tables say why
    with pytest.raises(NothingChunkedError, match="nothing was chunked"):
        job.check_something_chunked(cost_report(out), out)
