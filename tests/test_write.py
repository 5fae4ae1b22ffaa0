"""transforms/write.py: the tables through `fileio.WriteToFiles`, read back as written."""

from __future__ import annotations

import glob
import os

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that

from transforms import write
from transforms.write import ParquetSink, WriteTable, WriteTables

SCHEMAS = {
    "notes": pa.schema([("id", pa.string()), ("text", pa.string()), ("n", pa.int64())]),
    "empty": pa.schema([("id", pa.string()), ("score", pa.float32())]),
}


def _run(output: str, rows: list[tuple[str, dict]]) -> list[str]:
    """Runs WriteTables; its output (checked to be every file in the run folder) sorted."""
    options = PipelineOptions(["--runner=FnApiRunner"])
    with beam.Pipeline(options=options) as p:
        written = p | beam.Create(rows) | WriteTables(output, SCHEMAS)
        assert_that(written, equal_to_files_in(output))
    return sorted(glob.glob(os.path.join(output, "*", "*")))


def equal_to_files_in(output: str):
    def check(paths: list[str]) -> None:
        on_disk = sorted(glob.glob(os.path.join(output, "**"), recursive=True))
        files = [p for p in on_disk if os.path.isfile(p)]
        assert sorted(paths) == files, (paths, on_disk)

    return check


def test_every_table_is_written_an_empty_one_as_one_empty_shard(tmp_path) -> None:
    out = str(tmp_path / "run")
    rows = [("notes", {"id": f"n{i}", "text": "word " * (i % 9), "n": i}) for i in range(1100)]
    files = _run(out, rows)
    names = sorted(os.path.relpath(f, out) for f in files)
    assert [n.split("/")[0] for n in names].count("empty") == 1
    assert all(write.SHARD_NAME.fullmatch(n.split("/")[1]) for n in names), names
    assert sorted(os.listdir(out)) == ["empty", "notes"]  # the temporary folder is gone
    notes = pq.read_table(os.path.join(out, "notes"))
    assert notes.schema == SCHEMAS["notes"]
    assert sorted(notes.column("id").to_pylist()) == sorted(r["id"] for _, r in rows)
    empty = pq.read_table(os.path.join(out, "empty"))
    assert empty.num_rows == 0 and empty.schema == SCHEMAS["empty"]


def test_text_columns_have_no_statistics_and_the_rest_do(tmp_path) -> None:
    out = str(tmp_path / "run")
    files = _run(out, [("notes", {"id": "a", "text": "x" * 1000, "n": 1})])
    (shard,) = [f for f in files if "/notes/" in f]
    meta = pq.ParquetFile(shard).metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"
    columns = {meta.row_group(0).column(i).path_in_schema: i for i in range(3)}
    assert meta.row_group(0).column(columns["text"]).statistics is None
    assert meta.row_group(0).column(columns["id"]).statistics is not None


def test_a_file_the_write_reports_but_that_is_not_in_place_fails_the_job(tmp_path) -> None:
    complete = write._CompleteTables(str(tmp_path), SCHEMAS)
    with pytest.raises(OSError, match=r"not in place: .*notes/part-00000-of-00001\.parquet"):
        list(complete.process(None, ["notes/part-00000-of-00001.parquet"]))


def test_one_table_alone(tmp_path) -> None:
    out = str(tmp_path / "run")
    options = PipelineOptions(["--runner=FnApiRunner"])
    with beam.Pipeline(options=options) as p:
        rows = p | beam.Create([{"id": "a", "score": 0.5}])
        rows | WriteTable(out, "scores", SCHEMAS["empty"])
    assert os.listdir(out) == ["scores"]  # and no temporary folder
    assert pq.read_table(os.path.join(out, "scores")).to_pylist() == [{"id": "a", "score": 0.5}]


def test_the_sink_writes_a_row_group_per_buffer_of_batches(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(write, "ROW_GROUP_BYTES", 1)  # every record batch closes a row group
    monkeypatch.setattr(write, "RECORD_BATCH_ROWS", 10)
    sink = ParquetSink(SCHEMAS["notes"], str(tmp_path / "notes"))
    with open(tmp_path / "f.parquet", "wb") as fh:
        sink.open(fh)
        for i in range(25):
            sink.write(("notes", {"id": str(i), "text": "t", "n": i}))
        sink.flush()
    assert (tmp_path / "notes").is_dir()  # the table's folder, for the rename into place
    meta = pq.ParquetFile(tmp_path / "f.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [10, 10, 5]


def test_chunk_rows_are_written_in_the_stage_that_makes_them(tmp_path) -> None:
    """On the local runner a Flatten is a stage boundary: every chunk row would be encoded and
    decoded once more before its write. The chunk write, and the per-document gathering of
    chunk ids for the change log, fuse with chunking; the other tables share one write."""
    from apache_beam.runners.portability.fn_api_runner.fn_runner import FnApiRunner

    from pipelines.chunk_corpus import build_pipeline
    from pipelines.options import config_from_options

    flags = ["--input", str(tmp_path / "*.md"), "--output", str(tmp_path / "out")]
    options = PipelineOptions([*flags, "--embedding_model=none"])
    p = beam.Pipeline(options=options)
    build_pipeline(p, config_from_options(options))
    _, stages = FnApiRunner().create_stages(p.to_runner_api())
    (chunking,) = [s for s in stages if any("_ChunkFn" in t.unique_name for t in s.transforms)]
    names = [t.unique_name for t in chunking.transforms]
    chunk_write = "Write tables/Tables/Write files 0/ParDo(_WriteUnshardedRecordsFn)"
    assert any(n.startswith(chunk_write) for n in names), names
    assert "Changes/Chunk ids of each document/Precombine" in names, names
    # the other tables share one write, after a Flatten
    assert any(n.startswith("Write tables/Other rows/Write/") for n in names), names


def test_a_file_hashed_as_it_is_written_is_not_read_back_for_the_manifest(
    tmp_path, monkeypatch
) -> None:
    """With `record_hashes`, each file's size and sha256 come from its sink, which hashed the
    bytes it wrote; the manifest's step reads the file's footer and that record, not the file
    (`recorded_entry`). A file without a record (an empty table's shard) is read whole."""
    from runs.manifest import file_entry

    out = str(tmp_path / "run")
    rows = [("notes", {"id": f"n{i}", "text": "word " * (i % 9), "n": i}) for i in range(1100)]
    with beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        _ = p | beam.Create(rows) | WriteTables(out, SCHEMAS, record_hashes=True)
    hashes = os.path.join(out, write.HASHES_FOLDER)
    notes = sorted(glob.glob(os.path.join(out, "notes", "*")))
    empty = glob.glob(os.path.join(out, "empty", "*"))
    assert notes and len(os.listdir(hashes)) >= len(notes)
    truth = {path: file_entry(path) for path in notes + empty}

    def no_reading(path: str) -> dict:
        raise AssertionError(f"{path} was read back whole")

    monkeypatch.setattr(write, "file_entry", no_reading)
    assert {path: write.recorded_entry(path, hashes) for path in notes} == {
        path: truth[path] for path in notes
    }
    with pytest.raises(AssertionError, match="read back whole"):
        write.recorded_entry(empty[0], hashes)
    monkeypatch.setattr(write, "file_entry", file_entry)
    assert write.recorded_entry(empty[0], hashes) == truth[empty[0]]
    # a record that does not match the file's size is not trusted: the file is read
    for record in glob.glob(os.path.join(hashes, "*.json")):
        with open(record, "w") as f:
            f.write('{"bytes": 1, "sha256": "0"}')
    assert write.recorded_entry(notes[0], hashes) == truth[notes[0]]
