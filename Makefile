# foundation-ai — every target sets up what it needs first (a virtual environment in .venv).
#   make run      set up, then run one agent turn on the bundled SmolLM2 model (no API key)
#   make test     set up, then run the whole test suite
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
# llama.cpp's AMX kernels crash (SIGILL) on some VMs whose CPUs advertise AMX: build without them.
CMAKE_ARGS ?= -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF

.PHONY: setup run chat test check bench docs durable-proof clean fuzz

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The `local` extra compiles llama-cpp-python from source once (about 5 minutes on 2 cores);
# pip caches the built wheel, so later set-ups take seconds.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	@echo ">>> installing foundation-ai with the local model (first time: compiles llama.cpp, ~5 min)"
	CMAKE_ARGS="$(CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/python -m pip install --progress-bar on -e ".[local,test,dev]"
	touch $@

setup: $(VENV)/.installed

run: setup
	$(BIN)/foundation-ai run "$(PROMPT)"

chat: setup
	$(BIN)/foundation-ai chat

test: setup
	$(BIN)/python -m pytest -q

check: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: setup
	$(BIN)/python -m pip install --quiet -e ".[bench]"
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
