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
# Bytecode is cached (__pycache__/, ignored by git) even where the environment says not to:
# without it each of the suite's ~60 Python processes compiles the project again, and each
# pytest worker rewrites the asserts of every test module again (5 s of CPU a worker).
unexport PYTHONDONTWRITEBYTECODE
# Quiet installs: no "new release of pip" notice, and -qq also hides the build backend's
# banners (setuptools' "Editable installation" warning); errors still show.
export PIP_DISABLE_PIP_VERSION_CHECK := 1
PIP_QUIET := -qq
# Elsewhere than this machine (whose pip finds the CPU wheel on local disk), point this at
# https://download.pytorch.org/whl/cpu so torch comes without gigabytes of CUDA libraries.
TORCH_INDEX ?=
DEMO_OUT ?= out/demo
DEMO_FLAGS ?=

.PHONY: setup demo test test-fast bench-smoke fuzz lint format bench eval clean

setup: $(STAMP)

# torch first: the pinned CPU wheel; anything else would pull gigabytes of CUDA.
$(STAMP): setup.py constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install $(PIP_QUIET) -U pip
	$(PIP) install $(PIP_QUIET) "torch==2.13.0" -c constraints.txt $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PIP) install $(PIP_QUIET) -c constraints.txt -e ".[gcp,dev,load,qdrant]"
	$(PY) -c "from transforms.chunking.tokens import seed_tiktoken_cache; print('tiktoken files in', seed_tiktoken_cache())"
	touch $(STAMP)

demo: setup
	$(PY) -m pipelines.chunk_corpus --input 'samples/*/*' --output $(DEMO_OUT) --overwrite \
		--runner=DirectRunner $(DEMO_FLAGS)

# The tests in parallel, a test file one unit of work (--dist loadfile), so that what its
# module fixtures build is built once. Two workers per core: the suite waits (on job
# subprocesses, servers, time limits) a third of its time; on 2 cores 4 workers took 389 s and
# 2 took 507 s. TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= $(shell n=$$(( $$(nproc) * 2 )); [ $$n -gt 8 ] && n=8; echo $$n)
# Files are handed out in tests/conftest.py's order (its LONGEST_FIRST first), not xdist's
# default of the files with the most tests first, which left the few-test, whole-job files
# (the crash, bad-input and determinism tests) to the end. The bench scripts' smoke runs
# (marked bench) are left out: make bench-smoke runs them, and .ci/run after make test.
test: setup
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		-m "not bench" $(TEST_FLAGS)

# Every script of bench/ at a tiny size (tests/e2e/test_bench.py): it runs and prints its table.
bench-smoke: setup
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist load -m bench $(TEST_FLAGS)

# Every property test (hypothesis marks them) with many more examples than make test gives.
fuzz: setup
	$(PY) -m pytest -q -p no:cacheprovider -m hypothesis --hypothesis-profile=fuzz $(FUZZ_FLAGS)

# The unit tier: no whole job, no real service, no real model (under 2 minutes on 2 cores).
test-fast: setup
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		-m "not e2e and not slow and not runners" $(TEST_FLAGS)

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
