"""The read and extract stages in Beam pipelines: what they emit and reject, their wildcard
rules, and extraction's time limit and child process (the cores are in
tests/test_read_extract.py)."""

import json
import os

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from schemas.records import RawDocument
from transforms.ingest.extract import ExtractText
from transforms.ingest.extraction import ExtractError, extract_document
from transforms.ingest.jsonl import document_id, record_id
from transforms.ingest.matching import input_root
from transforms.ingest.read import ReadConfig, ReadDocuments

pytestmark = pytest.mark.slow


def _write(folder, name, data: bytes):
    path = folder / name
    path.write_bytes(data)
    return str(path)


def test_read_and_extract_transforms(tmp_path):
    a = _write(tmp_path, "a.md", b"# A\n\nalpha text\n")
    b = _write(tmp_path, "b.txt", b"caf\xe9 broken")
    c = _write(
        tmp_path,
        "c.jsonl",
        b'{"id": "r1", "text": "record one"}\n{oops\n{"id": "r3", "text": "half \\ud83d"}\n',
    )
    big = _write(tmp_path, "big.txt", b"x" * 5000)
    with TestPipeline() as p:
        read = p | ReadDocuments(ReadConfig((str(tmp_path / "*"), a), max_file_bytes=4000))
        extracted = read.documents | ExtractText(timeout_s=5)
        assert_that(
            extracted.documents | beam.Map(lambda d: (d.source, d.doc_type, d.text.strip())),
            equal_to([(a, "markdown", "# A\n\nalpha text"), (f"{c}#L1", "text", "record one")]),
            label="documents",
        )
        rejects = (read.rejects, extracted.rejects) | beam.Flatten()
        assert_that(
            rejects | beam.Map(lambda r: (r.source, r.stage, r.reason)),
            equal_to(
                [
                    (b, "extract", "invalid_utf8"),
                    (f"{c}#L2", "read", "invalid_json"),
                    (f"{c}#L3", "read", "invalid_unicode"),
                    (big, "read", "too_large"),
                ]
            ),
            label="rejects",
        )
        assert_that(
            read.documents | beam.Map(lambda d: d.doc_id),
            equal_to(
                [
                    document_id(a, str(tmp_path)),
                    document_id(b, str(tmp_path)),
                    record_id(c, 1, {"id": "r1"}, str(tmp_path)),
                ]
            ),
            label="ids",
        )


def test_ids_do_not_depend_on_where_the_corpus_lies(tmp_path):
    ids = []
    for place in ("checkout-1", "elsewhere/checkout-2"):
        folder = tmp_path / place / "corpus"
        folder.mkdir(parents=True)
        _write(folder, "a.md", b"# A\n\ntext\n")
        _write(folder, "r.jsonl", b'{"id": 1, "text": "one"}\n')
        with TestPipeline() as p:
            read = p | ReadDocuments(ReadConfig((str(folder / "*"),)))
            ids.append(read.documents | beam.Map(lambda d: d.doc_id))
        assert input_root([str(folder / "*")]) == str(folder)
    a = document_id(str(tmp_path / "checkout-1/corpus/a.md"), str(tmp_path / "checkout-1/corpus"))
    b = document_id(str(tmp_path / "x/corpus/a.md"), str(tmp_path / "x/corpus"))
    assert a == b


def test_gzipped_jsonl_is_read_line_by_line(tmp_path):
    import gzip

    path = tmp_path / "r.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"id": "a", "text": "one"}\n{"id": "b", "text": "two"}\n'))
    with TestPipeline() as p:
        read = p | ReadDocuments(ReadConfig((str(path),)))
        assert_that(
            read.documents | beam.Map(lambda d: (d.source.rsplit("/", 1)[1], d.text)),
            equal_to([("r.jsonl.gz#L1", "one"), ("r.jsonl.gz#L2", "two")]),
        )


# Each case: the patterns, and what they read.
WILDCARD_CASES = [
    (["**"], ["a.md", "docs/b.md"]),  # as a shell's wildcards: no .git/, no dotfiles
    (["**", ".github/*"], ["a.md", "docs/b.md", ".github/w.md"]),  # a folder named
    (["*.md", ".git/HEAD"], ["a.md", ".git/HEAD"]),  # a file named
    (["docs/.*"], ["docs/.hidden.md"]),  # a hidden name spelled in the pattern
    (["**", "docs/.*"], ["a.md", "docs/b.md", "docs/.hidden.md"]),  # ... by that pattern only
]


def test_wildcards_skip_hidden_files_unless_named(tmp_path):
    for name in ("a.md", ".git/HEAD", "docs/.hidden.md", "docs/b.md", ".github/w.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"text of {name}\n")
    with TestPipeline() as p:  # one pipeline, one read of each case
        for i, (patterns, expected) in enumerate(WILDCARD_CASES):
            config = ReadConfig(tuple(str(tmp_path / pattern) for pattern in patterns))
            read = p | f"Read case {i}" >> ReadDocuments(config)
            assert_that(
                read.documents
                | f"Names of case {i}"
                >> beam.Map(lambda d, root=str(tmp_path): d.source[len(root) + 1 :]),
                equal_to(expected),
                label=f"case {i}: {patterns}",
            )


def test_a_file_name_that_is_not_utf8_is_one_reject_not_a_failed_job(tmp_path):
    # Linux file names are bytes; Python keeps undecodable ones as lone surrogates, which no
    # UTF-8 coder can carry: the job used to fail in Beam's coder at the first such file.
    bad = os.path.join(os.fsencode(tmp_path), b"caf\xe9 notes.txt")
    with open(bad, "wb") as f:
        f.write(b"latin-1 named file\n")
    good = _write(tmp_path, "good.txt", b"a good file\n")
    shown = str(tmp_path / "caf\\xe9 notes.txt")
    with TestPipeline() as p:
        # two patterns match the badly named file: still one reject
        read = p | ReadDocuments(ReadConfig((str(tmp_path / "*"), str(tmp_path / "*.txt"))))
        assert_that(read.documents | beam.Map(lambda d: d.source), equal_to([good]), label="docs")
        assert_that(
            read.rejects | beam.Map(lambda r: (r.source, r.stage, r.reason, r.doc_id)),
            equal_to([(shown, "read", "invalid_file_name", document_id(shown, str(tmp_path)))]),
            label="rejects",
        )


@pytest.mark.parametrize("gz", [False, True])
def test_a_jsonl_record_over_the_size_limit_is_rejected_and_the_rest_read(tmp_path, gz):
    import gzip

    big = json.dumps({"id": "big", "text": "word " * 2000}).encode()
    data = b'{"id": "a", "text": "one"}\n' + big + b'\n{"id": "b", "text": "two"}\n'
    path = tmp_path / ("r.jsonl.gz" if gz else "r.jsonl")
    path.write_bytes(gzip.compress(data) if gz else data)
    with TestPipeline() as p:
        read = p | ReadDocuments(ReadConfig((str(path),), max_file_bytes=1000))
        assert_that(read.documents | beam.Map(lambda d: d.text), equal_to(["one", "two"]))
        assert_that(
            read.rejects | beam.Map(lambda r: (r.source.rsplit("/", 1)[1], r.reason, r.error)),
            equal_to(
                [
                    (
                        f"{path.name}#L2",
                        "too_large",
                        f"line 2: a record of {len(big) + 1} bytes, over --max_file_bytes=1000",
                    )
                ]
            ),
            label="rejects",
        )


def test_html_over_the_time_limit_is_rejected_not_stalled(tmp_path):
    # A page large enough that extraction cannot finish in 1 ms: the child is killed.
    page = "<html><body>" + "<div><p>para graph text here</p></div>" * 40000 + "</body></html>"
    path = _write(tmp_path, "slow.html", page.encode())
    with TestPipeline() as p:
        read = p | ReadDocuments(ReadConfig((path,)))
        extracted = read.documents | ExtractText(timeout_s=0.001)
        assert_that(
            extracted.rejects | beam.Map(lambda r: (r.source, r.reason)),
            equal_to([(path, "extract_timeout")]),
        )


def test_the_time_limit_counts_the_extraction_not_the_start_of_its_process(tmp_path):
    # A new extraction process takes seconds to start (an interpreter importing Beam and
    # trafilatura); a limit that counted its start rejected the first page, and the page after
    # every timeout, on a busy machine. Here the start is longer than the limit; two small
    # pages, the second after a timeout (a fresh process again), are extracted.
    slow = "<html><body>" + "<div><p>para graph text here</p></div>" * 40000 + "</body></html>"
    small = "<html><head><title>T</title></head><body><p>A short page of text.</p></body></html>"
    paths = [
        _write(tmp_path, "a_small.html", small.encode()),
        _write(tmp_path, "b_slow.html", slow.encode()),
        _write(tmp_path, "c_small.html", small.encode()),
    ]
    from transforms.ingest.extract import _ExtractFn

    fn = _ExtractFn(timeout_s=1.0)
    fn.setup()
    try:
        outcomes = []
        for path in paths:
            with open(path, "rb") as f:
                raw = RawDocument(source=path, doc_id=path, data=f.read())
            try:
                extract_document(raw, fn._html)
                outcomes.append("extracted")
            except ExtractError as e:
                outcomes.append(e.reason)
    finally:
        fn.teardown()
    assert outcomes == ["extracted", "extract_timeout", "extracted"]


def _child_pid(fn) -> int:
    return fn._pool_or_new().submit(os.getpid).result(timeout=60)


def test_a_healthy_extraction_child_serves_the_next_stage_instance(tmp_path, monkeypatch):
    """A torn-down stage hands its child back; the next instance of this process takes it
    (no new interpreter per DoFn instance), unless it timed out or the environment it was
    started with is no longer the parent's."""
    from transforms.ingest.extract import _ExtractFn

    first = _ExtractFn(timeout_s=30)
    first.setup()
    pid = _child_pid(first)
    first.teardown()
    second = _ExtractFn(timeout_s=30)
    second.setup()
    try:
        assert _child_pid(second) == pid  # the same child, taken from the idle ones
        small = "<html><head><title>T</title></head><body><p>Reused child.</p></body></html>"
        raw = RawDocument(source="a.html", doc_id="a", data=small.encode())
        assert "Reused child." in extract_document(raw, second._html).text
        other = _ExtractFn(timeout_s=30)  # while `second` holds it: a child of its own
        other.setup()
        other_pid = _child_pid(other)
        assert other_pid != pid
        other.teardown()  # idle now, and healthy
        # a timeout kills the child: never handed back
        slow = "<html><body>" + "<div><p>para graph text here</p></div>" * 40000 + "</body>"
        second.timeout_s = 0.001
        with pytest.raises(ExtractError):
            extract_document(
                RawDocument(source="s.html", doc_id="s", data=slow.encode()), second._html
            )
    finally:
        second.teardown()
    # `other`'s child is idle and healthy, but was started in another environment
    with monkeypatch.context() as changed:
        changed.setenv("TZ", "Pacific/Chatham")
        third = _ExtractFn(timeout_s=30)
        third.setup()
        try:
            assert _child_pid(third) not in (pid, other_pid)
            assert fn_env(third)["TZ"] == "Pacific/Chatham"
        finally:
            third.teardown()
    fourth = _ExtractFn(timeout_s=30)
    fourth.setup()
    try:
        assert _child_pid(fourth) == other_pid  # the environment it was started with again
    finally:
        fourth.teardown()


def fn_env(fn) -> dict[str, str]:
    return fn._pool_or_new().submit(_environment_of_the_child).result(timeout=60)


def test_the_extraction_child_sees_no_secret_of_the_parent(monkeypatch):
    from transforms.ingest.extract import _ExtractFn

    monkeypatch.setenv("CORPUS_CHUNKER_LLM_API_KEY", "sk-parent-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other-secret")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    fn = _ExtractFn(timeout_s=30)
    fn.setup()
    try:
        child = fn._pool_or_new().submit(_environment_of_the_child).result(timeout=60)
    finally:
        fn.teardown()
    assert "CORPUS_CHUNKER_LLM_API_KEY" not in child and "OPENAI_API_KEY" not in child
    assert not any("secret" in v for v in child.values())
    assert child["LC_ALL"] == "C.UTF-8" and child.get("PATH") == os.environ.get("PATH")


def _environment_of_the_child() -> dict[str, str]:
    import os

    return dict(os.environ)


def _sleep(seconds: float) -> str:
    import time

    time.sleep(seconds)
    return "slept"


def test_the_time_limit_is_the_childs_cpu_time(tmp_path):
    import time

    from tests.test_read_extract import _spin  # busy, by module path for the child
    from transforms.ingest.extract import _ExtractFn
    from transforms.ingest.extraction import ExtractError

    fn = _ExtractFn(timeout_s=0.5)
    fn.setup()
    try:
        # 1.5 s of waiting is not 1.5 s of extraction: a busy machine makes the child wait,
        # not work, and must not change which pages are rejected
        assert fn._in_child("HTML", _sleep, 1.5) == "slept"
        started = time.monotonic()
        with pytest.raises(ExtractError, match="CPU seconds") as e:
            fn._in_child("HTML", _spin, 30.0)
        assert e.value.reason == "extract_timeout"
        assert time.monotonic() - started < 10  # stopped at its CPU limit, not after 30 s
        assert fn._in_child("HTML", _sleep, 0.1) == "slept"  # a new child for what follows
    finally:
        fn.teardown()
