"""The ONNX backends: the cache that builds each file once, the start-up checks of the device,
and (slow) the real files built offline from the bundled model, whose vectors are checked
against torch's on real chunks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.options import config_from_options
from transforms.embedding import onnx_model
from transforms.embedding.embed_setup import prepare_model, runs_here
from transforms.embedding.models import resolve_model_path
from transforms.embedding.onnx_model import (
    ONNX,
    ONNX_INT8,
    OnnxSettings,
    cache_root,
    ensure_onnx_model,
    file_sha256,
    model_id,
    source_hash,
)

REPO = Path(__file__).resolve().parents[1]
# What the int8 file must keep of float32 on real chunks (bench/README.md has the figures:
# mean 0.994, lowest 0.987 on 3,000 chunks).
INT8_MEAN_COSINE = 0.99
INT8_MIN_COSINE = 0.97
FP32_MIN_COSINE = 0.9999


# --- the cache, with a stand-in export (the real one is below) -------------------------------


@pytest.fixture
def small_model(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 4}')
    (folder / "1_Pooling" / "config.json").write_text('{"word_embedding_dimension": 4}')
    return folder


@pytest.fixture
def fake_export(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replaces the export with one that writes the settings as the file, and logs calls."""
    calls: list[str] = []

    def build(model_path: str, settings: OnnxSettings, folder: str) -> None:
        calls.append(folder)
        with open(os.path.join(folder, "model.onnx"), "w") as f:
            f.write(settings.describe() + source_hash(model_path))

    monkeypatch.setattr(onnx_model, "_build", build)
    return calls


def test_a_model_is_built_once_and_found_after(small_model, tmp_path, fake_export) -> None:
    first = ensure_onnx_model(str(small_model), "m", ONNX_INT8, str(tmp_path / "cache"))
    again = ensure_onnx_model(str(small_model), "m", ONNX_INT8, str(tmp_path / "cache"))
    assert first == again and len(fake_export) == 1
    assert first.sha256 == file_sha256(first.path)
    info = json.loads((Path(first.path).parent / "info.json").read_text())
    assert info["sha256"] == first.sha256 and info["settings"]["per_channel"] is True
    # the build folder was renamed into place, nothing else is left beside it
    assert os.listdir(tmp_path / "cache" / "onnx") == [Path(first.path).parent.name]


def test_the_key_follows_the_source_files_and_the_backend(small_model, tmp_path, fake_export):
    cache = str(tmp_path / "cache")
    int8 = ensure_onnx_model(str(small_model), "m", ONNX_INT8, cache)
    fp32 = ensure_onnx_model(str(small_model), "m", ONNX, cache)
    (small_model / "config.json").write_text('{"hidden_size": 5}')
    changed = ensure_onnx_model(str(small_model), "m", ONNX_INT8, cache)
    assert len({int8.path, fp32.path, changed.path}) == 3
    assert len({int8.model_id, fp32.model_id, changed.model_id}) == 3


def test_workers_building_at_once_share_one_folder(small_model, tmp_path, fake_export) -> None:
    cache = str(tmp_path / "cache")
    results: list = []
    threads = [
        threading.Thread(
            target=lambda: results.append(
                ensure_onnx_model(str(small_model), "m", ONNX_INT8, cache)
            )
        )
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and len({r.path for r in results}) == 1
    assert len(os.listdir(tmp_path / "cache" / "onnx")) == 1  # no half-built folder left


def test_a_damaged_or_foreign_file_is_refused(small_model, tmp_path, fake_export) -> None:
    cache = str(tmp_path / "cache")
    built = ensure_onnx_model(str(small_model), "m", ONNX_INT8, cache)
    with pytest.raises(RuntimeError, match="not the one this run was started with"):
        ensure_onnx_model(str(small_model), "m", ONNX_INT8, cache, expected_sha256="0" * 64)
    Path(built.path).write_text("damaged")
    with pytest.raises(RuntimeError, match="is damaged"):
        ensure_onnx_model(str(small_model), "m", ONNX_INT8, cache)


def test_model_id_names_backend_settings_and_hash() -> None:
    per_channel = model_id("default", OnnxSettings(ONNX_INT8), "ab" * 32)
    per_tensor = model_id("default", OnnxSettings(ONNX_INT8, per_channel=False), "ab" * 32)
    assert per_channel.startswith("default|onnx-int8|int8-dynamic,per-channel,QInt8,MatMul")
    assert per_channel.endswith("|sha256:" + "ab" * 8)
    assert per_channel != per_tensor
    with pytest.raises(ValueError, match="no ONNX file"):
        OnnxSettings("torch")


def test_cache_root_prefers_the_flag_then_the_environment(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CORPUS_CHUNKER_CACHE_DIR", str(tmp_path / "env"))
    assert cache_root(str(tmp_path / "flag")) == str(tmp_path / "flag")
    assert cache_root() == str(tmp_path / "env")
    monkeypatch.delenv("CORPUS_CHUNKER_CACHE_DIR")
    assert cache_root().endswith(os.path.join(".cache", "corpus-chunker"))


def test_an_estimate_names_the_backend_without_building() -> None:
    prepared = prepare_model("default", "/nonexistent", ONNX_INT8, None, build=False)
    assert prepared.model_id.startswith("default|onnx-int8|int8-dynamic")
    assert prepared.onnx_sha256 is None
    assert prepare_model("default", "/nonexistent", "torch", None).model_id == "default"


# --- the device, checked before anything runs ------------------------------------------------


@pytest.mark.parametrize(
    ("runner", "here"),
    [(None, True), ("DirectRunner", True), ("FnApiRunner", True), ("DataflowRunner", False)],
)
def test_which_runners_run_workers_here(runner: str | None, here: bool) -> None:
    assert runs_here(runner) is here


def _cuda_visible() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.parametrize("backend", ["torch", ONNX_INT8])
def test_cuda_without_a_gpu_fails_at_start_up_naming_the_flag(tmp_path, backend) -> None:
    if _cuda_visible():
        pytest.skip("this machine has a GPU")
    options = PipelineOptions(
        [
            f"--input={REPO}/samples/text/*",
            f"--output={tmp_path}/out",
            "--embedding_device=cuda",
            f"--embedding_backend={backend}",
        ]
    )
    with pytest.raises(ValueError, match=r"^--embedding_device=cuda: .*(no CUDA|GPU)"):
        config_from_options(options)
    assert not (tmp_path / "out").exists()


def test_the_backend_is_part_of_the_fingerprint(tmp_path) -> None:
    def config(*flags: str):
        argv = [f"--input={REPO}/samples/text/*", f"--output={tmp_path}/out", *flags]
        return config_from_options(PipelineOptions(argv))

    torch = config("--embedding_backend=torch")
    int8 = config("--embedding_backend=onnx-int8")
    assert torch.fingerprint != int8.fingerprint
    assert torch.settings["embedding_model"] == "default"
    assert int8.settings["embedding_model"] == int8.embedding.model_id
    assert int8.embedding.onnx_sha256
    assert int8.settings["embedding_model"].endswith("sha256:" + int8.embedding.onnx_sha256[:16])


# --- the real files (slow) ---------------------------------------------------------------------

OFFLINE_BUILD = textwrap.dedent(
    """
    import json, socket, sys

    def refuse(*args, **kwargs):
        raise OSError("network refused in this test")

    socket.socket.connect = refuse  # anything that tries to download fails loudly
    socket.create_connection = refuse
    from transforms.embedding.models import resolve_model_path
    from transforms.embedding.onnx_model import ensure_onnx_model

    built = ensure_onnx_model(resolve_model_path("default"), "default", sys.argv[1], sys.argv[2])
    print(json.dumps({"path": built.path, "sha256": built.sha256, "id": built.model_id}))
    """
)


@pytest.mark.slow
def test_int8_model_is_built_offline_and_bit_for_bit_as_the_shared_one(tmp_path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", OFFLINE_BUILD, ONNX_INT8, str(tmp_path / "cache")],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    built = json.loads(done.stdout.strip().splitlines()[-1])
    assert built["path"].startswith(str(tmp_path / "cache"))

    import onnx

    graph = onnx.load(built["path"]).graph
    ops = {node.op_type for node in graph.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= ops
    int8_weights = [t for t in graph.initializer if t.data_type == onnx.TensorProto.INT8]
    assert len(int8_weights) >= 36  # 6 layers x (q, k, v, output, 2 feed-forward)
    # The same bytes as the cache every worker uses: the export is deterministic.
    shared = ensure_onnx_model(resolve_model_path("default"), "default", ONNX_INT8)
    assert built["sha256"] == shared.sha256 and built["id"] == shared.model_id


@pytest.fixture(scope="module")
def real_chunks() -> list[str]:
    from bench.embedding import collect_chunks

    model_path = resolve_model_path("default")
    return [c.embed_text() for c in collect_chunks(64, model_path)]


@pytest.fixture(scope="module")
def torch_model():
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(resolve_model_path("default"), device="cpu")


@pytest.fixture(scope="module")
def torch_vectors(torch_model, real_chunks: list[str]) -> np.ndarray:
    return torch_model.encode(real_chunks, batch_size=16, normalize_embeddings=True)


def _onnx_vectors(backend: str, texts: list[str]) -> tuple[np.ndarray, object]:
    from transforms.embedding.onnx_model import OnnxSentenceEncoder

    path = resolve_model_path("default")
    encoder = OnnxSentenceEncoder(path, ensure_onnx_model(path, "default", backend).path, "cpu")
    return encoder.encode(texts, batch_size=16), encoder


@pytest.mark.slow
def test_onnx_fp32_matches_torch_on_real_chunks(real_chunks, torch_model, torch_vectors) -> None:
    vectors, encoder = _onnx_vectors(ONNX, real_chunks)
    cosine = (vectors * torch_vectors).sum(axis=1)
    assert cosine.min() > FP32_MIN_COSINE, cosine.min()
    # the same word pieces as sentence-transformers gives the model
    texts = [*real_chunks[:16], " ".join(real_chunks)]  # the last one cut at 256
    theirs = torch_model.tokenize(texts)
    ours = encoder.tokenizer.batch(texts)
    assert ours["input_ids"].shape == (17, 256)
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        assert np.array_equal(theirs[name].numpy(), ours[name]), name


@pytest.mark.slow
def test_onnx_int8_stays_within_the_stated_cosine_of_float32(real_chunks, torch_vectors) -> None:
    vectors, _ = _onnx_vectors(ONNX_INT8, real_chunks)
    assert vectors.dtype == np.float32 and vectors.shape == torch_vectors.shape
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosine = (vectors * torch_vectors).sum(axis=1)
    assert cosine.mean() >= INT8_MEAN_COSINE, cosine.mean()
    assert cosine.min() >= INT8_MIN_COSINE, cosine.min()


@pytest.mark.slow
def test_an_int8_vector_does_not_depend_on_the_chunks_beside_it(real_chunks) -> None:
    # Dynamic int8 scales a pass's activations by that pass's range: the handler gives each
    # text a pass of its own, so the same text gets the same vector in any batch.
    from transforms.embedding.embed import SentenceTransformerHandler
    from transforms.embedding.models import read_model_info

    path = resolve_model_path("default")
    handler = SentenceTransformerHandler(
        "default", read_model_info(path).dimension, "cpu", backend=ONNX_INT8
    )
    handler.onnx_sha256 = ensure_onnx_model(path, "default", ONNX_INT8).sha256
    model = handler.load_model()

    def vectors(texts: list[str]) -> dict[str, np.ndarray]:
        chunks = [_chunk(i, text) for i, text in enumerate(texts)]
        return {r.example.text: r.inference[0] for r in handler.run_inference(chunks, model)}

    texts = real_chunks[:24]
    alone = vectors(texts[:1])[texts[0]]
    in_a_batch = vectors(texts[:12])[texts[0]]
    in_another = vectors([texts[0], *texts[12:]])[texts[0]]
    assert np.array_equal(alone, in_a_batch) and np.array_equal(alone, in_another)


def _chunk(i: int, text: str):
    from schemas.records import Chunk

    return Chunk(f"c{i}", "d", "s", "text", None, i, text, 0, len(text), 1, (), "recursive", "f")


# --- a GPU, where there is one ----------------------------------------------------------------


@pytest.mark.slow
def test_gpu_vectors_match_cpu_ones(real_chunks, torch_vectors) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU on this machine (torch.cuda.is_available() is False)")
    from sentence_transformers import SentenceTransformer

    from transforms.embedding.embed import GPU_BATCH

    model = SentenceTransformer(resolve_model_path("default"), device="cuda")
    on_gpu = model.encode(real_chunks, batch_size=GPU_BATCH, normalize_embeddings=True)
    assert ((on_gpu * torch_vectors).sum(axis=1)).min() > 0.9999

    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        from transforms.embedding.onnx_model import OnnxSentenceEncoder

        path = resolve_model_path("default")
        encoder = OnnxSentenceEncoder(path, ensure_onnx_model(path, "default", ONNX).path, "cuda")
        assert encoder.on_gpu
        vectors = encoder.encode(real_chunks, batch_size=GPU_BATCH)
        assert ((vectors * torch_vectors).sum(axis=1)).min() > 0.9999


def test_a_recorded_model_id_names_model_backend_and_hash() -> None:
    from transforms.embedding.onnx_model import parse_model_id

    recorded = "default|onnx-int8|int8-dynamic,per-channel,QInt8,MatMul,opset17|sha256:76397f74"
    assert parse_model_id(recorded) == ("default", ONNX_INT8, "76397f74")
    assert parse_model_id("default") == ("default", "torch", None)
    assert parse_model_id("/models/mini") == ("/models/mini", "torch", None)


# --- the cache holds data, not trust (issue 22 N4) ---------------------------------------------


def _entry(built: onnx_model.OnnxModel) -> Path:
    return Path(built.path).parent


@pytest.mark.parametrize("which", ["root", "onnx", "entry", "model", "info"])
def test_a_cache_writable_by_others_is_refused(small_model, tmp_path, fake_export, which) -> None:
    cache = tmp_path / "cache"
    built = ensure_onnx_model(str(small_model), "m", ONNX_INT8, str(cache))
    entry = _entry(built)
    target = {
        "root": cache,
        "onnx": cache / "onnx",
        "entry": entry,
        "model": entry / "model.onnx",
        "info": entry / "info.json",
    }[which]
    os.chmod(target, 0o777 if target.is_dir() else 0o666)
    with pytest.raises(RuntimeError, match="writable by others"):
        ensure_onnx_model(str(small_model), "m", ONNX_INT8, str(cache))
    os.chmod(target, 0o775 if target.is_dir() else 0o664)  # the group alone is refused too
    with pytest.raises(RuntimeError, match="writable by others"):
        ensure_onnx_model(str(small_model), "m", ONNX_INT8, str(cache))


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_a_cache_entry_owned_by_another_user_is_refused(small_model, tmp_path, fake_export):
    """The reproduction: a folder owned by `nobody` (mode 0777 aside) held the model loaded."""
    cache = tmp_path / "cache"
    entry = _entry(ensure_onnx_model(str(small_model), "m", ONNX_INT8, str(cache)))
    os.chown(entry, 65534, 65534)
    with pytest.raises(RuntimeError, match="owned by another user"):
        ensure_onnx_model(str(small_model), "m", ONNX_INT8, str(cache))


def test_the_cache_is_built_private_whatever_the_umask(small_model, tmp_path, fake_export):
    old = os.umask(0o002)
    try:
        built = ensure_onnx_model(str(small_model), "m", ONNX_INT8, str(tmp_path / "cache"))
        again = ensure_onnx_model(str(small_model), "m", ONNX_INT8, str(tmp_path / "cache"))
    finally:
        os.umask(old)
    assert again == built
    for path in (tmp_path / "cache", _entry(built), Path(built.path), _entry(built) / "info.json"):
        assert not path.stat().st_mode & 0o022, path


def test_a_model_file_that_links_elsewhere_is_refused(small_model, tmp_path, fake_export):
    """A shared cache's entry pointing at another checkout's file (its hash written into
    info.json to match) is not followed."""
    cache = tmp_path / "cache"
    entry = _entry(ensure_onnx_model(str(small_model), "m", ONNX_INT8, str(cache)))
    other = tmp_path / "other-checkout" / "model.onnx"
    other.parent.mkdir()
    other.write_text("a model that returns [1, 0, 0, ...]")
    (entry / "model.onnx").unlink()
    (entry / "model.onnx").symlink_to(other)
    info = json.loads((entry / "info.json").read_text())
    info["sha256"] = onnx_model.file_sha256(str(other))
    (entry / "info.json").write_text(json.dumps(info))
    with pytest.raises(RuntimeError, match="is a symlink"):
        ensure_onnx_model(str(small_model), "m", ONNX_INT8, str(cache))


def test_a_path_in_info_json_is_never_followed(small_model, tmp_path, fake_export) -> None:
    cache = tmp_path / "cache"
    built = ensure_onnx_model(str(small_model), "m", ONNX_INT8, str(cache))
    info_path = _entry(built) / "info.json"
    info = json.loads(info_path.read_text())
    other = tmp_path / "other-checkout" / "model.onnx"
    other.parent.mkdir()
    other.write_text("another checkout's model")
    info.update(source=str(other.parent), path=str(other), model=str(other))
    info_path.write_text(json.dumps(info))
    again = ensure_onnx_model(str(small_model), "m", ONNX_INT8, str(cache))
    assert again.path == built.path and again.sha256 == built.sha256


def test_an_entry_built_from_another_model_or_settings_is_refused(
    small_model, tmp_path, fake_export
) -> None:
    """A planted model whose info.json hash matches it, but that records another source, other
    settings or other library versions than the inputs of the entry's key."""
    cache = tmp_path / "cache"
    built = ensure_onnx_model(str(small_model), "m", ONNX_INT8, str(cache))
    info_path = _entry(built) / "info.json"
    Path(built.path).write_text("constant vector model")
    good = json.loads(info_path.read_text())
    for key, value in [
        ("source_sha256", "0" * 64),
        ("settings", {**good["settings"], "per_channel": False}),
        ("versions", {**good["versions"], "torch": "0.0"}),
    ]:
        info_path.write_text(
            json.dumps({**good, key: value, "sha256": onnx_model.file_sha256(built.path)})
        )
        with pytest.raises(RuntimeError, match=f"another {key}"):
            ensure_onnx_model(str(small_model), "m", ONNX_INT8, str(cache))


def test_the_session_is_made_from_the_bytes_that_were_checked(tmp_path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"checked bytes")
    digest = onnx_model.file_sha256(str(path))
    assert onnx_model._read_checked(str(path), digest) == b"checked bytes"
    path.write_bytes(b"swapped after the check")
    with pytest.raises(RuntimeError, match="changed since it was checked"):
        onnx_model._read_checked(str(path), digest)
