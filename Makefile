# Every target sets up .venv itself (idempotent: a stamp file is rebuilt only when the
# dependency files change), so `make demo` and `make test` work on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONHASHSEED := 0
# The browser the HTML report test opens (Debian's package puts it here).
CHROMIUM := /usr/bin/chromium
# Ray: no usage stats, quiet dashboard-less local clusters in demos and tests.
export RAY_USAGE_STATS_ENABLED := 0

.PHONY: venv demo test test-fast lint browser bench clean

venv: $(STAMP)

# The example plugin package (docs/extending.md) goes in too: the tests run it by entry point.
$(STAMP): pyproject.toml constraints.txt examples/grokking_plugins/pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: the pin resolves to a CPU wheel here (no multi-GB CUDA download).
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	$(BIN)/pip install -q -c constraints.txt -e examples/grokking_plugins
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/sweepgrok launch search_spaces/grids/quickstart.yaml --storage runs --fresh
	$(BIN)/sweepgrok analyze runs/quickstart --by model.norm,model.attention \
		--baseline model.norm=none,model.attention=softmax --plots runs/quickstart/plots

lint: $(STAMP)
	$(BIN)/ruff check sweepgrok tests benchmarks analysis
	$(BIN)/mypy sweepgrok analysis benchmarks

# Debian's chromium for the HTML report's browser test (tests/analysis/test_html_report.py): installed
# when it is missing and apt-get can run (as root); otherwise nothing, and that test skips
# saying why. Never fails the build.
browser:
	@if [ ! -x $(CHROMIUM) ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing chromium (apt-get) for the HTML report's browser test"; \
		{ DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } \
		|| echo "could not install chromium: the HTML report's browser test will skip"; \
	fi

# The fast tests on two pytest-xdist workers, one per core of the 2-core machines it is
# measured on (docs/development.md): they share no port, working directory or Ray cluster (each
# worker is a process of its own; the two that start Ray give it a temp dir of their own).
# The slow ones (Ray end-to-end: clusters, signals, killed workers, timeouts sized for a
# machine of their own) run one at a time after them.
TEST_WORKERS ?= 2
# Not yet the default: both tiers in one session (-n 4 --dist loadgroup; tests/conftest.py
# orders the slow tests first), unmeasured on a quiet machine (docs/development.md).
test: $(STAMP) lint browser
	$(BIN)/pytest -q -m "not slow" -n $(TEST_WORKERS) tests
	$(BIN)/pytest -q -m slow tests

test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not slow" -n $(TEST_WORKERS) tests

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
