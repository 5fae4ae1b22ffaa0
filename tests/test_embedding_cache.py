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
