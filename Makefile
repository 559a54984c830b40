# One entry point for a fresh machine: everything builds the venv first.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8050
BENCH ?=

.PHONY: venv demo test bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[test,tensorboard]'
	@touch $(STAMP)

demo: venv
	$(BIN)/testbed demo experiments/quickstart.toml --store runs.db --port $(PORT)

test: venv
	$(BIN)/python -m pytest -q

bench: venv
	$(BIN)/python -m benchmarks $(if $(FULL),--full,) $(BENCH)

clean:
	rm -rf $(VENV) runs.db runs.db-wal runs.db-shm
