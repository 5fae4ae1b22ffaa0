"""A run folder is read through one RunFolder (runs/run_folder.py): its manifest is read and
checked once, and a run older than this version's format is refused by every reader with an
error that names the folder and says to rebuild it (issue 26 item 5: no shims for older runs)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.load_runs import chunk, write_run


def _edit(out: str, change: Callable[[dict], Any]) -> None:
    path = os.path.join(out, "run_manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    change(manifest)
    with open(path, "w") as f:
        json.dump(manifest, f)


def _older_config(manifest: dict) -> None:
    """The run made by corpus-chunker of config_version 7: no page columns in chunks/."""
    manifest["config"]["config_version"] = 7


def _no_run_id(manifest: dict) -> None:
    del manifest["run_id"]


def _inspect(out: str) -> None:
    from commands.inspect import load_run

    load_run(out)


def _evaluate(out: str) -> None:
    from commands.evaluate import run_model

    run_model(out)


def _load(out: str) -> None:
    from transforms.stores.loading import open_run

    open_run(out)


def _previous_output(out: str) -> None:
    from transforms.incremental import load_previous_run

    load_previous_run(out)


def _prepare_with_previous(out: str) -> None:
    from pipelines.chunk_corpus import prepare_output

    prepare_output(out + "-next", overwrite=False, previous_output=out)


READERS = [_inspect, _evaluate, _load, _previous_output, _prepare_with_previous]


@pytest.mark.parametrize("older", [_older_config, _no_run_id], ids=["config_7", "no_run_id"])
@pytest.mark.parametrize("reader", READERS, ids=lambda f: f.__name__.strip("_"))
def test_every_reader_refuses_an_older_run_naming_it_and_saying_to_rebuild(
    tmp_path: Path, reader: Callable[[str], None], older: Callable[[dict], None]
) -> None:
    out = write_run(str(tmp_path / "night1"), [chunk("d1", 0, "text one")], run_id="r1")
    _edit(out, older)
    with pytest.raises(ValueError, match="older corpus-chunker") as refused:
        reader(out)
    assert out in str(refused.value)
    assert "rebuild" in str(refused.value)


def test_overwrite_still_replaces_an_older_run(tmp_path: Path) -> None:
    """The rebuild the error asks for may go into the same folder."""
    from pipelines.chunk_corpus import prepare_output

    out = write_run(str(tmp_path / "night1"), [chunk("d1", 0, "text one")], run_id="r1")
    _edit(out, _older_config)
    prepare_output(out, overwrite=True)  # no error: the swap asks only for a manifest


def test_the_manifest_is_read_once_per_folder(tmp_path: Path, monkeypatch) -> None:
    from apache_beam.io.filesystems import FileSystems

    from runs.run_folder import RunFolder

    out = write_run(str(tmp_path / "run"), [chunk("d1", 0, "text one")], run_id="r1")
    opened: list[str] = []
    real_open = FileSystems.open

    def counting_open(path: str, *args: Any, **kwargs: Any) -> Any:
        opened.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(FileSystems, "open", staticmethod(counting_open))
    folder = RunFolder(out)
    assert (folder.run_id, folder.mode, folder.previous_run_id) == ("r1", "run", None)
    assert folder.config["embedding_dimension"] == 4
    assert opened.count(os.path.join(out, "run_manifest.json")) == 1


def test_write_manifest_lists_the_files_and_refuses_an_older_format(tmp_path: Path) -> None:
    from runs.run_folder import RunFolder

    out = write_run(str(tmp_path / "run"), [chunk("d1", 0, "text one")], run_id="r1")
    folder = RunFolder(out)
    shard = folder.shards["chunks"][0]
    with open(shard, "rb") as f:
        assert (
            len(f.read()) == folder.manifest["files"]["chunks/part-00000-of-00001.parquet"]["bytes"]
        )
    config = dict(folder.config, config_version=7)
    older = {**folder.manifest, "config": config}
    with pytest.raises(ValueError, match="records config_version 7"):
        RunFolder(str(tmp_path / "copy")).write_manifest(older, [])
