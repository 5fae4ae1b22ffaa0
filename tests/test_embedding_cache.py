"""The --embedding_cache holds data, not trust (issue 22, N3): every cached vector is checked
(this model's key, the model's dimension, finite numbers); whatever else a cache file or a
previous run holds is skipped, counted and embedded again, and a file that is not a cache file
is a warning, never a failed job."""

from __future__ import annotations

import logging
import math

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from transforms.embedding.embedding_cache import CACHE_SCHEMA, CachedVectors
from transforms.embedding.models import text_key

MODEL = "model|onnx|sha256:abc"
DIM = 4


def _key(i: int) -> str:
    return text_key(f"text {i}")


def _write(path, rows: list[dict], schema: pa.Schema = CACHE_SCHEMA) -> None:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def _row(i: int, embedding: list, model: str = MODEL, model_tokens: int | None = 3) -> dict:
    return {
        "model": model,
        "text_sha256": _key(i),
        "embedding": embedding,
        "model_tokens": model_tokens,
    }


def _check(folder, keys: list[str], rows=None, dimension: int | None = DIM) -> None:
    """Run CachedVectors; the text keys it gives are `keys`."""
    with TestPipeline() as p:
        kw = {} if dimension is None else {"dimension": dimension}
        got = p | CachedVectors(MODEL, rows and (p | "Rows" >> beam.Create(rows)), folder, **kw)
        assert_that(got | beam.Map(lambda e: e[0]), equal_to(keys))


def test_a_cache_file_that_is_not_parquet_is_skipped_with_a_warning(tmp_path, caplog):
    (tmp_path / "zz.parquet").write_bytes(b"not a parquet file at all")
    _write(tmp_path / "good.parquet", [_row(1, [0.5, 0.5, 0.5, 0.5])])
    with caplog.at_level(logging.WARNING):
        # failed the job before: "Parquet magic bytes not found"
        _check(str(tmp_path), [_key(1)], dimension=None)
    assert "zz.parquet" in caplog.text


def test_a_cache_file_with_other_columns_is_skipped(tmp_path):
    other = pa.schema([("text", pa.string()), ("vector", pa.list_(pa.float32()))])
    _write(tmp_path / "other.parquet", [{"text": "t", "vector": [1.0]}], other)
    _check(str(tmp_path), [])  # KeyError: 'model' before


def test_only_finite_vectors_of_this_models_key_and_dimension_are_used(tmp_path):
    rows = [
        _row(1, [0.5, 0.5, 0.5, 0.5]),  # the one usable vector
        _row(2, [0.1, 0.2, 0.3]),  # the wrong dimension: failed the job in "Write tables"
        _row(3, [math.nan, 0.0, 0.0, 0.0]),  # NaN: written, then refused by PostgreSQL
        _row(4, [math.inf, 0.0, 0.0, 0.0]),
        _row(5, [0.5, 0.5, 0.5, 0.5], model="another|model"),
        _row(6, [0.5, 0.5, 0.5, 0.5], model_tokens=-1),
        {**_row(7, [0.5, 0.5, 0.5, 0.5]), "text_sha256": "not a key"},
    ]
    _write(tmp_path / "mixed.parquet", rows)
    _check(str(tmp_path), [_key(1)])


def test_a_previous_runs_vectors_are_checked_too(tmp_path):
    rows = [
        {"text": "a", "context": None, "embedding": [0.5] * DIM, "model_tokens": 2},
        {"text": "b", "context": None, "embedding": [0.5] * 3, "model_tokens": 2},
        {"text": "c", "context": None, "embedding": [math.nan] * DIM, "model_tokens": 2},
    ]
    _check(None, [text_key("a")], rows)


def test_checked_vectors_keep_their_values():
    from transforms.embedding.embedding_cache import checked_vector

    assert checked_vector([1, 0.5], 2, 2).embedding == (1.0, 0.5)
    assert checked_vector([1, 0.5], None, None).model_tokens is None
    for bad in ([], [None, 1.0], ["x", 1.0], [[1.0], 1.0], "12", None):
        assert checked_vector(bad, 1, None) is None
    assert checked_vector([1.0, 2.0], True, None) is None


# --- compaction (commands/compact_cache.py) ---------------------------------------------------


def _compact(folder, max_age_days: float = 30) -> str:
    """Runs `corpus-chunker compact-cache` in this process; what it printed."""
    import contextlib
    import io

    from commands.compact_cache import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert (
            main(
                [
                    "--embedding_cache",
                    str(folder),
                    "--max_age_days",
                    str(max_age_days),
                    "--runner=FnApiRunner",
                ]
            )
            == 0
        )
    return out.getvalue()


def _aged(path, days: float) -> None:
    import os
    import time

    when = time.time() - days * 86_400
    os.utime(path, (when, when))


def test_compaction_keeps_one_entry_per_text_and_drops_what_no_run_used_lately(tmp_path):
    from transforms.embedding.embedding_cache import USE_SCHEMA

    old, fresh = [0.5, 0.5, 0.5, 0.5], [0.25, 0.5, 0.75, 1.0]  # exact in float32
    # a run 100 days ago made texts 1, 2, 3; one 10 days ago made 3 again and 4
    _write(tmp_path / "embeddings-run1-00000-of-00001.parquet", [_row(i, old) for i in (1, 2, 3)])
    _write(tmp_path / "embeddings-run2-00000-of-00001.parquet", [_row(i, fresh) for i in (3, 4)])
    # last night's run used the cached vector of text 2 (and of 9, whose vector is gone)
    uses = [{"model": MODEL, "text_sha256": _key(i)} for i in (2, 9)]
    _write(tmp_path / "used-run3-00000-of-00001.parquet", uses, USE_SCHEMA)
    _aged(tmp_path / "embeddings-run1-00000-of-00001.parquet", 100)
    _aged(tmp_path / "embeddings-run2-00000-of-00001.parquet", 10)
    _aged(tmp_path / "used-run3-00000-of-00001.parquet", 1)
    printed = _compact(tmp_path, max_age_days=30)

    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 1 and files[0].startswith("embeddings-compacted-"), files
    table = pq.read_table(tmp_path / files[0]).to_pylist()
    by_key = {r["text_sha256"]: r for r in table}
    # 1: made 100 days ago, never used since: dropped; 2: used last night; 3 and 4: made 10
    # days ago (3's vector is the later run's)
    assert set(by_key) == {_key(2), _key(3), _key(4)}
    assert by_key[_key(3)]["embedding"] == fresh
    days = {k: (time_now() - r["last_used"]) / 86_400 for k, r in by_key.items()}
    assert 0.9 < days[_key(2)] < 1.1 and 9.9 < days[_key(3)] < 10.1
    assert "3 files read (0 unreadable, left in place); 3 entries kept, 1 dropped" in printed

    # a second compaction dates entries by their last_used, not by the compacted file's time
    printed = _compact(tmp_path, max_age_days=5)
    (again,) = list(tmp_path.iterdir())
    assert [r["text_sha256"] for r in pq.read_table(again).to_pylist()] == [_key(2)]
    assert "2 dropped" in printed
    # and a run reads the compacted file like any other
    _check(str(tmp_path), [_key(2)])


def test_compaction_leaves_an_unreadable_file_in_place(tmp_path, caplog):
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    _write(tmp_path / "embeddings-run1-00000-of-00001.parquet", [_row(1, [1.0, 0.0, 0.0, 0.0])])
    with caplog.at_level(logging.WARNING):
        printed = _compact(tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "broken.parquet" in names and len(names) == 2, names
    assert "leaving" in caplog.text and "broken.parquet" in caplog.text
    assert "1 unreadable" in printed


def time_now() -> float:
    import time

    return time.time()


def test_compacting_a_folder_without_cache_files_writes_nothing(tmp_path):
    printed = _compact(tmp_path / "never-made")
    assert "no cache files; nothing done" in printed
    assert not (tmp_path / "never-made").exists()
