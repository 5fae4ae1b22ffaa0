"""The nightly recipe end to end: the real job builds a run and rebuilds it against the first
(an edit, an addition, a deletion); `load` puts each into PostgreSQL and LanceDB, which then
hold exactly the rebuild's chunks. And docs/beam_rag.md's examples, run as written: the same
runs into Qdrant through Beam's own writer, and embedded again by Beam's embedder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipelines import load
from tests.jobs import run
from tests.load_runs import assert_holds_exactly, held, store_state
from tests.tables import manifest, rows
from transforms.stores import StoreSpec
from transforms.stores.base import LoadState

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Night 1, and night 2 rebuilt from it with b.txt edited, c.py deleted, d.txt added."""
    root = tmp_path_factory.mktemp("nightly")
    corpus = root / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Alpha\n\nThe first document, in Markdown. " * 12)
    (corpus / "b.txt").write_text("Second document, plain prose about databases. " * 30)
    (corpus / "c.py").write_text("def f(x):\n    return x + 1\n\n\nclass C:\n    pass\n")
    flags = ["--input", str(corpus / "*"), "--boilerplate=off", "--parent_chunk_size=200"]
    night1 = str(root / "night1")
    run([*flags, "--output", night1])
    (corpus / "b.txt").write_text(
        "Second document, plain prose about databases. " * 15
        + "An edited sentence in the middle. "
        + "Second document, plain prose about databases. " * 15
    )
    (corpus / "c.py").unlink()
    (corpus / "d.txt").write_text("A new document arrives tonight. " * 10)
    night2 = str(root / "night2")
    run([*flags, "--output", night2, "--previous_output", night1])
    return night1, night2


def _load(run_dir: str, spec: StoreSpec, *flags: str) -> None:
    load.run([run_dir, "--to", spec.uri, "--batch_size=3", *flags])


@pytest.mark.slow
def test_a_rebuild_loads_incrementally_to_exactly_its_chunks(
    nights: tuple[str, str], store: StoreSpec, capsys
) -> None:
    night1, night2 = nights
    assert manifest(night2)["previous_run_id"] == manifest(night1)["run_id"]
    _load(night1, store)
    assert "mode full" in capsys.readouterr().out
    assert_holds_exactly(store, rows(night1, "chunks"))

    _load(night2, store)
    changes = rows(night2, "changes")
    added = {i for c in changes for i in c["chunks_added"]}
    removed = {i for c in changes for i in c["chunks_removed"]}
    # b.txt's chunks whose text the edit in its middle did not touch keep their ids
    updated = {i for c in changes for i in c["chunks_updated"]}
    assert updated and not updated & (added | removed)
    assert {c["change"] for c in changes if c["chunks_updated"]} == {"changed"}
    out = capsys.readouterr().out
    # only what changes/ lists is written and deleted
    n = len(added | updated)
    assert f"upserted {n}, deleted {len(removed - added)}, mode incremental" in out
    chunks2 = rows(night2, "chunks")
    assert 0 < n < len(chunks2)
    assert_holds_exactly(store, chunks2)
    assert any(c["is_parent"] for c in chunks2)  # parents are there, without a vector
    gone = {c["chunk_id"] for c in rows(night1, "chunks")} - {c["chunk_id"] for c in chunks2}
    assert gone and not gone & set(held(store))
    assert store_state(store) == LoadState(manifest(night2)["run_id"], None)

    before = held(store)
    _load(night2, store)  # the same run again: nothing to do
    assert "upserted 0, deleted 0, mode current" in capsys.readouterr().out
    assert held(store).keys() == before.keys()
    assert_holds_exactly(store, chunks2)


@pytest.mark.slow
def test_an_incremental_load_that_dies_midway_converges_when_rerun(
    nights: tuple[str, str], store: StoreSpec, monkeypatch
) -> None:
    night1, night2 = nights
    _load(night1, store)
    store_class = type(store.open())
    upsert = store_class.upsert

    def upsert_then_die(self, rows):
        upsert(self, rows)
        raise RuntimeError("killed after its first batch")

    monkeypatch.setattr(store_class, "upsert", upsert_then_die)
    with pytest.raises(Exception, match="killed after its first batch"):
        _load(night2, store)
    assert store_state(store) == LoadState(manifest(night1)["run_id"], manifest(night2)["run_id"])
    assert {c["chunk_id"] for c in rows(night1, "chunks")} <= set(held(store))  # no deletes
    monkeypatch.setattr(store_class, "upsert", upsert)
    _load(night2, store)
    assert_holds_exactly(store, rows(night2, "chunks"))


def _doc_examples(**names: str) -> list[str]:
    """docs/beam_rag.md's Python blocks, in order, each `NAME = ...` line of `names` set to
    the value given (the run folders and the Qdrant folder of the test)."""
    text = (ROOT / "docs" / "beam_rag.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```$", text, flags=re.M | re.S)
    for name, value in names.items():
        pattern = re.compile(rf"^{name} = .*$", re.M)
        assert any(pattern.search(b) for b in blocks), name
        blocks = [pattern.sub(f"{name} = {value!r}", b) for b in blocks]
    return blocks


@pytest.mark.slow
def test_the_docs_qdrant_examples_write_search_and_follow_a_rebuild(
    nights: tuple[str, str], tmp_path: Path
) -> None:
    """docs/beam_rag.md, run as it is: night 1 written into Qdrant's local mode by Beam's
    QdrantWriteConfig (UUID ids, parents left out), searched, then night 2 written over it and
    the ids changes/ lists as removed deleted: Qdrant holds exactly night 2's embedded chunks."""
    pytest.importorskip("qdrant_client", reason="pip install -e .[qdrant]")
    import numpy as np

    from tests.load_runs import assert_qdrant_holds

    night1, night2 = nights
    qdrant = str(tmp_path / "qdrant")
    write, search, follow, _ = _doc_examples(RUN=night1, QDRANT=qdrant, NEW_RUN=night2)
    chunks1 = rows(night1, "chunks")
    assert any(c["is_parent"] for c in chunks1) and any(c["page_start"] is None for c in chunks1)
    scope: dict = {}
    exec(write, scope)
    assert_qdrant_holds(qdrant, "corpus", chunks1)

    exec(search, scope)
    embedded = [c for c in chunks1 if not c["is_parent"]]
    best = max(embedded, key=lambda c: float(np.dot(c["embedding"], scope["query"])))
    assert scope["hits"][0].payload["chunk_id"] == best["chunk_id"]
    assert len(scope["hits"]) == len(embedded)

    write_night2 = _doc_examples(RUN=night2, QDRANT=qdrant)[0]  # "as above"
    exec(write_night2, scope)
    exec(follow, scope)
    assert scope["removed"]
    assert_qdrant_holds(qdrant, "corpus", rows(night2, "chunks"))


@pytest.mark.slow
def test_the_docs_example_embeds_a_run_again_with_beams_embedder(
    nights: tuple[str, str], tmp_path: Path, capsys
) -> None:
    """docs/beam_rag.md's last example, run as it is: night 1's chunks as Beam Chunks,
    embedded again by Beam's HuggingfaceTextEmbeddings (the bundled MiniLM, float32 torch),
    turned back into rows and written by WriteTable: every row as it was but its vector and
    model, and each new vector close to the job's (int8 ONNX) one, both of header and text."""
    import numpy as np

    from schemas.columns import CHUNKS
    from tests.tables import read_table

    night1, _ = nights
    out = str(tmp_path / "again")
    *_, embed_again = _doc_examples(RUN=night1, OUT=out)
    exec(embed_again, {})
    before = {c["chunk_id"]: c for c in rows(night1, "chunks") if not c["is_parent"]}
    after = {c["chunk_id"]: c for c in read_table(out, CHUNKS).to_pylist()}
    assert sorted(after) == sorted(before)
    cosines = []
    new_model = "all-MiniLM-L6-v2 (Beam, torch float32)"
    for chunk_id, row in before.items():
        new = after[chunk_id]
        assert new["embedding_model"] == new_model
        assert {k: v for k, v in new.items() if k not in ("embedding", "embedding_model")} == {
            k: v for k, v in row.items() if k not in ("embedding", "embedding_model")
        }
        cosines.append(float(np.dot(new["embedding"], row["embedding"])))
    with capsys.disabled():
        print(f"cosines, Beam's float32 against the job's int8: min {min(cosines):.4f}")
    assert min(cosines) > 0.95, sorted(cosines)[:5]
