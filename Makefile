# Two entry points, both usable on a fresh machine (Python 3.10+, gcc, Java 17, Node 20):
#   make demo   - install everything into .venv, then run the example backfill
#   make test   - install everything into .venv, then run the whole test suite (both decoder modes)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export PYSPARK_PYTHON        := $(abspath $(BIN)/python)
export PYSPARK_DRIVER_PYTHON := $(abspath $(BIN)/python)
# Bytecode cached, whatever the calling shell says: with PYTHONDONTWRITEBYTECODE set, every test
# worker, Spark Python worker and CLI subprocess compiles the package (and pytest re-rewrites every
# test file) from source; collecting the suite alone cost 15 CPU-s a worker that way, 5.4 with the
# cache.  The cache lives in .pycache/, outside the source tree (sys.pycache_prefix).
export PYTHONDONTWRITEBYTECODE :=
export PYTHONPYCACHEPREFIX     := $(abspath .pycache)

.PHONY: install demo test test-native test-pure bench clean spark35 lint pyspark-venvs

install: $(STAMP)

$(STAMP): pyproject.toml setup.py package.json $(wildcard native/*.c native/*.h)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/pip install --quiet -e '.[dev]'
	npm install --no-audit --no-fund --loglevel=error
	$(BIN)/python -c "import kafka_tiered_source as k; print('kafka-tiered', k.__version__, 'decoder:', k.decoder_backend())"
	touch $@

demo: install
	$(BIN)/python examples/backfill.py

# The second venv the Spark 3.5 tests run in (.venv-spark35: pyspark 3.5 + this checkout,
# editable); made once, remade when tests/spark35_venv.py's requirements or the packaging change.
spark35: install
	$(BIN)/python tests/spark35_venv.py

# Small venvs with pyspark 4.0, 4.1 and 4.2 (.venv-pyspark-4.N: that pyspark, the rest from .venv)
# for the checks that must hold on every Spark the format supports (tests/pyspark_venvs.py).
pyspark-venvs: install
	$(BIN)/python tests/pyspark_venvs.py

# Lint and types first (ruff, then mypy: under a minute; a finding fails the run, both
# configured in pyproject.toml), then the whole suite with the native decoder, then the tests
# marked `decoder` again with the pure-Python reference decoder (KAFKA_TIERED_NO_EXTENSIONS=1),
# as aiokafka does.  Marked are the tests that exercise decoding
# (fixtures, codecs, corrupt input, transactions, lz4, batches cut by parts or offsets, the
# metadata topic, reads through Spark...); a test that only takes bytes a marked test already
# decodes through Spark, storage, fallback or cost plumbing runs in the native pass only.
#
# Three pytest workers (pytest-xdist) on two cores: most of a test's time is spent waiting (a JVM
# starting, a broker answering, a timeout running out), so a third worker fills the gaps.  A test
# file runs whole on one worker (its module fixtures are made once), the longest files first
# (tests/conftest.py; xdist would otherwise start the files with the most tests first).
# TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 3
PYTEST = $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: install spark35 pyspark-venvs
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(PYTEST)
	KAFKA_TIERED_NO_EXTENSIONS=1 $(PYTEST) -m "decoder"

# The first two steps of `make test` alone: pyflakes + bugbear over everything (ruff) and the
# types of the package (mypy); both configured in pyproject.toml.
lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: install
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf build dist .pycache $(VENV) .venv-spark35 .venv-pyspark-* node_modules *.egg-info kafka_tiered_source/_native*.so
