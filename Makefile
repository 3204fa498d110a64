# The two commands of the README: `make demo` and `make test`.
# Both create .venv (python3 -m venv) and install nhwc-onnx with its dev extras on first use;
# the install is redone only when pyproject.toml changes (stamp file inside .venv).

PYTHON ?= python3
VENV ?= .venv
VENV_PYTHON := $(VENV)/bin/python
INSTALLED := $(VENV)/.nhwc-onnx-installed

.PHONY: demo test

demo: $(INSTALLED)
	$(VENV_PYTHON) examples/demo.py

# The type check runs first (its settings: [tool.mypy] in pyproject.toml); a type error
# stops make before the test suite starts.
test: $(INSTALLED)
	$(VENV_PYTHON) -m mypy
	$(VENV_PYTHON) -m pytest

$(VENV_PYTHON):
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): pyproject.toml | $(VENV_PYTHON)
	$(VENV_PYTHON) -m pip install --quiet -e '.[dev]'
	touch $(INSTALLED)
