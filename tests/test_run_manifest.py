"""A previous run's manifest is checked, not trusted (issue 22 N7): it must list its files, each
a shard `TABLE/part-N-of-M.parquet` of the run's tables (or a cost report) inside its folder,
and its config fingerprint is recomputed from the config it records. `load DIR` reads a run
through the same check."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from runs.manifest import file_inventory
from tests.load_runs import chunk, write_run
from transforms.fingerprint import CONFIG_VERSION, FINGERPRINT_KEYS, config_fingerprint
from transforms.incremental import load_previous_run
from transforms.stores.loading import open_run

CONFIG: dict[str, Any] = {
    "config_version": CONFIG_VERSION,
    "chunk_size": 192,
    "chunk_overlap": 32,
    "tokenizer": "cl100k_base",
    "strategies": {"text": "recursive"},
    "parent_chunk_size": None,
    "context": "path",
    "context_max_tokens": 32,
    "header_folders": 0,
    "llm_model": None,
    "llm_context_tokens": None,
    "embedding_model": "test-model",
    "embedding_dimension": 4,
    "boilerplate": {"enabled": True, "min_docs": 3, "min_fraction": 0.5},
}


def _run(folder: Path) -> str:
    """A complete run whose manifest records CONFIG and its real fingerprint."""
    out = write_run(str(folder), [chunk("d1", 0, "text one")], run_id="r1")
    _edit(
        out, lambda m: m.update(config=dict(CONFIG), config_fingerprint=config_fingerprint(CONFIG))
    )
    return out


def _edit(out: str, change: Any) -> None:
    path = os.path.join(out, "run_manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    change(manifest)
    with open(path, "w") as f:
        json.dump(manifest, f)


def _list_outside_file(out: str, tmp_path: Path, name: str) -> None:
    """The manifest lists `name`, a file outside the run folder, with its real size and hash."""
    evil = tmp_path / "evil"
    evil.mkdir(exist_ok=True)
    shutil.copy(os.path.join(out, "chunks", "part-00000-of-00001.parquet"), evil / "x.parquet")
    entry = file_inventory(str(evil), [str(evil / "x.parquet")])["x.parquet"]
    _edit(out, lambda m: m["files"].update({name: entry}))


def test_a_checked_run_gives_its_recomputed_fingerprint_and_shards(tmp_path: Path) -> None:
    out = _run(tmp_path / "run")
    previous = load_previous_run(out)
    assert previous.fingerprint == config_fingerprint(CONFIG)
    assert [os.path.basename(p) for p in previous.shards["chunks"]] == [
        "part-00000-of-00001.parquet"
    ]
    assert open_run(out).shards == previous.shards


def test_the_launcher_lists_the_previous_shards_and_reads_none(tmp_path: Path, monkeypatch) -> None:
    """load_previous_run checks sizes from a listing; the sha256 of each shard is left to the
    job (manifests.check_shard), so a 4 TB previous run is not read by the launcher."""
    import runs.manifest as manifests

    out = _run(tmp_path / "run")

    def no_reading(path: str) -> dict:
        raise AssertionError(f"the launcher read {path}")

    monkeypatch.setattr(manifests, "file_entry", no_reading)
    previous = load_previous_run(out)
    assert [os.path.basename(p) for p in previous.shards["chunks"]] == [
        "part-00000-of-00001.parquet"
    ]
    (check,) = [c for c in previous.checks if "/chunks/" in c[0]]
    with open(os.path.join(out, "run_manifest.json")) as f:
        listed = json.load(f)["files"]["chunks/part-00000-of-00001.parquet"]
    assert check[1] == listed
    monkeypatch.undo()
    assert manifests.check_shard(*check) == check[0]
    with open(check[0], "ab") as f:  # a byte more: the listing sees it, and so does the check
        f.write(b"x")
    with pytest.raises(ValueError, match="is not the file that run wrote"):
        load_previous_run(out)
    with pytest.raises(ValueError, match="is not the file that run wrote"):
        manifests.check_shard(*check)


def test_a_manifest_without_a_file_list_is_refused(tmp_path: Path) -> None:
    out = _run(tmp_path / "run")
    _edit(out, lambda m: m.pop("files"))
    with pytest.raises(ValueError, match="no file list"):
        load_previous_run(out)
    with pytest.raises(ValueError, match="no file list"):
        open_run(out)


@pytest.mark.parametrize(
    "name",
    [
        "chunks/../../evil/x.parquet",
        "../evil/x.parquet",
        "chunks/x.parquet",
        "notes/part-00000-of-00001.parquet",
        "chunks/sub/part-00000-of-00001.parquet",
        "part-00000-of-00001.parquet",
    ],
)
def test_a_listed_file_that_is_not_a_shard_of_the_run_is_refused(tmp_path: Path, name: str) -> None:
    out = _run(tmp_path / "run")
    _list_outside_file(out, tmp_path, name)
    with pytest.raises(ValueError, match="not a file a run writes"):
        load_previous_run(out)
    with pytest.raises(ValueError, match="not a file a run writes"):
        open_run(out)


def test_an_absolute_path_in_the_file_list_is_refused(tmp_path: Path) -> None:
    out = _run(tmp_path / "run")
    _list_outside_file(out, tmp_path, str(tmp_path / "evil" / "x.parquet"))
    with pytest.raises(ValueError, match="not a file a run writes"):
        load_previous_run(out)
    with pytest.raises(ValueError, match="not a file a run writes"):
        open_run(out)


def test_a_fingerprint_copied_from_another_config_is_refused(tmp_path: Path) -> None:
    """The fingerprint of a --chunk_size 64 run pasted into a 192-token run's manifest made a
    64-token run reuse 192-token chunks."""
    out = _run(tmp_path / "run")
    copied = config_fingerprint({**CONFIG, "chunk_size": 64})
    _edit(out, lambda m: m.update(config_fingerprint=copied))
    with pytest.raises(ValueError, match="the manifest was edited"):
        load_previous_run(out)


def test_a_run_of_an_older_config_version_is_read_but_matches_no_config(tmp_path: Path) -> None:
    out = _run(tmp_path / "run")
    older = {key: CONFIG[key] for key in FINGERPRINT_KEYS if key != "chunk_overlap"}
    older["config_version"] = CONFIG_VERSION - 1
    _edit(out, lambda m: m.update(config=older, config_fingerprint="0" * 16))
    previous = load_previous_run(out)
    assert previous.fingerprint not in ("0" * 16, config_fingerprint(CONFIG))
