# samplegen — developer and operator entry points.
# `make demo` and `make test` work from a clean clone: they create .venv/ first.

SHELL     := /bin/bash
PYTHON    ?= python3
VENV      := .venv
PY        := $(VENV)/bin/python
SAMPLEGEN := $(VENV)/bin/samplegen
STAMP     := $(VENV)/.installed
WORK      ?= work

# Parameters of the sampling targets (make holdout INPUT=... OUTPUT=... RATIO=0.9)
INPUT     ?= $(WORK)/demo/matrix
OUTPUT    ?= $(WORK)/runs/$@
SEED      ?= 42
RUNNER    ?= local
RATIO     ?= 0.8
REPEATS   ?= 1
FRACTION  ?= 1.0
K         ?= 10
NAIVE     ?=
SAMPLES   ?= 10
SIZE      ?=
OVERWRITE ?=
MRJOB_CONF ?=
RUN_FLAGS = --seed $(SEED) --runner $(RUNNER) $(if $(OVERWRITE),--overwrite) \
            $(if $(MRJOB_CONF),--mrjob-conf $(MRJOB_CONF))

.PHONY: setup java test demo holdout kfold bootstrap dist node-deps bench-mr clean

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

# The main job on the embedded default: local files, local mrjob runner.
demo: setup
	@mkdir -p $(WORK)/demo
	$(SAMPLEGEN) make-matrix $(WORK)/demo/synthetic --rows 20000 --cols 20 --block-size 1000 \
	  --seed 1 --overwrite
	$(SAMPLEGEN) export $(WORK)/demo/synthetic --to $(WORK)/demo/rows.csv --no-row-ids --overwrite
	$(SAMPLEGEN) import $(WORK)/demo/rows.csv $(WORK)/demo/matrix --block-size 1000 --overwrite
	$(SAMPLEGEN) holdout $(WORK)/demo/matrix $(WORK)/demo/holdout --ratio 0.8 --repeats 3 \
	  --seed 42 --overwrite
	$(SAMPLEGEN) kfold $(WORK)/demo/matrix $(WORK)/demo/kfold --k 5 --seed 42 --overwrite
	$(SAMPLEGEN) bootstrap $(WORK)/demo/matrix $(WORK)/demo/bootstrap --samples 5 --seed 42 \
	  --overwrite
	$(SAMPLEGEN) info $(WORK)/demo/kfold
	$(SAMPLEGEN) export $(WORK)/demo/kfold train-0 --to $(WORK)/demo/kfold-train-0.csv --overwrite
	@echo "demo outputs are in $(WORK)/demo/"

holdout: setup
	$(SAMPLEGEN) holdout $(INPUT) $(OUTPUT) --ratio $(RATIO) --repeats $(REPEATS) \
	  --fraction $(FRACTION) $(RUN_FLAGS)

kfold: setup
	$(SAMPLEGEN) kfold $(INPUT) $(OUTPUT) --k $(K) $(if $(NAIVE),--naive) $(RUN_FLAGS)

bootstrap: setup
	$(SAMPLEGEN) bootstrap $(INPUT) $(OUTPUT) --samples $(SAMPLES) $(if $(SIZE),--size $(SIZE)) \
	  $(RUN_FLAGS)

# The project's packages as one zip for cluster nodes (mrjob py_files, Spark
# --py-files, Hive ADD FILE).  `--runner hadoop` builds and ships it by itself.
dist: setup
	$(PY) -m jobs.package dist/samplegen.zip

# numpy for nodes that lack it, as an archive mrjob can unpack on the nodes
# (see README, "Running on a Hadoop cluster").  Built for this machine's
# Python and platform: build it on a machine like the cluster's nodes.
node-deps: setup
	rm -rf build/node-deps && mkdir -p build/node-deps dist
	$(PY) -m pip install --quiet --target build/node-deps numpy
	tar -C build/node-deps -czf dist/samplegen-deps.tar.gz .
	@echo "wrote dist/samplegen-deps.tar.gz"

BENCH_ROWS ?= 200000
BENCH_COLS ?= 100
bench-mr: setup
	$(PY) bench/bench_mr.py --rows $(BENCH_ROWS) --cols $(BENCH_COLS) --runner local \
	  --repeats 3 --workdir $(WORK)/bench-mr --json $(WORK)/bench-mr/results.json

clean:
	rm -rf $(WORK) dist build *.egg-info .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +

# --- hive (issue 6) ---
# A local HiveServer2 (the Spark Thrift Server from the pyspark distribution)
# on 127.0.0.1:$(HIVE_PORT), metastore and warehouse in $(HIVE_WORK); see docs/HIVE.md.
HIVE_PORT ?= 10000
HIVE_WORK ?= $(WORK)/hive
.PHONY: hive-up hive-down hive-dist bench-hive

# Says so (and how to get it) when Java 17+ is missing; `make java` installs it.
hive-up: setup
	$(PY) -m hive.server up --port $(HIVE_PORT) --workdir $(HIVE_WORK)

hive-down:
	@if [ -x $(PY) ]; then $(PY) -m hive.server down --workdir $(HIVE_WORK); \
	else echo "hive-server: not running (no $(VENV))"; fi

# dist/samplegen-<hash>.zip: what the HiveQL scripts ADD FILE (docs/HIVE.md)
hive-dist: setup
	$(PY) -c "from hive.package import build_hive_zip; print(build_hive_zip('dist'))"

# Section V-D / figure 13 at laptop scale: our query vs the join-based
# baseline (docs/BENCHMARKS.md, "Hive").  QUICK=1 for a one-minute smoke run.
QUICK ?=
bench-hive: setup
	$(PY) bench/bench_hive.py --workdir $(WORK)/bench-hive \
	  --json $(WORK)/bench-hive/results$(if $(QUICK),-quick).json $(if $(QUICK),--quick)
