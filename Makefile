# delaybound: every target installs what it needs into .venv (nothing by hand).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# torch is pinned to the CPU wheel served locally; a bare `torch` would pull CUDA packages.
# Extras: dev (pytest), pep (PEPit), test (transformers, for the examples' foreign-model test).
TORCH_PIN := torch==2.13.0

.PHONY: install test demo bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[dev,pep,test]" "$(TORCH_PIN)"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	MPLBACKEND=Agg $(PY) -m pytest -q -p no:cacheprovider

demo: $(STAMP)
	MPLBACKEND=Agg $(VENV)/bin/delaybound demo --out runs/demo

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b --json || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info
