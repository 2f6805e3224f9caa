# Each target sets up .venv itself: on a fresh machine `make demo` and `make test` just work.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
PIP     := $(BIN)/python -m pip
STAMP   := $(VENV)/.installed
# One torch thread: on this 2-core machine a second thread slows small steps down badly.
export OMP_NUM_THREADS ?= 1
export RLX_NUM_THREADS ?= 1

.PHONY: demo test test-slow bench lint setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints-dev.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	# torch first, from the pinned CPU build, so nothing later resolves a CUDA build
	$(PIP) install -q -c constraints-dev.txt torch
	$(PIP) install -q -c constraints-dev.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

clean:
	rm -rf $(VENV) build *.egg-info
