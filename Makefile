# Every target sets up what it needs: a fresh clone runs `make demo` or `make test` directly.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin

.PHONY: setup demo serve-demo test bench lint

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e '.[train,test,ray]'
	touch $@

## The main job, offline: index the packaged demo corpus, run the demo LLM behind the proxy,
## stream answers through the checker and print them annotated.
demo: setup
	$(BIN)/factcheck demo --mode correct

## The proxy in front of the built-in demo LLM, on http://127.0.0.1:8000/v1
serve-demo: setup
	$(BIN)/factcheck serve --demo-upstream --port 8000

test: setup
	$(PY) -m pytest -q -p no:cacheprovider

## Static checks, run by .ci/run: style (ruff), the import layers (import-linter, contracts in
## pyproject.toml), and types (mypy: strict on the protocol, the checked stream and its faces).
lint: setup
	$(BIN)/ruff check middleware adapters onnx_models load_tests tests
	$(BIN)/lint-imports
	$(BIN)/mypy
