"""The embedding model as an ONNX Runtime session: float32, or int8 with dynamic quantization.

The ONNX files are made here, offline, from the sentence-transformers folder itself (no
download): the whole module stack (transformer, pooling, normalisation) is exported with
`torch.onnx.export`, and the int8 file is that export quantized with onnxruntime's
`quantize_dynamic`, per channel. Each file is built once into a cache folder keyed by the
source model's files and these settings, written under a temporary name and renamed into place,
so workers that build at the same time never see half a file. The file's sha256 and the
settings form the model id that goes into the config fingerprint, so a run never mixes the
vectors of two backends.

sentence-transformers' own `backend="onnx"` needs `optimum-onnx`, which requires
transformers < 4.58; this project runs transformers 5, so the session is driven directly.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from transforms.embedding.models import (  # noqa: F401 - the backends' names, re-exported
    BACKENDS,
    DEFAULT_BACKEND,
    ONNX,
    ONNX_INT8,
    TORCH,
)

CACHE_ENV = "CORPUS_CHUNKER_CACHE_DIR"
_FORMAT = 1  # bump when the export code changes what it writes
_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class OnnxSettings:
    """What decides the bytes of an ONNX file, besides the source model and library versions."""

    backend: str
    opset: int = 17
    # Dynamic int8 (onnx-int8 only). Per tensor gave a cosine of 0.946 to float32 (0.88 at
    # worst) on real chunks; per channel 0.994. Only MatMul weights are quantized: the
    # embedding tables stay float32 (a lookup costs no multiplications).
    per_channel: bool = True
    reduce_range: bool = False
    weight_type: str = "QInt8"
    op_types: tuple[str, ...] = ("MatMul",)

    def __post_init__(self) -> None:
        if self.backend not in (ONNX, ONNX_INT8):
            raise ValueError(f"no ONNX file for backend {self.backend!r}")

    def describe(self) -> str:
        """Short, stable text of the settings, for the model id."""
        if self.backend == ONNX:
            return f"fp32,opset{self.opset}"
        return (
            f"int8-dynamic,{'per-channel' if self.per_channel else 'per-tensor'},"
            f"{self.weight_type},{'+'.join(self.op_types)}"
            f"{',reduce-range' if self.reduce_range else ''},opset{self.opset}"
        )


@dataclass(frozen=True)
class OnnxModel:
    """One built ONNX file: where it is, its hash, and the id its vectors are recorded under."""

    path: str
    sha256: str
    model_id: str


def cache_root(cache_dir: str | None = None) -> str:
    """--embedding_cache_dir, else $CORPUS_CHUNKER_CACHE_DIR, else ~/.cache/corpus-chunker."""
    return os.path.abspath(
        cache_dir
        or os.environ.get(CACHE_ENV)
        or os.path.join(os.path.expanduser("~"), ".cache", "corpus-chunker")
    )


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _model_files(model_path: str) -> list[str]:
    found = []
    for folder, dirs, files in os.walk(model_path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(folder, n) for n in sorted(files) if not n.startswith("."))
    return found


# source_hash's results in this process, by the folder's files and what stat says of each (a
# file rewritten in place changes its size or its mtime_ns, and is hashed again).
_source_hashes: dict[tuple, str] = {}


def source_hash(model_path: str) -> str:
    """sha256 over every file of a model folder (relative name and content), in name order."""
    files = _model_files(model_path)
    stats = []
    for path in files:
        st = os.stat(path)
        stats.append((path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    key = (os.path.abspath(model_path), tuple(stats))
    if key not in _source_hashes:
        digest = hashlib.sha256()
        for path in files:
            digest.update(os.path.relpath(path, model_path).encode("utf-8") + b"\0")
            digest.update(file_sha256(path).encode("ascii"))
        _source_hashes[key] = digest.hexdigest()
    return _source_hashes[key]


def _versions() -> dict[str, str]:
    """Versions of what writes the file (read from the installed metadata: no import)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("torch", "transformers", "sentence-transformers", "onnx"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "missing"
    # The GPU build of onnxruntime is another distribution with the same quantizer.
    for name in ("onnxruntime", "onnxruntime-gpu"):
        try:
            found["onnxruntime"] = version(name)
            break
        except PackageNotFoundError:
            found["onnxruntime"] = "missing"
    return found


def _require_onnxruntime() -> None:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as e:
        raise ImportError(
            "--embedding_backend=onnx and onnx-int8 need `pip install onnxruntime onnx` "
            "(or `pip install corpus-chunker`, which brings them)"
        ) from e


def model_id(model_name: str, settings: OnnxSettings, sha256: str) -> str:
    """The id recorded with the vectors: model, backend, settings and the file's hash."""
    return f"{model_name}|{settings.backend}|{settings.describe()}|sha256:{sha256[:16]}"


def parse_model_id(recorded: str) -> tuple[str, str, str | None]:
    """(model name, backend, sha256 prefix) of what a run recorded as its embedding model: a
    model id of `model_id`, or a plain model name (torch)."""
    parts = recorded.split("|")
    if len(parts) < 2:
        return recorded, TORCH, None
    digest = next((p.removeprefix("sha256:") for p in parts if p.startswith("sha256:")), None)
    return parts[0], parts[1], digest


def load_encoder(recorded: str, device: str = "auto") -> Any:
    """The encoder that made a run's vectors, from what the run recorded as its model (a model
    id or a plain name): sentence-transformers for torch, else the ONNX file of that backend,
    which must be the one whose hash the run recorded. Both have `encode` and `tokenizer`."""
    from transforms.embedding.models import resolve_model_path

    name, backend, digest = parse_model_id(recorded)
    path = resolve_model_path(name)
    if backend == TORCH:
        from sentence_transformers import SentenceTransformer

        # None: sentence-transformers takes a GPU where there is one, as `auto` means
        return SentenceTransformer(path, device=None if device == "auto" else device)
    onnx = ensure_onnx_model(path, name, backend)
    if digest and not onnx.sha256.startswith(digest):
        raise ValueError(
            f"the run's vectors come from {recorded}, but the {backend} file here has sha256 "
            f"{onnx.sha256[:16]}: texts would be embedded by another model"
        )
    return OnnxSentenceEncoder(
        path, onnx.path, device, one_text_a_pass=backend == ONNX_INT8, sha256=onnx.sha256
    )


def _cache_key(model_path: str, settings: OnnxSettings, source_sha256: str | None = None) -> str:
    payload = {
        "format": _FORMAT,
        "source": source_sha256 or source_hash(model_path),
        "settings": asdict(settings),
        "versions": _versions(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:24]


def _whole_stack(model: Any, input_names: Sequence[str]) -> Any:
    """The sentence-transformers module stack as one module with tensor inputs (for export)."""
    import torch

    class SentenceEmbedding(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: Any) -> Any:
            features = dict(zip(input_names, inputs, strict=True))
            return self.model(features)["sentence_embedding"]

    return SentenceEmbedding().eval()


def _export_fp32(model_path: str, target: str, opset: int) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_path, device="cpu")
    tokenizer = model.tokenizer
    input_names = list(tokenizer.model_input_names)
    sample = model.tokenize(["an example sentence to trace", "and a second, longer one to pad"])
    inputs = tuple(sample[name] for name in input_names)
    wrapped = _whole_stack(model, input_names)
    axes = {name: {0: "batch", 1: "sequence"} for name in input_names}
    axes["sentence_embedding"] = {0: "batch"}
    with torch.no_grad():
        torch.onnx.export(
            wrapped,
            inputs,
            target,
            input_names=input_names,
            output_names=["sentence_embedding"],
            dynamic_axes=axes,
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,  # the TorchScript exporter: the dynamo one needs onnxscript
        )


def _quantize(source: str, target: str, settings: OnnxSettings) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        source,
        target,
        per_channel=settings.per_channel,
        reduce_range=settings.reduce_range,
        weight_type=getattr(QuantType, settings.weight_type),
        op_types_to_quantize=list(settings.op_types),
    )


class _QuietQuantizer(logging.Filter):
    """Drops the quantizer's advice to pre-process, logged on every call (it is no error)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def _build(model_path: str, settings: OnnxSettings, folder: str) -> None:
    """Write model.onnx for `settings` into `folder` (which exists and is empty)."""
    quiet = _QuietQuantizer()
    logging.getLogger().addFilter(quiet)
    try:
        with warnings.catch_warnings():
            # The tracer's warnings are about branches on shapes that hold for every input
            # here (the attention mask always matches the sequence); the float32 file's
            # vectors are tested against torch's.
            warnings.simplefilter("ignore")
            _build_files(model_path, settings, folder)
    finally:
        logging.getLogger().removeFilter(quiet)


def _build_files(model_path: str, settings: OnnxSettings, folder: str) -> None:
    target = os.path.join(folder, "model.onnx")
    if settings.backend == ONNX:
        _export_fp32(model_path, target, settings.opset)
        return
    fp32 = os.path.join(folder, "fp32.onnx")
    _export_fp32(model_path, fp32, settings.opset)
    _quantize(fp32, target, settings)
    os.remove(fp32)


def ensure_onnx_model(
    model_path: str,
    model_name: str,
    backend: str,
    cache_dir: str | None = None,
    expected_sha256: str | None = None,
) -> OnnxModel:
    """The ONNX file of `backend` for the model folder, built into the cache when missing.

    The cache holds data, not trust: the folders and files of the entry must be this user's
    (or root's) and writable by no one else, none of them a symlink; the entry's info.json
    must record this source model, these settings and these library versions (the inputs of
    its key); and the file's sha256 must be the one recorded there. The file is always the
    entry's own model.onnx: no path read from info.json is followed. `expected_sha256` (the
    launcher's build, on a worker, or the hash a run recorded): a cached or rebuilt file with
    another hash raises, since its vectors would differ from the ones the run recorded.
    """
    _require_onnxruntime()
    settings = OnnxSettings(backend)
    root = cache_root(cache_dir)
    onnx_dir = os.path.join(root, "onnx")
    os.makedirs(root, mode=0o755, exist_ok=True)  # 0755 whatever the umask (a 002 one too)
    source_sha256 = source_hash(model_path)
    key = _cache_key(model_path, settings, source_sha256)
    final = os.path.join(onnx_dir, f"{settings.backend}-{key}")
    info_path = os.path.join(final, "info.json")
    os.makedirs(onnx_dir, mode=0o755, exist_ok=True)
    for folder in (root, onnx_dir):
        _check_private(folder, follow=folder == root)
    if not os.path.lexists(final):
        # Built beside its final place and renamed in one step: a second worker building at
        # the same time loses the rename and uses the winner's folder.
        tmp = tempfile.mkdtemp(prefix=".build-", dir=onnx_dir)
        try:
            _LOG.warning("building the %s model for %s in %s", backend, model_path, final)
            _build(model_path, settings, tmp)
            built = os.path.join(tmp, "model.onnx")
            os.chmod(built, 0o644)
            info = {
                "source": model_path,  # where it was built from: shown, never read back
                "source_sha256": source_sha256,
                "settings": asdict(settings),
                "versions": _versions(),
                "sha256": file_sha256(built),
            }
            fd = os.open(
                os.path.join(tmp, "info.json"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644
            )
            with os.fdopen(fd, "w") as f:
                json.dump(info, f, indent=2, sort_keys=True)
            os.chmod(tmp, 0o755)
            try:
                os.rename(tmp, final)
            except OSError:
                if not os.path.exists(info_path):
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    _check_private(final, follow=False)
    path = os.path.join(final, "model.onnx")
    for name in (info_path, path):
        _check_private(name, follow=False)
    recorded = _read_info(info_path)
    wanted = {
        "source_sha256": source_sha256,
        "settings": asdict(settings),
        "versions": _versions(),
    }
    for key, value in wanted.items():
        if _jsonable(recorded.get(key)) != _jsonable(value):
            raise RuntimeError(
                f"the cached ONNX model in {final} records another {key} than this run's "
                f"model and settings: it was not built from {model_path}; delete {final} to "
                "rebuild it"
            )
    sha = file_sha256(path)
    if sha != recorded.get("sha256"):
        raise RuntimeError(
            f"the cached ONNX model {path} is damaged (sha256 {sha[:16]}, built as "
            f"{str(recorded.get('sha256'))[:16]}); delete {final} to rebuild it"
        )
    if expected_sha256 is not None and sha != expected_sha256:
        raise RuntimeError(
            f"the {backend} model at {path} (sha256 {sha[:16]}) is not the one this run was "
            f"started with (sha256 {expected_sha256[:16]}): give the workers the launcher's "
            f"cache (--embedding_cache_dir on a shared file system, or the worker image)"
        )
    return OnnxModel(path=path, sha256=sha, model_id=model_id(model_name, settings, sha))


def _jsonable(value: Any) -> Any:
    """`value` as it reads back from JSON (tuples become lists), for comparing with info.json."""
    return json.loads(json.dumps(value, sort_keys=True))


def _check_private(path: str, follow: bool) -> None:
    """Refuse a cache folder or file that someone else could have written: one owned by
    another user (root aside), writable by its group or by everyone, or (unless `follow`, for
    the cache root the user named) a symlink."""
    info = os.stat(path) if follow else os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise RuntimeError(
            f"the ONNX model cache's {path} is a symlink: refused (a cache entry holds its own "
            f"files); delete it to rebuild"
        )
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is not None and info.st_uid not in (uid, 0):
        raise RuntimeError(
            f"the ONNX model cache's {path} is owned by another user (uid {info.st_uid}): "
            "refused, as its model could be anyone's; use a cache folder of your own "
            f"(--embedding_cache_dir or ${CACHE_ENV})"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise RuntimeError(
            f"the ONNX model cache's {path} is writable by others (mode "
            f"{stat.S_IMODE(info.st_mode):04o}): refused, as its model could be anyone's; "
            f"`chmod go-w` it or use a cache folder of your own (--embedding_cache_dir or "
            f"${CACHE_ENV})"
        )


def _read_info(info_path: str) -> dict[str, Any]:
    """The entry's info.json (read without following a symlink), a JSON object."""
    fd = os.open(info_path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, encoding="utf-8") as f:
        try:
            info = json.load(f)
        except ValueError as e:
            raise RuntimeError(f"the cached ONNX model's {info_path} is not JSON: {e}") from e
    if not isinstance(info, dict):
        raise RuntimeError(f"the cached ONNX model's {info_path} is not a JSON object")
    return info


def providers_for(device: str) -> list[str]:
    """ONNX Runtime execution providers for --embedding_device (cuda: CUDA first)."""
    import onnxruntime

    available = onnxruntime.get_available_providers()
    if device == "cuda" or (device == "auto" and "CUDAExecutionProvider" in available):
        if "CUDAExecutionProvider" not in available:
            raise RuntimeError(
                "--embedding_device=cuda: onnxruntime has no CUDAExecutionProvider here "
                f"(providers: {', '.join(available)}); install onnxruntime-gpu on a GPU machine"
            )
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def _read_checked(path: str, sha256: str) -> bytes:
    """The bytes of `path` (not through a symlink), which must hash to `sha256`."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise RuntimeError(
            f"the ONNX model {path} changed since it was checked (sha256 {actual[:16]}, "
            f"expected {sha256[:16]}): refused"
        )
    return data


class _TransformersInputs:
    """ModelInputs' calls on transformers, for a model folder without tokenizer.json."""

    def __init__(self, path: str, max_length: int) -> None:
        from transformers import AutoTokenizer

        self.max_length = max_length
        self._tok = AutoTokenizer.from_pretrained(path, model_max_length=max_length)

    def __call__(self, texts: Sequence[str], add_special_tokens: bool = True) -> dict[str, Any]:
        return self._tok(list(texts), add_special_tokens=add_special_tokens)

    def batch(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        got = self._tok(
            list(texts),
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="np",
        )
        return {name: value.astype(np.int64) for name, value in got.items()}


def model_inputs(path: str, max_length: int) -> Any:
    """What turns texts into the model's inputs: the folder's tokenizer.json read by
    `tokenizers` (transforms/chunking/word_pieces.py), else transformers' tokenizer."""
    from transforms.chunking.word_pieces import ModelInputs, has_fast_tokenizer

    if has_fast_tokenizer(path):
        return ModelInputs(path, max_length)
    return _TransformersInputs(path, max_length)


class OnnxSentenceEncoder:
    """A sentence-transformers model run by ONNX Runtime: same tokenizer, same call shape.

    `encode` mirrors the subset of `SentenceTransformer.encode` the embed stage uses, and
    `tokenizer` / `max_seq_length` are the model's own, so the handler treats both alike.
    """

    def __init__(
        self,
        model_path: str,
        onnx_path: str,
        device: str = "auto",
        one_text_a_pass: bool = False,
        sha256: str | None = None,
    ) -> None:
        """`one_text_a_pass`: every text is its own forward pass (dynamic int8 scales a pass by
        its own range, so only then is a text's vector a function of the text alone); the
        passes then run side by side on single-threaded runs, one per core, which is faster
        on a CPU than one multi-threaded run of a tiny pass. `sha256`: the file's bytes are
        read once, checked to have that hash, and the session made from those very bytes (no
        file swapped in between the check and the load)."""
        import onnxruntime

        from transforms.embedding.models import read_model_info

        info = read_model_info(model_path)
        self.max_seq_length = info.max_seq_length
        self.tokenizer = model_inputs(model_path, info.max_seq_length)
        options = onnxruntime.SessionOptions()
        # One thread per core of this worker, as torch does; OMP_NUM_THREADS caps both.
        threads = os.environ.get("OMP_NUM_THREADS")
        cores = int(threads) if threads and threads.isdigit() else (os.cpu_count() or 1)
        self._pool: ThreadPoolExecutor | None = None
        if one_text_a_pass and providers_for(device)[0] == "CPUExecutionProvider":
            options.intra_op_num_threads = 1
            self._pool = ThreadPoolExecutor(max(1, cores), thread_name_prefix="onnx-pass")
        elif threads and threads.isdigit():
            options.intra_op_num_threads = int(threads)
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        model: str | bytes = onnx_path
        if sha256 is not None:
            model = _read_checked(onnx_path, sha256)
        self.session = onnxruntime.InferenceSession(
            model, sess_options=options, providers=providers_for(device)
        )
        self.on_gpu = self.session.get_providers()[0] == "CUDAExecutionProvider"
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.dimension = int(self.session.get_outputs()[0].shape[-1])

    def _one(self, text: str) -> np.ndarray:
        features = self.tokenizer.batch([text])
        feeds = {name: features[name] for name in self.input_names}
        return self.session.run(None, feeds)[0]  # InferenceSession.run is thread-safe

    def get_embedding_dimension(self) -> int:
        return self.dimension

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        normalize_embeddings: bool = True,
        **_: Any,
    ) -> np.ndarray:
        """Vectors of `texts`, `batch_size` at a time (each pass padded to its longest); one
        text a pass, in parallel, when the encoder was made `one_text_a_pass`."""
        out = []
        if self._pool is not None:
            out = list(self._pool.map(self._one, texts))
            texts = ()  # done
        for start in range(0, len(texts), batch_size):
            features = self.tokenizer.batch(texts[start : start + batch_size])
            feeds = {name: features[name] for name in self.input_names}
            out.append(self.session.run(None, feeds)[0])
        vectors = (
            np.concatenate(out).astype(np.float32)
            if out
            else np.zeros((0, self.dimension), np.float32)
        )
        if normalize_embeddings:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.maximum(norms, 1e-12)
        return vectors


def main(argv: Sequence[str] | None = None) -> None:
    """Build the ONNX models into the cache ahead of a run (the worker image does this)."""
    import argparse

    from transforms.embedding.models import DEFAULT_MODEL, resolve_model_path

    parser = argparse.ArgumentParser(
        prog="python -m transforms.embedding.onnx_model", description=main.__doc__
    )
    parser.add_argument("--embedding_model", default=DEFAULT_MODEL)
    parser.add_argument(
        "--embedding_backend", action="append", choices=[ONNX, ONNX_INT8], default=None
    )
    parser.add_argument("--embedding_cache_dir", default=None)
    args = parser.parse_args(argv)
    path = resolve_model_path(args.embedding_model)
    for backend in args.embedding_backend or [ONNX_INT8]:
        built = ensure_onnx_model(path, args.embedding_model, backend, args.embedding_cache_dir)
        print(f"{built.model_id}\n  {built.path}")


if __name__ == "__main__":
    main()
