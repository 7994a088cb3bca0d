# Open Data Fabric in Python. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := .make

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(STAMP)/system: scripts/install-system.sh
	@mkdir -p $(STAMP)
	bash scripts/install-system.sh
	@touch $@

$(STAMP)/venv: pyproject.toml | $(STAMP)/system
	@mkdir -p $(STAMP)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

.PHONY: install
install: $(STAMP)/venv ## Install system packages (Java) and the Python environment

.PHONY: codegen
codegen: install ## Regenerate all generated code (gRPC stubs)
	$(PY) tools/codegen.py

.PHONY: codegen-check
codegen-check: install ## Fail when generated code is stale
	$(PY) tools/codegen.py --check

.PHONY: lint
lint: install ## ruff (lint and format check), strict mypy, and the layering (import contracts)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

.PHONY: fmt
fmt: install ## Format and auto-fix
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

.PHONY: images
images: install ## Build the local base image and the engine image with Podman (cached)
	bash scripts/build-images.sh

.PHONY: test-unit
test-unit: install ## Fast tests only (no JVM, no containers)
	$(VENV)/bin/pytest -m unit

.PHONY: test-fast
test-fast: install ## Unit tests in parallel, no process-starting tests (under a minute)
	$(VENV)/bin/pytest -m "unit and not process" -n auto -q

.PHONY: test
test: install codegen-check lint ## Everything: codegen check, lint, all test tiers
	@if [ -f scripts/build-images.sh ]; then ENGINE_NO_CACHE=1 bash scripts/build-images.sh; fi
	$(VENV)/bin/pytest -m "unit and not process" -n 2 -q --durations=5
	$(VENV)/bin/pytest -m "not (unit and not process)"

.PHONY: demo
demo: install ## The main job: an example workspace ingested, transformed, verified
	bash examples/demo.sh

.PHONY: bench
bench: install ## Benchmarks of issue 15, one table (BENCH_ARGS="--quick", "--only ingest", "--big 2.1", "--load 2")
	$(PY) bench/run_all.py $(BENCH_ARGS)

.PHONY: clean
clean: ## Remove the environment and caches
	rm -rf $(VENV) $(STAMP) .mypy_cache .ruff_cache .pytest_cache
