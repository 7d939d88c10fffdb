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
RUNNER    ?= embedded
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

.PHONY: setup java maven test check demo holdout kfold bootstrap dist node-deps bench-mr clean

setup: $(STAMP)

$(STAMP): setup.py udfs/_philox.c
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

# The local Hadoop (make hadoop-up) resolves its jars with Maven; install it when it is missing.
maven:
	@if command -v mvn >/dev/null 2>&1; then :; else \
	  echo "Maven not found; installing it with apt-get"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq maven \
	    || { echo "error: could not install Maven; install it and retry" >&2; exit 2; }; \
	fi

# The whole suite, every engine test against its real service, in three streams at once
# (the single-node Hadoop's tests, Spark's and the Spark Thrift Server's, the rest: see
# tests/run.py).  It ends with the 15 slowest tests and its wall time, so drift shows at
# every run; the streams' logs and junit reports are in $(WORK)/test-reports/ (per file:
# python -m tests.profile $(WORK)/test-reports/*.xml).  PYTEST_ARGS: more pytest options.
PYTEST_ARGS ?=
test: setup java maven
	$(PY) -m tests.run --reports $(WORK)/test-reports $(PYTEST_ARGS)

# The inner loop: no JVM, no engine, no slow test, on every core (under a minute).
CHECK_MARKERS := not (spark or hive or hadoop or mrjob or slow)
check: setup
	@start=$$(date +%s); status=0; \
	$(PY) -m pytest -q -n auto -m "$(CHECK_MARKERS)" --durations=5 $(PYTEST_ARGS) || status=$$?; \
	echo "make check: $$(( $$(date +%s) - start )) s wall, pytest status $$status"; exit $$status

# The main job on the embedded default: local files, the embedded runner.  First a
# newcomer's table (text, integers, floats with gaps, booleans, a label) into
# train/test Parquet in one command, then the block matrices' runs.
DEMO_TABLE := import numpy as np, pandas as pd; r = np.random.default_rng(1); n = 5000; \
  pd.DataFrame({"customer": [f"c{i}" for i in range(n)], \
  "city": r.choice(["Paris", "Lyon", "Nice"], n), "age": r.integers(18, 90, n), \
  "income": r.normal(5e4, 1e4, n).round(2), \
  "score": np.where(r.random(n) < .1, np.nan, r.random(n).round(3)), \
  "vip": r.random(n) < .2, "churn": (r.random(n) < .3).astype(int)}).to_csv("$(WORK)/demo/customers.csv", index=False)
demo: setup
	@mkdir -p $(WORK)/demo
	$(PY) -c '$(DEMO_TABLE)'
	$(SAMPLEGEN) holdout $(WORK)/demo/customers.csv $(WORK)/demo/customers-split --ratio 0.8 \
	  --stratify churn --seed 42 --format parquet --overwrite
	$(SAMPLEGEN) info $(WORK)/demo/customers-split
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
	$(PY) -m samplegen.jobs.package dist/samplegen.zip

# numpy for nodes that lack it, as an archive mrjob can unpack on the nodes
# (see README, "Running on a Hadoop cluster").  Built for this machine's
# Python and platform: build it on a machine like the cluster's nodes.
node-deps: setup
	rm -rf build/node-deps && mkdir -p build/node-deps dist
	$(PY) -m pip install --quiet --target build/node-deps numpy
	tar -C build/node-deps -czf dist/samplegen-deps.tar.gz .
	@echo "wrote dist/samplegen-deps.tar.gz"

# The benchmarks print a line of progress before every step (unbuffered, also into a pipe),
# remove their scratch files when they end, and rewrite tracked files (docs/BENCHMARKS.md,
# docs/img/) only when asked: UPDATE_DOC=1 (bench-tbs, bench-tbs-jobs), PLOTS=1 (bench-spark).
BENCH_PY := PYTHONUNBUFFERED=1 $(PY)
UPDATE_DOC ?=
PLOTS ?=

# The MapReduce benchmark on the local runner: about 3 minutes on 2 quiet cores at the
# defaults (one repeat; more under load: the last line says how long it took).
# BENCH_REPEATS=3: docs/BENCHMARKS.md's medians of 3, about 7 minutes.
BENCH_ROWS ?= 200000
BENCH_COLS ?= 100
BENCH_REPEATS ?= 1
bench-mr: setup
	$(BENCH_PY) bench/bench_mr.py --rows $(BENCH_ROWS) --cols $(BENCH_COLS) --runner local \
	  --repeats $(BENCH_REPEATS) --workdir $(WORK)/bench-mr --json $(WORK)/bench-mr/results.json

clean:
	rm -rf $(WORK) dist build *.egg-info .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +

# --- time-biased sampling (tbs/) ---
TBS_OUT := docs/tbs
TBS_CLI := $(SAMPLEGEN) tbs
# every output names the target that wrote it (CSV: a first '# made by:' line)
TBS_MADE = --made-by "make $@"
TBS_SIM = $(TBS_CLI) simulate --n 1000 --batch-size 100 --batches 1000 $(TBS_MADE)
TBS_FIG3 = $(TBS_CLI) simulate --algorithms rtbs --decay poly --n 1000 --regime periodic --period 2000 --batches 6000 --show-weight $(TBS_MADE)

.PHONY: tbs-test tbs-sizes tbs-knn tbs-knn-shift tbs-knn-sizes tbs-regression tbs-online tbs-runtime tbs-figures tbs-experiments bench-tbs

tbs-test: setup
	$(PY) -m pytest -q tests/test_tbs_*.py

# Section 6.2: figure 6 (exponential decay), figure 7 (quadratic decay); section 4.3.3: figure 3
# (R-TBS, quadratic, periodic sizes; 3(c) with delta2 = 100, the paper's section 4.3.2 example,
# since the figure's own is not stated, and beside it with section 6's 0.001 n); latent samples
# kept by R-TBS's consolidation rule and by the rule as printed (5000 regular batches, and the
# example of section 4.3.2).  About 6 minutes.
tbs-sizes: setup
	@mkdir -p $(TBS_OUT)
	$(TBS_SIM) --decay exp --lambda 0.05 --regime growing  --csv $(TBS_OUT)/fig6a_exp_growing.csv   --plot $(TBS_OUT)/fig6a_exp_growing.png   --title "Fig. 6(a): exponential decay, lambda = 0.05, batch sizes grow by phi = 1.002 after k = 200"
	$(TBS_SIM) --decay exp --lambda 0.1  --regime constant --csv $(TBS_OUT)/fig6b_exp_constant.csv  --plot $(TBS_OUT)/fig6b_exp_constant.png  --title "Fig. 6(b): exponential decay, lambda = 0.1, constant batch size 100"
	$(TBS_SIM) --decay exp --lambda 0.1  --regime uniform  --csv $(TBS_OUT)/fig6c_exp_uniform.csv   --plot $(TBS_OUT)/fig6c_exp_uniform.png   --title "Fig. 6(c): exponential decay, lambda = 0.1, batch sizes uniform on [0, 200]"
	$(TBS_SIM) --decay exp --lambda 0.01 --regime shrinking --csv $(TBS_OUT)/fig6d_exp_shrinking.csv --plot $(TBS_OUT)/fig6d_exp_shrinking.png --title "Fig. 6(d): exponential decay, lambda = 0.01, batch sizes shrink by phi = 0.8 after k = 200"
	$(TBS_SIM) --decay poly --regime growing  --csv $(TBS_OUT)/fig7a_poly_growing.csv   --plot $(TBS_OUT)/fig7a_poly_growing.png   --title "Fig. 7(a): quadratic decay (s = 2, d = 10), growing batch sizes (phi = 1.002)"
	$(TBS_SIM) --decay poly --regime constant --csv $(TBS_OUT)/fig7b_poly_constant.csv  --plot $(TBS_OUT)/fig7b_poly_constant.png  --title "Fig. 7(b): quadratic decay (s = 2, d = 10), constant batch size 100"
	$(TBS_SIM) --decay poly --regime uniform  --csv $(TBS_OUT)/fig7c_poly_uniform.csv   --plot $(TBS_OUT)/fig7c_poly_uniform.png   --title "Fig. 7(c): quadratic decay (s = 2, d = 10), batch sizes uniform on [0, 200]"
	$(TBS_SIM) --decay poly --regime shrinking --csv $(TBS_OUT)/fig7d_poly_shrinking.csv --plot $(TBS_OUT)/fig7d_poly_shrinking.png --title "Fig. 7(d): quadratic decay (s = 2, d = 10), shrinking batch sizes (phi = 0.8)"
	$(TBS_FIG3) --batch-size 100 --high 300 --max-weight 1000 --csv $(TBS_OUT)/fig3a_rtbs_periodic.csv --plot $(TBS_OUT)/fig3a_rtbs_periodic.png --title "Fig. 3(a): R-TBS, quadratic decay, b1 = 100, b2 = 300, n' = n"
	$(TBS_FIG3) --batch-size 100 --high 300 --max-weight 2000 --csv $(TBS_OUT)/fig3b_rtbs_periodic.csv --plot $(TBS_OUT)/fig3b_rtbs_periodic.png --title "Fig. 3(b): R-TBS, quadratic decay, b1 = 100, b2 = 300, n' = 2n"
	$(TBS_FIG3) --batch-size 50 --high 250 --max-weight 2000 --delta2 100 --csv $(TBS_OUT)/fig3c_rtbs_periodic.csv --plot $(TBS_OUT)/fig3c_rtbs_periodic.png --title "Fig. 3(c): R-TBS, quadratic decay, b1 = 50, b2 = 250, n' = 2n, delta2 = 100"
	$(TBS_FIG3) --batch-size 50 --high 250 --max-weight 2000 --delta2 1 --csv $(TBS_OUT)/fig3c_rtbs_periodic_delta2_1.csv --plot $(TBS_OUT)/fig3c_rtbs_periodic_delta2_1.png --title "Fig. 3(c) with delta2 = 0.001 n = 1 (section 6's default) instead of 100"
	$(TBS_CLI) simulate --algorithms rtbs --decay poly --n 1000 --batch-size 100 --batches 5000 --delta2 100 $(TBS_MADE) --csv $(TBS_OUT)/consolidation_poly.csv
	$(TBS_CLI) simulate --algorithms rtbs --decay poly --shift 0 --n 100000 --batch-size 10000 --batches 300 --delta1 0.0001 --delta2 100 $(TBS_MADE) --csv $(TBS_OUT)/consolidation_example.csv

# Section 6.4, Table 1 and figures 13-14, with the data generator the paper states (spread 1,
# ratio 5; 30 runs per pattern; about 12 minutes).  Beside it, labelled, a short run (10 runs,
# k = 3) of a generator fitted to the paper's error levels (spread 1.3, ratio 6.5).
tbs-knn: setup
	@mkdir -p $(TBS_OUT)
	$(TBS_CLI) knn --runs 30 --tune-runs 5 $(TBS_MADE) --table $(TBS_OUT)/knn_table.md --csv $(TBS_OUT)/knn_curves.csv --plot $(TBS_OUT)/knn_curves.png
	$(TBS_CLI) knn --runs 10 --tune-runs 0 --k 3 --patterns "single,P(10,10)" --schemes exp:0.07,poly:2.0,sw,unif --spread 1.3 --ratio 6.5 $(TBS_MADE) --table $(TBS_OUT)/knn_table_calibrated.md --csv $(TBS_OUT)/knn_curves_calibrated.csv

# Section 6.4: the shift d of the polynomial decay from 6 to 14 (the paper reports similar
# results for all of them, without numbers; about 15 minutes).
tbs-knn-shift: setup
	@mkdir -p $(TBS_OUT)
	$(TBS_CLI) knn --runs 30 --tune-runs 5 --schemes poly:2.0:6,poly:2.0:8,poly:2.0,poly:2.0:12,poly:2.0:14,exp:0.07,sw,unif $(TBS_MADE) --table $(TBS_OUT)/knn_shift_table.md --csv $(TBS_OUT)/knn_shift_curves.csv

# Section 6.4, figure 15: P(10,10) with uniform and 2%-growing batch sizes (about 5 minutes).
tbs-knn-sizes: setup
	@mkdir -p $(TBS_OUT)
	$(TBS_CLI) knn --runs 30 --tune-runs 5 --patterns "P(10,10)" --schemes exp:0.07,poly:2.0,sw,unif --batch-sizes uniform $(TBS_MADE) --table $(TBS_OUT)/fig15a_knn_uniform.md --csv $(TBS_OUT)/fig15a_knn_uniform.csv --plot $(TBS_OUT)/fig15a_knn_uniform.png
	$(TBS_CLI) knn --runs 30 --tune-runs 5 --patterns "P(10,10)" --schemes exp:0.07,poly:2.0,sw,unif --batch-sizes growing --growth 0.02 $(TBS_MADE) --table $(TBS_OUT)/fig15b_knn_growing.md --csv $(TBS_OUT)/fig15b_knn_growing.csv --plot $(TBS_OUT)/fig15b_knn_growing.png

# Section 6.5, figure 16: saturated (n = 1000) and unsaturated (n = 1600) samples; ridge
# penalty tuned on 0.01..1e6 (three per decade), with an intercept (default) and without
# (about 3 minutes).
tbs-regression: setup
	@mkdir -p $(TBS_OUT)
	$(TBS_CLI) regression --n 1000 --patterns "P(10,10)" $(TBS_MADE) --table $(TBS_OUT)/regression_n1000.md --csv $(TBS_OUT)/regression_n1000.csv --plot $(TBS_OUT)/regression_n1000.png
	$(TBS_CLI) regression --n 1600 --patterns "P(10,10),P(16,16)" $(TBS_MADE) --table $(TBS_OUT)/regression_n1600.md --csv $(TBS_OUT)/regression_n1600.csv --plot $(TBS_OUT)/regression_n1600.png
	$(TBS_CLI) regression --n 1000 --patterns "P(10,10)" --no-intercept $(TBS_MADE) --table $(TBS_OUT)/regression_n1000_nointercept.md --csv $(TBS_OUT)/regression_n1000_nointercept.csv
	$(TBS_CLI) regression --n 1600 --patterns "P(10,10),P(16,16)" --no-intercept $(TBS_MADE) --table $(TBS_OUT)/regression_n1600_nointercept.md --csv $(TBS_OUT)/regression_n1600_nointercept.csv
	$(TBS_CLI) regression --n 1000 --patterns "P(10,10)" --no-intercept --penalties 0.01 $(TBS_MADE) --table $(TBS_OUT)/regression_n1000_leastsquares.md --csv $(TBS_OUT)/regression_n1000_leastsquares.csv

# Section 6.5, figure 17: R-TBS against online gradient descent and a proximal learner
# (17(c) with 10 runs per point); R-TBS by least squares, then, as in the paper, by ridge
# regression with the penalty tuned with the rate (about 30 minutes).
TBS_RIDGE := 0,0.01,0.1,1,10,100,1000,10000
tbs-online: setup
	@mkdir -p $(TBS_OUT)
	$(TBS_CLI) online --fixed-lambda 0.1 $(TBS_MADE) --table $(TBS_OUT)/fig17a_online.md --csv $(TBS_OUT)/fig17a_online.csv --plot $(TBS_OUT)/fig17a_online.png
	$(TBS_CLI) online --scale 0.3333 --extra 198 --fixed-lambda 0.1 $(TBS_MADE) --table $(TBS_OUT)/fig17b_online.md --csv $(TBS_OUT)/fig17b_online.csv --plot $(TBS_OUT)/fig17b_online.png
	$(TBS_CLI) online --scale 0.3333 --extra 0,8,18,48,98,198,398 --runs 10 --tune-runs 3 $(TBS_MADE) --table $(TBS_OUT)/fig17c_online_sweep.md --csv $(TBS_OUT)/fig17c_online_sweep.csv --plot $(TBS_OUT)/fig17c_online_sweep.png
	$(TBS_CLI) online --fixed-lambda 0.1 --penalties $(TBS_RIDGE) $(TBS_MADE) --table $(TBS_OUT)/fig17a_online_ridge.md --csv $(TBS_OUT)/fig17a_online_ridge.csv
	$(TBS_CLI) online --scale 0.3333 --extra 198 --fixed-lambda 0.1 --penalties $(TBS_RIDGE) $(TBS_MADE) --table $(TBS_OUT)/fig17b_online_ridge.md --csv $(TBS_OUT)/fig17b_online_ridge.csv
	$(TBS_CLI) online --scale 0.3333 --extra 0,8,18,48,98,198,398 --runs 10 --tune-runs 3 --penalties $(TBS_RIDGE) $(TBS_MADE) --table $(TBS_OUT)/fig17c_online_sweep_ridge.md --csv $(TBS_OUT)/fig17c_online_sweep_ridge.csv

# Section 6.3, figure 12: update time of R-TBS (exponential decay) against the decay rate, on
# one machine (about 2 minutes; the times depend on the machine and its load).
tbs-runtime: setup
	@mkdir -p $(TBS_OUT)
	$(TBS_CLI) runtime --lambdas 0.01,0.03,0.07,0.1,0.3,1 --n 1000000 --batch-size 1000000 --warmup 100 --batches 50 $(TBS_MADE) --table $(TBS_OUT)/fig12_runtime.md --csv $(TBS_OUT)/fig12_runtime.csv

# Every table, CSV and plot of docs/tbs from the code as it is (about an hour); each file
# names the target that wrote it.  tbs-experiments is the older name.
tbs-figures: tbs-sizes tbs-knn tbs-knn-shift tbs-knn-sizes tbs-regression tbs-online tbs-runtime

tbs-experiments: tbs-figures

bench-tbs: setup
	$(BENCH_PY) bench/bench_tbs.py $(if $(UPDATE_DOC),--update-doc docs/BENCHMARKS.md)

# --- hive ---
# A local HiveServer2 on 127.0.0.1:$(HIVE_PORT): Apache Hive's own on the single-node
# Hadoop (HIVE_SERVER=apache, the default; metastore and configuration in $(HIVE_WORK),
# warehouse on HDFS), or the Spark Thrift Server from the pyspark distribution
# (HIVE_SERVER=spark, in $(HIVE_SPARK_WORK)); see docs/HIVE.md.
# In a shell: eval "$$(make -s hive-env)" puts Apache beeline on PATH.
HIVE_PORT       ?= 10000
HIVE_SERVER     ?= apache
HIVE_WORK       ?= $(WORK)/hive
HIVE_SPARK_WORK ?= $(WORK)/hive-spark
HIVE_SERVER_PY   = $(PY) -m samplegen.hive.server
.PHONY: hive-up hive-down hive-env hive-dist bench-hive

# Says so (and how to get it) when Java 17+ is missing; `make java` installs it.
# Apache Hive starts the local Hadoop first (left alone when it runs).
hive-up: setup java $(if $(filter spark,$(HIVE_SERVER)),,maven hadoop-up)
	$(HIVE_SERVER_PY) up --server $(HIVE_SERVER) --port $(HIVE_PORT) \
	  --workdir $(if $(filter spark,$(HIVE_SERVER)),$(HIVE_SPARK_WORK),$(HIVE_WORK)) \
	  --hadoop-workdir $(HADOOP_WORK)

# Stops whichever of the two runs from its work directory (only that process).
hive-down:
	@if [ -x $(PY) ]; then \
	  $(HIVE_SERVER_PY) down --server apache --workdir $(HIVE_WORK) && \
	  $(HIVE_SERVER_PY) down --server spark --workdir $(HIVE_SPARK_WORK); \
	else echo "hive-server: not running (no $(VENV))"; fi

hive-env: setup
	@$(HIVE_SERVER_PY) env --workdir $(HIVE_WORK) --port $(HIVE_PORT)

# dist/samplegen-<hash>.zip: what the HiveQL scripts ADD FILE (docs/HIVE.md)
hive-dist: setup
	$(PY) -c "from samplegen.hive.package import build_hive_zip; print(build_hive_zip('dist'))"

# Section V-D / figure 13 at laptop scale: our query vs the join-based
# baseline (docs/BENCHMARKS.md, "Hive"), on a server of its own: Apache Hive
# (HIVE_SERVER=apache: data on HDFS, starts the local Hadoop when it is down)
# or the Spark Thrift Server (HIVE_SERVER=spark).  QUICK=1 for a smoke run.
QUICK ?=
bench-hive: setup $(if $(filter spark,$(HIVE_SERVER)),,hadoop-up)
	$(BENCH_PY) bench/bench_hive.py --server $(HIVE_SERVER) --workdir $(WORK)/bench-hive \
	  --hadoop-workdir $(HADOOP_WORK) \
	  --json $(WORK)/bench-hive/results-$(HIVE_SERVER)$(if $(QUICK),-quick).json $(if $(QUICK),--quick)

# --- micro-batch TBS jobs ---
# make tbs-run BATCHES=DIR STATE=DIR: process the new batches of DIR into STATE.
# The parameters below are used when STATE is created (later runs take them from STATE).
TBS_ALGORITHM  ?= rtbs
TBS_DECAY      ?= exp
TBS_LAMBDA     ?= 0.07
TBS_SIZE       ?= 10000
TBS_PARTITIONS ?= 4
TBS_RUNNER     ?= inline
TBS_SEED       ?= $(SEED)
TBS_DEMO       := $(WORK)/tbs-demo
TBS_CREATE      = --algorithm $(TBS_ALGORITHM) --decay $(TBS_DECAY) --size $(TBS_SIZE) --seed $(TBS_SEED) \
                  --partitions $(TBS_PARTITIONS) $(if $(filter exp,$(TBS_DECAY)),--lambda $(TBS_LAMBDA))

.PHONY: tbs-run tbs-demo tbs-jobs-test bench-tbs-jobs

tbs-run: setup
	@test -n "$(BATCHES)" -a -n "$(STATE)" || { echo "usage: make tbs-run BATCHES=DIR STATE=DIR [TBS_ALGORITHM=rtbs|ttbs TBS_DECAY=exp|poly TBS_LAMBDA=0.07 TBS_SIZE=10000 TBS_SEED=42 TBS_RUNNER=inline|local|spark|hadoop]" >&2; exit 2; }
	$(SAMPLEGEN) tbs run $(BATCHES) $(STATE) --runner $(TBS_RUNNER) \
	  $(if $(wildcard $(STATE)/commits),,$(TBS_CREATE))
	$(SAMPLEGEN) tbs status $(STATE)

# A synthetic stream of 24 micro-batches, both algorithms with both decays; then 8 more
# batches arrive and the same STATEs continue from where they were.
tbs-demo: setup
	rm -rf $(TBS_DEMO) && mkdir -p $(TBS_DEMO)
	$(PY) -m samplegen.tbs.stream.demo $(TBS_DEMO)/batches --batches 24 --size 20000 --seed 1
	$(SAMPLEGEN) tbs run $(TBS_DEMO)/batches $(TBS_DEMO)/rtbs-exp --algorithm rtbs --decay exp --lambda 0.1 --size 30000 --seed 7
	$(SAMPLEGEN) tbs run $(TBS_DEMO)/batches $(TBS_DEMO)/rtbs-poly --algorithm rtbs --decay poly --power 2 --shift 10 --size 30000 --seed 7
	$(SAMPLEGEN) tbs run $(TBS_DEMO)/batches $(TBS_DEMO)/ttbs-exp --algorithm ttbs --decay exp --lambda 0.1 --size 30000 --seed 7
	$(SAMPLEGEN) tbs run $(TBS_DEMO)/batches $(TBS_DEMO)/ttbs-poly --algorithm ttbs --decay poly --power 2 --shift 10 --size 30000 --seed 7
	$(PY) -m samplegen.tbs.stream.demo $(TBS_DEMO)/batches --batches 8 --size 20000 --seed 2 --start 25
	for s in rtbs-exp rtbs-poly ttbs-exp ttbs-poly; do $(SAMPLEGEN) tbs run $(TBS_DEMO)/batches $(TBS_DEMO)/$$s -q || exit 1; done
	for s in rtbs-exp rtbs-poly ttbs-exp ttbs-poly; do echo "== $$s"; $(SAMPLEGEN) tbs status $(TBS_DEMO)/$$s || exit 1; done
	$(SAMPLEGEN) tbs sample $(TBS_DEMO)/rtbs-exp --to $(TBS_DEMO)/rtbs-exp-sample.parquet
	$(SAMPLEGEN) tbs sample $(TBS_DEMO)/ttbs-exp --to $(TBS_DEMO)/ttbs-exp-sample.csv
	@echo "tbs demo: batches, STATEs and samples are in $(TBS_DEMO)/"

tbs-jobs-test: setup java
	$(PY) -m pytest -q tests/test_tbs_jobs*.py

# Per-batch time of D-R-TBS and D-T-TBS next to the I/O floor (QUICK=1: B = 1e5, 1e6 only;
# UPDATE_DOC=1: into docs/BENCHMARKS.md).
bench-tbs-jobs: setup
	$(BENCH_PY) bench/bench_tbs_jobs.py $(if $(QUICK),--quick) \
	  $(if $(UPDATE_DOC),--update-doc docs/BENCHMARKS.md)

# --- spark ---
# conf/spark-defaults.conf, through Spark's own SPARK_CONF_DIR (also for
# `SPARK_CONF_DIR=conf make holdout RUNNER=spark ...`).
SPARK_CONF_DIR_ENV := SPARK_CONF_DIR=$(abspath conf)
BENCH_SPARK_FLAGS ?=
.PHONY: bench bench-spark bench-spark-quick

# Everything: the MapReduce benchmark and the paper's experiments on Spark.
bench: bench-mr bench-spark

# The paper's experiments with today's peers (docs/BENCHMARKS.md): about two
# hours on 2 cores; results in $(WORK)/bench-spark/, figures there too (PLOTS=1: in
# docs/img/, the tracked ones).
bench-spark: setup java
	$(SPARK_CONF_DIR_ENV) $(BENCH_PY) bench/bench_spark.py --workdir $(WORK)/bench-spark \
	  --plots $(if $(PLOTS),docs/img,$(WORK)/bench-spark/img) $(BENCH_SPARK_FLAGS)

# Smoke run of the same script on small inputs (a few minutes).
bench-spark-quick: setup java
	$(SPARK_CONF_DIR_ENV) $(BENCH_PY) bench/bench_spark.py --quick \
	  --workdir $(WORK)/bench-spark-quick $(BENCH_SPARK_FLAGS)

# --- hadoop ---
# A single-node Hadoop (HDFS, YARN, MapReduce) from Apache's jars on 127.0.0.1,
# everything in $(HADOOP_WORK); see docs/HADOOP.md.  HADOOP_FREE_PORTS=1: ports that
# nothing listens on instead of Hadoop's defaults (beside another cluster).
# In a shell: eval "$$(make -s hadoop-env)"
HDFS_PORT   ?= 9000
HADOOP_WORK ?= $(WORK)/hadoop
HADOOP_CLUSTER = $(PY) -m samplegen.jobs.cluster
.PHONY: hadoop-up hadoop-down hadoop-env

hadoop-up: setup java maven
	$(HADOOP_CLUSTER) up --workdir $(HADOOP_WORK) --hdfs-port $(HDFS_PORT) \
	  $(if $(HADOOP_FREE_PORTS),--free-ports)

hadoop-down:
	@if [ -x $(PY) ]; then $(HADOOP_CLUSTER) down --workdir $(HADOOP_WORK); \
	else echo "hadoop: not running (no $(VENV))"; fi

hadoop-env: setup
	@$(HADOOP_CLUSTER) env --workdir $(HADOOP_WORK)
