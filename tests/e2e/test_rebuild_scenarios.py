"""More nights of rebuilds against scratch runs (transforms/boilerplate_delta.py): documents
rejected at chunking, groups emptied and refilled, a file that turns HTML and back, JSONL
records moving between files and types, the boilerplate thresholds' edges, --boilerplate=off,
a previous run without counts, and a record made invalid between two readings. Each night's
tables, the counts included, are a scratch run's. Kept apart from test_rebuild_before_removal
so that the two spread over the test workers."""

import json
import shutil

import pytest

from tests.e2e.test_rebuild_before_removal import (
    FLAGS,
    FOOTER,
    _folder,
    _prose,
    _rebuild_as_scratch,
    _tables,
    quiet_rebuild,
)
from tests.jobs import run

pytestmark = pytest.mark.slow


def _nights(tmp_path, flags: list[str], edits) -> list[str]:
    """A build, then a rebuild after each edit against the night before, each checked table
    by table against a scratch run of the same corpus; the outputs. An edit may be (edit, the
    flags of that night and of its scratch run)."""
    previous = str(tmp_path / "night0")
    run([*flags, "--output", previous])
    outputs = [previous]
    for night, edit in enumerate(edits, 1):
        night_flags = flags
        if isinstance(edit, tuple):
            edit, night_flags = edit
        edit()
        output = str(tmp_path / f"night{night}")
        run([*night_flags, "--output", output, "--previous_output", previous])
        scratch = str(tmp_path / f"scratch{night}")
        run([*night_flags, "--output", scratch])
        assert _tables(output) == _tables(scratch), f"night {night}"
        previous = output
        outputs.append(output)
    return outputs


def test_quiet_rebuild_with_boilerplate_off_reuses_every_document(tmp_path):
    corpus = _folder(tmp_path, 3, 3)
    quiet_rebuild(tmp_path, ["--input", str(corpus / "*"), "--boilerplate=off", *FLAGS], 3)


def test_quiet_rebuild_of_a_corpus_with_nothing_counted_reuses_every_document(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(3):
        (corpus / f"p{i}.html").write_text(
            f"<html><head><title>P{i}</title></head><body><p>{_prose(f'p{i}', 8)}</p></body></html>"
        )
    quiet_rebuild(tmp_path, ["--input", str(corpus / "*"), *FLAGS], 3)


TINY_CHUNK = "--chunk_timeout_s=0.000001"


def _corpus_of_groups(tmp_path):
    corpus = tmp_path / "corpus"
    (corpus / "a").mkdir(parents=True)
    (corpus / "b").mkdir()
    for i in range(4):
        (corpus / "a" / f"a{i}.txt").write_text(f"{_prose(f'a{i}', 6)}\n\n{FOOTER}\n")
        (corpus / "b" / f"b{i}.md").write_text(f"# B{i}\n\n{_prose(f'b{i}', 6)}\n\n{FOOTER}\n")
    return corpus


def test_documents_rejected_at_chunking_then_edited(tmp_path):
    corpus = _corpus_of_groups(tmp_path)
    flags = ["--input", str(corpus / "*" / "*"), *FLAGS]
    tiny = [*flags, TINY_CHUNK]
    _nights(
        tmp_path,
        tiny,
        [
            (lambda: (corpus / "a" / "a0.txt").write_text(_prose("a0 edited", 6) + "\n"), tiny),
            (lambda: (corpus / "a" / "a1.txt").write_text(_prose("a1 edited", 6) + "\n"), flags),
            # (tiny is not used again: it rejects unchanged Markdown a scratch run reads, which a
            # rebuild reuses)
            (lambda: (corpus / "b" / "b1.md").unlink(), flags),
            (lambda: (corpus / "b" / "b2.md").write_text("# B2\n\nshort\n"), flags),
            (lambda: None, flags),
        ],
    )


def test_regrouped_documents_rejected_at_chunking(tmp_path):
    corpus = _corpus_of_groups(tmp_path)
    flags = ["--input", str(corpus / "*" / "*"), *FLAGS]
    tiny = [*flags, TINY_CHUNK]
    _nights(
        tmp_path,
        flags,
        [
            # the footer leaves b0 and b1: 2 of 4, b2 and b3 regrouped and rejected at chunking
            (
                lambda: [
                    (corpus / "b" / f"b{i}.md").write_text(f"# B{i}\n\n{_prose(f'b{i}', 6)}\n")
                    for i in (0, 1)
                ],
                tiny,
            ),
            (
                lambda: (corpus / "b" / "b0.md").write_text(
                    f"# B0\n\n{_prose('b0', 6)}\n\n{FOOTER}\n"
                ),
                flags,
            ),
            (lambda: None, flags),
        ],
    )


def test_a_group_emptied_and_filled_again(tmp_path):
    corpus = _corpus_of_groups(tmp_path)
    flags = ["--input", str(corpus / "*" / "*"), *FLAGS]

    def empty():
        for i in range(4):
            (corpus / "a" / f"a{i}.txt").unlink()

    def refill():
        for i in range(3):
            (corpus / "a" / f"a{i}.txt").write_text(f"{_prose(f'a{i}', 6)}\n\n{FOOTER}\n")

    _nights(tmp_path, flags, [empty, refill, lambda: None])


def test_a_text_file_that_becomes_html_and_back(tmp_path):
    corpus = _corpus_of_groups(tmp_path)
    flags = ["--input", str(corpus / "*" / "*"), *FLAGS]
    html = (
        "<!DOCTYPE html><html><head><title>A0</title></head>"
        f"<body><p>{_prose('a0', 6)}</p><p>{FOOTER}</p></body></html>\n"
    )
    _nights(
        tmp_path,
        flags,
        [
            lambda: (corpus / "a" / "a0.txt").write_text(html),
            lambda: (corpus / "a" / "a0.txt").write_text(f"{_prose('a0', 6)}\n\n{FOOTER}\n"),
            lambda: (corpus / "a" / "a0.txt").rename(corpus / "a" / "a0.md"),
        ],
    )


def _jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_jsonl_records_moving_between_files_and_types(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    rec = [{"id": f"r{i}", "text": _prose(f"r{i}", 5) + f"\n\n{FOOTER}"} for i in range(6)]
    _jsonl(corpus / "x.jsonl", rec[:3])
    _jsonl(corpus / "y.jsonl", rec[3:])
    flags = ["--input", str(corpus / "*"), *FLAGS]
    _nights(
        tmp_path,
        flags,
        [
            # r2 moves to y (same id): x has 2 documents, y 4
            lambda: (_jsonl(corpus / "x.jsonl", rec[:2]), _jsonl(corpus / "y.jsonl", rec[2:])),
            # r3 gets a doc_type of html, r4 of markdown
            lambda: _jsonl(
                corpus / "y.jsonl",
                [
                    rec[2],
                    {**rec[3], "doc_type": "html"},
                    {**rec[4], "doc_type": "markdown"},
                    rec[5],
                ],
            ),
            # duplicates: r0 also in y (x's is first, kept); then x goes
            lambda: _jsonl(corpus / "y.jsonl", [rec[0], *rec[2:]]),
            lambda: (corpus / "x.jsonl").unlink(),
            # lines move within y
            lambda: _jsonl(corpus / "y.jsonl", list(reversed(rec))),
            # three lose the footer and the other records move: regrouped on their new lines
            lambda: _jsonl(
                corpus / "y.jsonl",
                [rec[1], rec[0], *({"id": r["id"], "text": _prose(r["id"], 5)} for r in rec[2:5])],
            ),
        ],
    )


@pytest.mark.parametrize("fraction,min_docs", [("1.0", "2"), ("0.5", "4")])
def test_min_docs_and_min_fraction_edges(tmp_path, fraction, min_docs):
    corpus = _folder(tmp_path, 4, 2)
    flags = [
        "--input",
        str(corpus / "*"),
        f"--boilerplate_min_fraction={fraction}",
        f"--boilerplate_min_docs={min_docs}",
        *FLAGS,
    ]
    footer = f"\n\n{FOOTER}\n"
    _nights(
        tmp_path,
        flags,
        [
            lambda: (corpus / "f2.txt").write_text(_prose("f2", 12) + footer),
            lambda: (corpus / "f3.txt").write_text(_prose("f3", 12) + footer),
            lambda: (corpus / "f0.txt").unlink(),
            lambda: (corpus / "f9.txt").write_text(_prose("f9", 12) + "\n"),
            lambda: [(corpus / f"f{i}.txt").write_text(_prose(f"f{i}", 12) + "\n") for i in (1, 2)],
        ],
    )


def _strip_boilerplate(output: str) -> None:
    """`output` as a run of the version before the counts left it: no `boilerplate` table."""
    folder = f"{output}/boilerplate"
    shutil.rmtree(folder)
    manifest_path = f"{output}/run_manifest.json"
    with open(manifest_path) as f:
        manifest = json.load(f)
    manifest["files"] = {
        k: v for k, v in manifest["files"].items() if not k.startswith("boilerplate")
    }
    manifest["counts"].pop("boilerplate", None)
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)


def test_a_previous_run_without_counts_then_night_after_night(tmp_path):
    corpus = _corpus_of_groups(tmp_path)
    flags = ["--input", str(corpus / "*" / "*"), *FLAGS]
    night0 = str(tmp_path / "night0")
    run([*flags, "--output", night0])
    _strip_boilerplate(night0)
    (corpus / "a" / "a0.txt").write_text(_prose("a0 edited", 6) + "\n")
    night1 = str(tmp_path / "night1")
    run([*flags, "--output", night1, "--previous_output", night0])
    scratch = str(tmp_path / "scratch1")
    run([*flags, "--output", scratch])
    assert _tables(night1) == _tables(scratch)
    (corpus / "a" / "a1.txt").write_text(_prose("a1 edited", 6) + "\n")
    _rebuild_as_scratch(flags, tmp_path, night1)


def test_a_regrouped_record_made_invalid_between_the_readings(tmp_path, monkeypatch):
    """A regrouped JSONL record whose line is no longer JSON when it is read again: its reject
    must keep the lines the counts still hold, or no later night takes them off."""
    from transforms.ingest import reread

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    path = corpus / "x.jsonl"
    rec = [{"id": f"r{i}", "text": _prose(f"r{i}", 5) + f"\n\n{FOOTER}"} for i in range(4)]
    _jsonl(path, rec)
    flags = ["--input", str(corpus / "*"), *FLAGS]
    night0 = str(tmp_path / "night0")
    run([*flags, "--output", night0])

    # r0 and r1 lose the footer: in 2 of 4, no longer boilerplate; r2 and r3 are regrouped,
    # and r2's line is made invalid between the first reading and the regrouped one
    rec[0] = {"id": "r0", "text": _prose("r0", 5)}
    rec[1] = {"id": "r1", "text": _prose("r1", 5)}
    _jsonl(path, rec)
    read_again = reread._ReadAgainFn.process_one

    def edited_in_between(self, element):
        _, ids = element
        sources = {source for _, source in ids}
        if f"{path}#L3" in sources and f"{path}#L1" not in sources:  # the regrouped records
            lines = path.read_text().splitlines(keepends=True)
            lines[2] = "{not json\n"
            path.write_text("".join(lines))
        return read_again(self, element)

    monkeypatch.setattr(reread._ReadAgainFn, "process_one", edited_in_between)
    night1 = str(tmp_path / "night1")
    run([*flags, "--output", night1, "--previous_output", night0])
    monkeypatch.setattr(reread._ReadAgainFn, "process_one", read_again)
    assert path.read_text().splitlines()[2] == "{not json"
    # the next night, nothing edited: the counts are a scratch run's
    _rebuild_as_scratch(flags, tmp_path, night1)
