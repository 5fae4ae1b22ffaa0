"""What the launcher checks and prepares before a run embeds: the device and the model file.

`--embedding_device=cuda` without a GPU fails here, before any output is touched, when the
runner runs the workers on this machine; elsewhere each worker checks its own device when it
loads the model. The ONNX backends' file is built (or found) here once, so its hash can go into
the model id of the config fingerprint before the first chunk id is made.
"""

from __future__ import annotations

from dataclasses import dataclass

from transforms.embedding.onnx_model import BACKENDS, TORCH, OnnxSettings

# Runners whose workers run on the submitting machine (Beam's names, lower case).
LOCAL_RUNNERS = ("directrunner", "fnapirunner", "bundlebaseddirectrunner", "switchingdirectrunner")


def runs_here(runner: str | None) -> bool:
    """Whether --runner puts the workers on this machine (no --runner: the DirectRunner)."""
    name = (runner or "DirectRunner").lower().rsplit(".", 1)[-1]
    return name in LOCAL_RUNNERS or name == "direct"


def check_device(device: str, backend: str) -> None:
    """Raise ValueError, naming the flag, when --embedding_device=cuda has no GPU to run on."""
    if device != "cuda":
        return
    if backend == TORCH:
        import torch

        if not torch.cuda.is_available():
            raise ValueError(
                "--embedding_device=cuda: torch sees no CUDA GPU on this machine "
                "(torch.cuda.is_available() is False); use --embedding_device=cpu or auto"
            )
        return
    try:
        import onnxruntime
    except ImportError:
        return  # the backend's own error, naming the pip install, comes next
    providers = onnxruntime.get_available_providers()
    if "CUDAExecutionProvider" not in providers:
        raise ValueError(
            f"--embedding_device=cuda: onnxruntime has no CUDA provider on this machine "
            f"(available: {', '.join(providers)}); use --embedding_device=cpu, or install "
            "onnxruntime-gpu on a GPU machine"
        )
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available():
        raise ValueError(
            "--embedding_device=cuda: onnxruntime-gpu is installed but no CUDA GPU is "
            "visible (torch.cuda.is_available() is False); use --embedding_device=cpu or auto"
        )


@dataclass(frozen=True)
class PreparedModel:
    model_id: str  # recorded in the fingerprint, the manifest and the embedding_model column
    onnx_sha256: str | None  # the file every worker must use (ONNX backends)


def prepare_model(
    model_name: str, path: str, backend: str, cache_dir: str | None, build: bool = True
) -> PreparedModel:
    """The model id of a run; for the ONNX backends the file is built or found first.

    Without `build` (an estimate, which embeds nothing) the id names the backend and its
    settings but not the file hash.
    """
    if backend not in BACKENDS:
        raise ValueError(f"--embedding_backend must be one of {BACKENDS}, got {backend!r}")
    if backend == TORCH:
        return PreparedModel(model_name, None)
    if not build:
        return PreparedModel(f"{model_name}|{backend}|{OnnxSettings(backend).describe()}", None)
    from transforms.embedding.onnx_model import ensure_onnx_model

    try:
        built = ensure_onnx_model(path, model_name, backend, cache_dir)
    except ImportError as e:
        raise ValueError(f"--embedding_backend={backend}: {e}") from e
    except Exception as e:  # an export that fails names the flag and the model, not a trace
        raise ValueError(
            f"--embedding_backend={backend}: cannot build the ONNX model of {path}: "
            f"{type(e).__name__}: {e}"
        ) from e
    return PreparedModel(built.model_id, built.sha256)
