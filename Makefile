# ttjax: every target sets itself up from nothing (a .venv next to this file).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
# The CPU wheel of torch lies on local disk on these machines; an unpinned torch pulls a CUDA build.
TORCH_PIN ?= torch==2.13.0

# pip would byte-compile every file of every wheel on one core (a minute for torch and
# transformers, most of it never imported): Python compiles the modules a run imports instead, on
# first import (about 2,300 files for the whole suite, 10 s).

# tt-metal's model code wants transformers 4.x (and loguru, llama-models, ...; the `ttmetal`
# extra); .venv keeps transformers 5. This venv sees .venv's packages (a .pth line) under its own.
TTMETAL_VENV := .venv-ttmetal
TTMETAL_STAMP := $(TTMETAL_VENV)/.installed

.PHONY: all venv ttmetal-venv demo test test-all lint format docs bench gpu-decode gpu-train clean

all: test

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet --no-compile "$(TORCH_PIN)" || echo "warning: $(TORCH_PIN) not available; the torch extra will pick a build"
	$(PIP) install --quiet --no-compile -e ".[dev,torch,viz]"
	touch $(STAMP)

venv: $(STAMP)

$(TTMETAL_STAMP): $(STAMP) pyproject.toml
	test -x $(TTMETAL_VENV)/bin/python || $(PY) -m venv $(TTMETAL_VENV)
	$(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > "$$($(TTMETAL_VENV)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/_ttjax_main_venv.pth"
	$(TTMETAL_VENV)/bin/python -m pip install --quiet --no-compile -e ".[ttmetal]"
	touch $(TTMETAL_STAMP)

ttmetal-venv: $(TTMETAL_STAMP)

demo: $(STAMP)
	$(PY) -m models.llama.demo --mesh galaxy --mode hybrid --submesh 2x4 --trace

# The lint gates, in turn: the first to fail stops them.
LINT = $(PY) -m ruff check . && $(PY) -m ruff format --check . && $(VENV)/bin/lint-imports && \
	$(PY) -m mypy

lint: $(STAMP)
	$(LINT)

docs: $(STAMP)
	$(PY) -m mkdocs build --strict

format: $(STAMP)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

# The suite starts hundreds of Pythons (CLIs, launchers, README blocks): each reads ttjax's
# bytecode and pytest's rewritten tests from __pycache__ even where the environment turns
# writing it off (PYTHONDONTWRITEBYTECODE), instead of compiling ~400 modules again each time.
PYTEST := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest

# The lint gates run beside the tests, not before them: mypy and import-linter keep one core busy
# for half a minute, while the tests can use both. `make test` fails if either fails; the gates'
# output follows the tests'.
test: $(STAMP)
	@gates=$$(mktemp); ( $(LINT) ) > $$gates 2>&1 & lint=$$!; \
	$(PYTEST) -q -m "not slow" -n 2 --dist loadfile --durations=20; tests=$$?; \
	wait $$lint; gated=$$?; echo "lint gates (ruff, import-linter, mypy):"; cat $$gates; rm -f $$gates; \
	[ $$tests -eq 0 ] && [ $$gated -eq 0 ]

test-all: lint
	$(PYTEST) -q -n 2 --dist loadfile

bench: $(STAMP)
	$(PY) -m benchmarks.run

gpu-decode: $(STAMP)
	$(PY) -m benchmarks.gpu_decode

gpu-train: $(STAMP)
	$(PY) -m benchmarks.gpu_train

clean:
	rm -rf $(VENV) $(TTMETAL_VENV) .pytest_cache .ruff_cache .hypothesis .mypy_cache site
