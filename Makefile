# The commands of the README: `make demo`, `make test` and `make fuzz` (the graph fuzzer, for
# FUZZ_SECONDS seconds or FUZZ_EXAMPLES graphs, 0 and 0: 60 s; FUZZ_SEED repeats a run, 0: random).
# Each creates .venv (python3 -m venv) and install nhwc-onnx with its dev extras on first use;
# the install is redone only when pyproject.toml changes (stamp file inside .venv).

PYTHON ?= python3
VENV ?= .venv
VENV_PYTHON := $(VENV)/bin/python
INSTALLED := $(VENV)/.nhwc-onnx-installed

FUZZ_SECONDS ?= 0
FUZZ_EXAMPLES ?= 0
FUZZ_SEED ?= 0

.PHONY: demo test fuzz

demo: $(INSTALLED)
	$(VENV_PYTHON) examples/demo.py

# The type check runs first (its settings: [tool.mypy] in pyproject.toml); a type error
# stops make before the test suite starts.
test: $(INSTALLED)
	$(VENV_PYTHON) -m mypy
	$(VENV_PYTHON) -m pytest

fuzz: $(INSTALLED)
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_SEED=$(FUZZ_SEED) \
		$(VENV_PYTHON) -m tests.fuzz.run

$(VENV_PYTHON):
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): pyproject.toml | $(VENV_PYTHON)
	$(VENV_PYTHON) -m pip install --quiet -e '.[dev]'
	touch $(INSTALLED)
