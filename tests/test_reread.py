"""The second reading of a rebuild (transforms/ingest/reread.py): only the documents asked
for, and a reject for each one it cannot give, so that nothing is lost."""

from __future__ import annotations

import json

import apache_beam as beam

from schemas.records import RawDocument, Reject
from transforms.ingest.jsonl import document_id
from transforms.ingest.reread import GONE, _ReadAgainFn


def _read(path: str, wanted: list[tuple[str, str]], root: str, max_bytes: int = 1000):
    fn = _ReadAgainFn(max_bytes, root, [f"{root}/*"])
    docs, rejects = [], []
    for out in fn.process((path, wanted)):
        if isinstance(out, beam.pvalue.TaggedOutput):
            rejects.append(out.value)
        else:
            docs.append(out)
    return docs, rejects


def test_only_the_changed_records_of_a_jsonl_file_go_on(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"r{i}", "text": f"record {i}"}) + "\n" for i in range(3))
    )
    root = str(tmp_path)
    first = _read(str(path), [], root)[0]  # nothing asked: nothing given
    assert first == []
    everything = [
        (d.doc_id, d.source)
        for d in _ReadAgainFn(1000, root, [f"{root}/*"]).read.process(
            beam.io.fileio.ReadableFile(
                beam.io.filesystems.FileSystems.match([str(path)])[0].metadata_list[0]
            )
        )
    ]
    docs, rejects = _read(str(path), [everything[1]], root)
    assert [(d.doc_id, d.source) for d in docs] == [everything[1]]
    assert isinstance(docs[0], RawDocument) and docs[0].text == "record 1"
    assert rejects == []


def test_a_document_gone_between_the_readings_is_a_reject_that_says_so(tmp_path):
    root = str(tmp_path)
    gone = str(tmp_path / "gone.txt")
    docs, rejects = _read(gone, [(document_id(gone, root), gone)], root)
    assert docs == []
    assert [(r.source, r.stage, r.reason) for r in rejects] == [(gone, "read", GONE)]
    assert "the file is gone" in rejects[0].error

    path = tmp_path / "r.jsonl"  # a record whose line holds another record now
    path.write_text(json.dumps({"id": "other", "text": "another record"}) + "\n")
    asked = (document_id(str(path), root) + "-r9", f"{path}#L1")
    docs, rejects = _read(str(path), [asked], root)
    assert docs == [] and [(r.source, r.reason, r.doc_id) for r in rejects] == [
        (f"{path}#L1", GONE, asked[0])
    ]


def test_a_file_that_cannot_be_read_now_rejects_each_document_asked_for_once(tmp_path):
    root = str(tmp_path)
    path = tmp_path / "big.txt"
    path.write_text("x" * 2000)  # over max_bytes=1000 at the second reading
    source = str(path)
    docs, rejects = _read(source, [(document_id(source, root), source)], root)
    assert docs == []
    assert [(r.source, r.reason) for r in rejects] == [(source, "too_large")]
    assert all(isinstance(r, Reject) for r in rejects)


def test_a_record_no_longer_parsed_is_a_reject_of_the_document_asked_for(tmp_path):
    path = tmp_path / "r.jsonl"  # the record asked for is not JSON any more: no id of its own
    path.write_text("{not json\n")
    root = str(tmp_path)
    docs, rejects = _read(str(path), [("r0-id", f"{path}#L1")], root)
    assert docs == []
    assert [(r.source, r.reason, r.doc_id) for r in rejects] == [
        (f"{path}#L1", "invalid_json", "r0-id")
    ]
