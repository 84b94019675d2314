# mergetable — run `make help` for the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))
export SPARK_LOCAL_IP := 127.0.0.1

.DEFAULT_GOAL := help

help: ## Show this help
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}'

java-check:
	@command -v java >/dev/null 2>&1 || { echo "error: Java 17+ is required for Spark (install e.g. 'apt-get install openjdk-17-jre-headless')"; exit 1; }
	@java -version 2>&1 | head -1 | grep -qE '"(1[7-9]|2[0-9])' || { echo "error: Java 17 or newer is required for Spark; found: $$(java -version 2>&1 | head -1)"; exit 1; }

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel
	$(PIP) install -q --config-settings editable_mode=compat -e ".[dev]"
	@touch $(STAMP)

install: $(STAMP) ## Create .venv and install mergetable with its dev tools (non-PEP660 editable, visible to Spark workers)

lint: install ## ruff check and format check, import layering
	$(VENV)/bin/ruff check mergetable pyspark_mergetable tests benchmarks examples docs/_ext
	$(VENV)/bin/ruff format --check mergetable pyspark_mergetable tests benchmarks examples docs/_ext
	$(VENV)/bin/lint-imports

typecheck: install ## mypy --strict
	$(VENV)/bin/mypy

spec: install ## Regenerate spec/schemas from the metadata models
	$(PY) -m mergetable.metadata.spec spec/schemas

# Tests run on TEST_WORKERS processes (pytest-xdist; each with its own Spark session when it runs Spark tests).
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal

test: install java-check ## Run the whole test suite (unit, property, concurrency, Spark, S3) and the docstring examples
	$(PYTEST) tests mergetable pyspark_mergetable

test-fast: install ## The quick loop: every test and docstring example but the Spark, S3 and slow ones
	$(PYTEST) -m "not spark and not s3 and not slow" tests mergetable pyspark_mergetable

docs: install ## Build the documentation site into site/ (MkDocs, strict: a warning fails the build; offline)
	$(VENV)/bin/mkdocs build --strict

demo: install java-check ## Run the demo Spark pipeline on local files
	$(PY) examples/demo.py

.venv-peers/.installed: Makefile
	$(PYTHON) -m venv .venv-peers
	.venv-peers/bin/pip install -q "pypaimon==2.1.0" "pypaimon-rust==0.4.0" "deltalake==1.6.6"
	@touch $@

bench: install java-check .venv-peers/.installed ## Run the benchmarks and print ratios against pyarrow and peers (pypaimon, deltalake)
	$(PY) benchmarks/run_all.py $(BENCH_ARGS)

check: lint typecheck test ## Everything CI checks

clean: ## Remove build and test artefacts
	rm -rf build dist site *.egg-info .pytest_cache .mypy_cache .ruff_cache demo-output bench-output

.PHONY: help java-check install lint typecheck spec test test-fast docs demo bench check clean
