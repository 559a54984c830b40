# One entry point for a fresh machine: everything builds the venv first.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8050
DOCS_PORT ?= 8000
BENCH ?=
OUT ?=

.PHONY: venv data demo test test-kernels gpu-check bench validate-ns3 docs docs-serve clean

# Real data the experiments and tests read: Debian's Fashion-MNIST idx files
# (/usr/share/datasets/fashion-mnist). Installed with apt when missing and apt can (root or sudo);
# otherwise one line says what to install, and the tests that need it skip.
FASHION := /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz

data:
	@test -e $(FASHION) || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y -qq dataset-fashion-mnist || { apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist; }; \
	  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo apt-get install -y -qq dataset-fashion-mnist; \
	  fi; } ; \
	test -e $(FASHION) || echo "make data: Fashion-MNIST not installed; run: apt-get install dataset-fashion-mnist"

venv: $(STAMP) data

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[test,tensorboard,flower,cluster,docs,tune]'
	@touch $(STAMP)

demo: venv
	$(BIN)/testbed demo experiments/quickstart.toml --store runs.db --port $(PORT)

# The linter first (pyproject.toml [tool.ruff]): seconds, and it names the file:line.
test: venv
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

# The tests that compare with rows recorded on one machine (marker `recorded`), again on torch's
# default CPU kernels: a fixture that only one CPU's rounding reproduces fails here, on any CPU
# (docs/development.md).
test-kernels: venv
	ATEN_CPU_CAPABILITY=default $(BIN)/python -m pytest -q -m recorded

# On a machine with a CUDA GPU, at most 8 minutes: the CUDA tests (tests/gpu: "auto" picks the
# GPU, the quickstart trains there as on the CPU, NCCL ranks give the in-process rows where two
# GPUs are there), then the shipped quickstart on the GPU.
gpu-check: venv
	TESTBED_TEST_CUDA=1 timeout 480 $(BIN)/python -m pytest -q -m cuda tests/gpu
	timeout 120 $(BIN)/testbed run experiments/quickstart.toml --set run.device=cuda --store /tmp/gpu-check.db

# The documentation site (mkdocs.yml): the reference pages generated from the code, then MkDocs
# with --strict, so a broken link, a missing page or an API docstring it cannot read fails.
docs: venv
	$(BIN)/python -m testbed.reference docs/reference
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

docs-serve: venv
	$(BIN)/python -m testbed.reference docs/reference
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

bench: venv
	$(BIN)/python -m benchmarks $(if $(FULL),--full,) $(if $(OUT),--out $(OUT),) $(BENCH)

# The DCF (both PHY settings), the MCS tables, walks of 1, 3 and 5 stations away from the access
# point and 5 stations on random waypoints beside ns-3.37, seeds 1-3, each moving cell's worst
# window beside ns-3's own run-to-run floor and speed ratio last (validation/ns3; needs libns3-dev and g++, else
# one line). FIGURE=docs/img/ns3-walk.png also draws the walks (headless Chromium); `python -m validation.ns3.run
# --figure PNG --from FILE` draws a stored run's first seed.
validate-ns3: venv
	$(BIN)/python -m validation.ns3.run $(if $(FIGURE),--figure $(FIGURE),)

clean:
	rm -rf $(VENV) site runs.db runs.db-wal runs.db-shm
