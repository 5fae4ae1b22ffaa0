"""The package that workers install (--setup_file's sdist, or a wheel) holds every module.

A module missing from the sdist only shows on remote workers, as an ImportError in the middle
of a job; here it shows at once.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import apache_beam
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipelines", "commands", "runs", "transforms", "schemas")


def _modules() -> list[str]:
    """Every module of the packages, as a relative path ('transforms/chunking/code.py')."""
    found = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "__pycache__" not in path.parts:
                found.append(path.relative_to(ROOT).as_posix())
    return sorted(found)


def _pip(*args: str, cwd: Path) -> None:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args]
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist, built the way Beam's stager builds --setup_file (`build`, else setup.py)."""
    dist = tmp_path_factory.mktemp("sdist")
    if importlib.util.find_spec("build"):
        command = [sys.executable, "-m", "build", "--no-isolation", "--sdist", "--outdir"]
    else:
        command = [sys.executable, "setup.py", "-q", "sdist", "--dist-dir"]
    subprocess.run([*command, str(dist)], cwd=ROOT, check=True, capture_output=True)
    (archive,) = dist.glob("*.tar.gz")
    return archive


@pytest.fixture(scope="module")
def wheel(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from the sdist (what a worker's pip does with workflow.tar.gz)."""
    dist = tmp_path_factory.mktemp("wheel")
    _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(sdist), cwd=dist)
    (built,) = dist.glob("*.whl")
    return built


def test_the_package_has_modules_to_check():
    modules = _modules()
    assert "pipelines/chunk_corpus.py" in modules
    assert "transforms/chunking/routing.py" in modules
    assert "schemas/arrow.py" in modules


def test_sdist_holds_every_module(sdist):
    with tarfile.open(sdist) as archive:
        # Members are "corpus_chunker-0.1.0/transforms/..."
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert "setup.py" in names
    assert set(_modules()) <= names, sorted(set(_modules()) - names)


def test_wheel_holds_every_module(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert set(_modules()) <= names, sorted(set(_modules()) - names)


def test_installed_wheel_imports_from_elsewhere(wheel, tmp_path):
    target = tmp_path / "site"
    _pip("install", "--no-deps", "--target", str(target), str(wheel), cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    modules = [
        m.removesuffix(".py").replace("/", ".").removesuffix(".__init__") for m in _modules()
    ]
    # This venv also has the editable install; the target goes first on sys.path, and the
    # check below makes sure every module came from there and not from the repo.
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    module = importlib.import_module(name)\n"
        f"    assert module.__file__.startswith({str(target)!r}), module.__file__\n"
        "import pipelines.chunk_corpus\n"
        "print(pipelines.chunk_corpus.run.__module__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=elsewhere, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "pipelines.chunk_corpus"


def test_worker_image_matches_the_submitting_environment():
    """The SDK image must carry the Beam and Python versions that submit the job, and the
    torch that constraints.txt pins (a mismatch fails only on the workers)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert f"FROM apache/beam_python{python}_sdk:{apache_beam.__version__}\n" in dockerfile
    (torch_pin,) = re.findall(r"^torch==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M)
    assert f"ARG TORCH_VERSION={torch_pin}\n" in dockerfile
    (cache_dir,) = re.findall(r"TIKTOKEN_CACHE_DIR=(\S+)", dockerfile)
    assert f"seed_tiktoken_cache('{cache_dir}')" in dockerfile
