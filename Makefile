# samsa: the two commands a new user runs are `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Debian packages the tests need (kcat: a real CLI client; libzookeeper-java: ZooKeeper, the
# cluster's coordinator, without the desktop JRE the zookeeper package pulls in; iptables: the
# network faults of tests/chaos, inside network namespaces of their own; libfuse2: fusepy's
# library, for the failing disks of tests/faults; chromium: the browser of tests/console, driven
# by Playwright).
APT_PACKAGES := kcat libzookeeper-java iptables libfuse2 chromium
# Spark (the data source and pipeline tests) runs on a JVM, and tests/reference compiles a
# small Java program against Kafka's own client with Maven: a JDK is installed when no javac is
# on PATH, Maven when no mvn is.
JDK_PACKAGE := openjdk-17-jdk-headless
MAVEN_PACKAGE := maven

.PHONY: setup apt go-check reference run test lint fuzz fuzz-merge demo bench bench-groups bench-spark bench-cleaner bench-storage bench-txn bench-cluster bench-security bench-metrics clean import-graph chaos

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

apt:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v javac >/dev/null 2>&1 || missing="$$missing $(JDK_PACKAGE)"; \
	command -v mvn >/dev/null 2>&1 || missing="$$missing $(MAVEN_PACKAGE)"; \
	if [ -n "$$missing" ]; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing; \
	fi

setup: $(STAMP) apt

# Kafka's own Java client and command-line tools for tests/reference, the release pinned in its
# pom.xml: Maven resolves them into its local repository (~/.m2) and compiles the client driver;
# the classpath file is the stamp (the tests' fixture runs this rule too when it is stale).
REFERENCE := build/reference
REFERENCE_SOURCES := tests/reference/pom.xml $(shell find tests/reference/src -name '*.java' 2>/dev/null)

$(REFERENCE)/classpath.txt: $(REFERENCE_SOURCES)
	@command -v mvn >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 || { \
		echo "tests/reference needs Maven (mvn) and a JDK 17 or later (javac): 'make apt' installs Debian's $(MAVEN_PACKAGE) and $(JDK_PACKAGE)" >&2; exit 1; }
	mvn -q -B -f tests/reference/pom.xml package
	printf '%s:%s\n' "$(CURDIR)/$(REFERENCE)/target/samsa-reference-1.jar" "$$(cat $(REFERENCE)/dependencies.txt)" > $@

# Spark's own Kafka connector (format("kafka")) for the Spark tests, pinned in its pom.xml: the
# jars it needs beyond PySpark's, resolved by Maven; the tests' SparkSession loads this classpath.
SPARK_KAFKA := build/spark-kafka

$(SPARK_KAFKA)/classpath.txt: tests/spark/connector/pom.xml
	@command -v mvn >/dev/null 2>&1 || { \
		echo "tests/spark needs Maven (mvn) for Spark's Kafka connector: 'make apt' installs Debian's $(MAVEN_PACKAGE)" >&2; exit 1; }
	mvn -q -B -f tests/spark/connector/pom.xml initialize
	touch $@

# Apache Kafka's broker for tests/differential, the release pinned in its pom.xml: Maven
# resolves it into ~/.m2 and writes its classpath (the stamp; the tests' fixture runs this rule
# too when it is stale).
KAFKA_SERVER := build/kafka-server

$(KAFKA_SERVER)/classpath.txt: tests/differential/kafka/pom.xml
	@command -v mvn >/dev/null 2>&1 || { \
		echo "tests/differential needs Maven (mvn) for Apache Kafka's broker: 'make apt' installs Debian's $(MAVEN_PACKAGE)" >&2; exit 1; }
	mvn -q -B -f tests/differential/kafka/pom.xml initialize
	touch $@

# franz-go's suite (tests/compat) is built with Go 1.26 (its go.mod); Debian's golang-go is
# 1.19, too old to build it or to fetch a newer toolchain, so Go is named, not installed.
go-check:
	@command -v go >/dev/null 2>&1 || { \
		echo "tests/compat needs Go 1.26 or later on the PATH (Debian's golang-go is too old): https://go.dev/dl/" >&2; exit 1; }

reference: apt go-check $(REFERENCE)/classpath.txt $(SPARK_KAFKA)/classpath.txt $(KAFKA_SERVER)/classpath.txt

# Four workers, a test module each at a time (module fixtures stay whole): most of the suite's
# time is spent waiting on brokers, ZooKeeper sessions and Spark. On the 2-core machine four
# took the suite from 25.8 to 22.1 minutes (2026-11-27), the tests waiting on conditions, never
# on fixed sleeps, so that a crowded machine only makes them slower.
TEST_WORKERS ?= 4

test: setup reference
	$(BIN)/ruff check samsa tests bench fuzz
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

lint: setup
	$(BIN)/ruff check samsa tests bench fuzz
	$(BIN)/lint-imports
	$(BIN)/mypy

# Faults against a real cluster, Jepsen's workloads and checks (minutes; not in make test,
# which runs a few named scenarios from tests/chaos/test_faults.py). Needs root.
CHAOS_ROUNDS ?= 3
CHAOS_SEED ?= 1
chaos: setup
	cd tests && ../$(BIN)/python -m chaos.run --rounds $(CHAOS_ROUNDS) --seed $(CHAOS_SEED)

# Coverage-guided fuzzing (atheris) of the request path, the batch validator and log append,
# the compressed-batch readers and the coordinators' record decoders: 1,000,000 executions in
# all, each target bounded by FUZZ_MAX_TIME seconds. Not part of `make test`, which replays the
# kept corpus (tests/fuzz_corpus) without atheris. fuzz-merge also keeps what added coverage.
FUZZ_SCALE ?= 1
FUZZ_MAX_TIME ?= 900

fuzz: setup
	$(BIN)/pip install --quiet -e '.[test,fuzz]'
	$(BIN)/python fuzz/run_all.py --scale $(FUZZ_SCALE) --max-time $(FUZZ_MAX_TIME)

fuzz-merge: setup
	$(BIN)/pip install --quiet -e '.[test,fuzz]'
	$(BIN)/python fuzz/run_all.py --scale $(FUZZ_SCALE) --max-time $(FUZZ_MAX_TIME) --merge

# The import graph between samsa's packages, by layer (each imports only those below it).
import-graph: $(STAMP)
	$(BIN)/python tests/import_graph.py

# The broker in the foreground, the web console (samsa ui, http://127.0.0.1:8080/) beside it in
# the background; the trap stops the console when the broker stops (Ctrl-C).
UI_PORT ?= 8080

run: $(STAMP)
	@trap 'kill $$ui 2>/dev/null; wait $$ui 2>/dev/null' EXIT INT TERM; \
	$(BIN)/samsa ui --bootstrap-server 127.0.0.1:9092 --port $(UI_PORT) \
		--metrics-url http://127.0.0.1:9404/metrics & ui=$$!; \
	$(BIN)/samsa server --override log.dirs=data --override prometheus.listener=http://127.0.0.1:9404

# The paper's deployment on Spark: live1, live2 mirrored into offline with the schema registry,
# frontends, loads, audit per source cluster, end-to-end latency (into ./demo; --single-cluster: one broker).
demo: $(STAMP)
	$(BIN)/samsa pipeline demo --workdir demo

bench: setup $(KAFKA_SERVER)/classpath.txt
	$(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python bench/broker_bench.py

bench-groups: setup
	$(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python bench/group_bench.py

bench-spark: setup $(SPARK_KAFKA)/classpath.txt
	$(BIN)/python bench/spark_bench.py

bench-cleaner: setup
	$(BIN)/python bench/cleaner_bench.py

bench-storage: setup
	$(BIN)/python bench/storage_bench.py

bench-txn: setup
	$(BIN)/python bench/txn_bench.py

bench-cluster: setup
	$(BIN)/python bench/cluster_bench.py

# Metrics on (prometheus.listener) against off, side by side: the broker's CPU per request
# (request_cost.py, not bound by a client) and every client workload (broker_bench.py).
bench-metrics: setup
	$(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python bench/metrics_cost.py
	$(BIN)/python bench/request_cost.py --metrics
	$(BIN)/python bench/broker_bench.py --brokers samsa,samsa-metrics \
		--workloads paper_batch1,paper_batch50,max_100b,consume,e2e_latency

bench-security: setup
	$(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python bench/broker_bench.py --brokers samsa,samsa-ssl,samsa-sasl-ssl \
		--workloads paper_batch1,paper_batch50,max_100b,consume,e2e_latency
	$(BIN)/python bench/tls_cost.py
	$(BIN)/python bench/sasl_auth_bench.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
