# samplegen — developer and operator entry points.
# `make demo` and `make test` work from a clean clone: they create .venv/ first.

SHELL    := /bin/bash
PYTHON   ?= python3
VENV     := .venv
PY       := $(VENV)/bin/python
SAMPLEGEN := $(VENV)/bin/samplegen
STAMP    := $(VENV)/.installed
WORK     ?= work

.PHONY: setup java test clean

setup: $(STAMP)

$(STAMP): setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(PY) -m pip install --quiet -e '.[all]'
	@touch $(STAMP)

# Spark and the Hive test server need Java 17+; install it when it is missing.
java:
	@if java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])'; then :; else \
	  echo "Java 17+ not found; installing a headless JRE with apt-get"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq openjdk-17-jre-headless \
	    || { echo "error: could not install Java 17; install it and retry" >&2; exit 2; }; \
	fi

test: setup java
	$(PY) -m pytest -q

clean:
	rm -rf $(WORK) dist build *.egg-info .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
