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

# --- spark (issue 4) ---
# conf/spark-defaults.conf, through Spark's own SPARK_CONF_DIR (also for
# `SPARK_CONF_DIR=conf make holdout RUNNER=spark ...`).
SPARK_CONF_DIR_ENV := SPARK_CONF_DIR=$(abspath conf)
BENCH_SPARK_FLAGS ?=
.PHONY: bench bench-spark bench-spark-quick

# Everything: the MapReduce benchmark and the paper's experiments on Spark.
bench: bench-mr bench-spark

# The paper's experiments with today's peers (docs/BENCHMARKS.md): about two
# hours on 2 cores; results in $(WORK)/bench-spark/, figures in docs/img/.
bench-spark: setup java
	$(SPARK_CONF_DIR_ENV) $(PY) bench/bench_spark.py --workdir $(WORK)/bench-spark \
	  --plots docs/img $(BENCH_SPARK_FLAGS)

# Smoke run of the same script on small inputs (a few minutes).
bench-spark-quick: setup java
	$(SPARK_CONF_DIR_ENV) $(PY) bench/bench_spark.py --quick --workdir $(WORK)/bench-spark-quick \
	  $(BENCH_SPARK_FLAGS)
