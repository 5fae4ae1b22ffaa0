"""Two runs on the same input and config give the same chunk ids and texts."""

import os

import pytest

from pipelines.chunk_corpus import run
from tests.tables import manifest, read_table

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples", "*", "*")


def _ids(out):
    t = read_table(out, "chunks").sort_by("chunk_id")
    return t.column("chunk_id").to_pylist(), t.column("text").to_pylist()


@pytest.mark.slow
def test_rerun_gives_identical_ids(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    flags = ["--input", SAMPLES, "--embedding_model=none"]
    run([*flags, "--output", a])
    run([*flags, "--output", b, "--direct_num_workers=1"])
    assert _ids(a) == _ids(b)
    assert manifest(a)["config_fingerprint"] == manifest(b)["config_fingerprint"]
    # a setting that changes the output changes every id
    c = str(tmp_path / "c")
    run([*flags, "--output", c, "--chunk_size=128"])
    assert manifest(c)["config_fingerprint"] != manifest(a)["config_fingerprint"]
    assert not set(_ids(a)[0]) & set(_ids(c)[0])


def test_output_folder_of_an_earlier_run_is_refused(tmp_path):
    out = str(tmp_path / "o")
    os.makedirs(os.path.join(out, "chunks"))
    with open(os.path.join(out, "chunks", "part-00000-of-00001.parquet"), "w") as f:
        f.write("x")
    with pytest.raises(ValueError, match="--overwrite"):
        run(["--input", SAMPLES, "--output", out, "--embedding_model=none"])


def test_input_that_matches_nothing_names_the_pattern(tmp_path):
    with pytest.raises(ValueError, match="nothing-here"):
        run(["--input", str(tmp_path / "nothing-here*"), "--output", str(tmp_path / "o")])
