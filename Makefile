# corpus-chunker: `make demo` and `make test` set everything up from a fresh clone.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed
export TIKTOKEN_CACHE_DIR := $(CURDIR)/.cache/tiktoken
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export HF_HUB_DISABLE_PROGRESS_BARS := 1
# Quiet installs: no "new release of pip" notice, and -qq also hides the build backend's
# banners (setuptools' "Editable installation" warning); errors still show.
export PIP_DISABLE_PIP_VERSION_CHECK := 1
PIP_QUIET := -qq
# Elsewhere than this machine (whose pip finds the CPU wheel on local disk), point this at
# https://download.pytorch.org/whl/cpu so torch comes without gigabytes of CUDA libraries.
TORCH_INDEX ?=
DEMO_OUT ?= out/demo
DEMO_FLAGS ?=

.PHONY: setup demo test test-fast fuzz lint format bench eval clean

setup: $(STAMP)

# torch first: the pinned CPU wheel; anything else would pull gigabytes of CUDA.
$(STAMP): setup.py constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install $(PIP_QUIET) -U pip
	$(PIP) install $(PIP_QUIET) "torch==2.13.0" -c constraints.txt $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PIP) install $(PIP_QUIET) -c constraints.txt -e ".[gcp,dev,load]"
	$(PY) -c "from transforms.chunking.tokens import seed_tiktoken_cache; print('tiktoken files in', seed_tiktoken_cache())"
	touch $(STAMP)

demo: setup
	$(PY) -m pipelines.chunk_corpus --input 'samples/*/*' --output $(DEMO_OUT) --overwrite \
		--runner=DirectRunner $(DEMO_FLAGS)

test: setup
	$(PY) -m pytest -q -p no:cacheprovider

# The fuzz tests with many more examples than make test gives them (about 10 minutes).
fuzz: setup
	CORPUS_CHUNKER_FUZZ_EXAMPLES=$${CORPUS_CHUNKER_FUZZ_EXAMPLES:-2000} $(PY) -m pytest -q -p no:cacheprovider tests/test_fuzz.py

test-fast: setup
	$(PY) -m pytest -q -m "not slow and not runners"

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: setup
	$(PIP) install $(PIP_QUIET) -c constraints.txt -e ".[bench]"
	$(PY) bench/chunkers.py
	$(PY) bench/embedding.py

# Retrieval quality on the development set (eval/README.md); 41.5 min on 2 busy shared cores.
eval: setup
	$(PIP) install -q -c constraints.txt -e ".[eval]"
	$(PY) -m eval.run_eval $(EVAL_FLAGS)

clean:
	rm -rf $(VENV) .cache out *.egg-info
