# nnrtl — one-command setup. Every target creates the virtual environment if needed.
#
#   make demo    generate a small SBE (LSTM engine) for the ZC706, simulate it, write its report
#   make test    run the test suite (what CI runs)
#   make install create .venv and install nnrtl with its test extras
#   make bench   benchmarks, JSON under build/bench/
#   make verify-arith  the full-count arithmetic verification (10^6 vectors per op and format)
#   make bench-gpu     every GPU measurement in one run, with the machine's own Python (which
#                has PyTorch and numba-cuda; no network needed): build/bench-gpu/
#   make clean   remove build products and test caches (keeps .venv and the build cache)
#   make clean-cache  empty the Verilator build cache (nnrtl cache clean)
#   make distclean   also remove .venv

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.nnrtl-installed
JOBS   ?= 2

# Verilator builds are cached where the command line caches them: $NNRTL_CACHE_DIR if
# set, else ~/.cache/nnrtl, bounded by $NNRTL_CACHE_MAX_SIZE (default 4G; see
# sim/cache.py). `make clean` keeps it, so that a clean checkout reuses the builds;
# `make clean-cache` (`nnrtl cache clean`) empties it.

DEMO_BOARD ?= zc706
DEMO_DIR   := build/demo-$(DEMO_BOARD)

.PHONY: install demo test test-slow verify-arith bench bench-gpu docs clean clean-cache distclean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

install: $(STAMP)

# The documentation tools (the `docs` extra) in the same environment.
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): pyproject.toml $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,docs]'
	touch $@

# The report is written even when the simulation is not bit-exact; make then fails.
demo: $(STAMP)
	$(BIN)/nnrtl generate sbe --board $(DEMO_BOARD) -o $(DEMO_DIR) --force
	$(BIN)/nnrtl sim sbe --board $(DEMO_BOARD) --seed 1 -o $(DEMO_DIR); status=$$?; \
	$(BIN)/nnrtl report $(DEMO_DIR) && exit $$status

test: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --dist worksteal -m "not slow" -q --durations=20

test-slow: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --dist worksteal -m slow -q

verify-arith: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) -m slow -k arith -q -rA

bench: $(STAMP)
	$(BIN)/python -m nnrtl.gen.bench --out build/bench

# On a GPU machine whose Python already has PyTorch and numba-cuda (the `gpu` extra):
# nnrtl installed into it without its dependencies, the persistent kernel checked against
# PyTorch at the paper's sizes (forward and backward), then the Fig. 1 sweep.
GPU_PYTHON ?= python3
GPU_OUT    ?= build/bench-gpu
bench-gpu:
	$(GPU_PYTHON) -m pip install --quiet --no-deps --no-build-isolation -e .
	mkdir -p $(GPU_OUT)
	for cell in lstm gru; do for size in 1152 2048; do \
	  $(GPU_PYTHON) -m nnrtl.gen.cli baseline persistent-rnn --device cuda --cell $$cell \
	    --input-size $$size --hidden-size $$size --batch 4 --seq-len 64 --backward --json \
	    >> $(GPU_OUT)/persistent_rnn_checks.jsonl || exit 1; done; done
	$(GPU_PYTHON) -m nnrtl.gen.bench --only persistent_rnn --out $(GPU_OUT)
	$(GPU_PYTHON) -m nnrtl.gen.farnn.studies.bench_hybrid --device cuda --out $(GPU_OUT)

# The documentation site, warnings as errors: build/docs/index.html.
docs: $(DOCS_STAMP)
	$(BIN)/python -m sphinx -W --keep-going -q -b html docs build/docs
	@echo "documentation: build/docs/index.html"

clean:
	rm -rf build .pytest_cache .hypothesis
	@echo "kept the Verilator build cache ($${NNRTL_CACHE_DIR:-$$HOME/.cache/nnrtl}); make clean-cache empties it"

clean-cache: $(STAMP)
	$(BIN)/nnrtl cache clean

distclean: clean
	rm -rf $(VENV) *.egg-info
