# Two entry points (see README): `make demo` runs the workflow on the demo world,
# `make test` runs the whole test suite. Both set everything up first.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= 2
# pytest-xdist workers for `make test` (tests/conftest.py: the SLURM tests on one, the demo run shared)
TEST_WORKERS ?= 2

.PHONY: setup lock demo test browser-deps slurm-deps ingest-deps cpu-deps clean

# Every dependency (the package's and the tests') at the exact version and hashes of
# requirements.lock, then the package itself, with nothing resolved on the day
# (docs/reproducibility.md). `make lock` re-resolves the lock from pyproject.toml.
$(BIN)/mining: pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --require-hashes --no-deps -r requirements.lock
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	touch $(BIN)/mining

setup: $(BIN)/mining

# pip-tools in a venv of its own (it is no dependency of the package)
LOCKER := .venv-lock
lock:
	test -x $(LOCKER)/bin/pip-compile || ($(PY) -m venv $(LOCKER) && $(LOCKER)/bin/pip install -q pip-tools==7.7.0)
	$(LOCKER)/bin/pip-compile -q --generate-hashes --allow-unsafe --strip-extras --extra dev \
		--no-emit-index-url --no-emit-find-links --output-file requirements.lock pyproject.toml

browser-deps:
	@test -x /usr/bin/chromium || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

# A real single-node SLURM cluster for tests/slurm (started and stopped by the tests
# themselves, tests/slurm/slurmcluster.py): SLURM 22.05, munge, slurmdbd and MariaDB.
SLURM_PKGS := slurm-wlm slurmctld slurmd slurmdbd munge mariadb-server
slurm-deps:
	@test -x /usr/sbin/slurmctld -a -x /usr/sbin/slurmdbd -a -x /usr/sbin/munged -a -x /usr/sbin/mariadbd || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SLURM_PKGS) >/dev/null)

# lbzip2 decodes .bz2 metadata on several threads, ~20 % cheaper per byte than libbz2
# (`mining ingest` uses it when it is on PATH, else indexed_bzip2; tests/unit/stages/ingest/test_decompress.py
# runs both)
ingest-deps:
	@test -x /usr/bin/lbzip2 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq lbzip2 >/dev/null)

# QEMU's user-mode emulator: tests/workflow/test_any_cpu.py describes on an emulated Haswell
# (x86-64-v3 without AVX-512), whatever CPU runs the tests
cpu-deps:
	@test -x /usr/bin/qemu-x86_64 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user >/dev/null)

# the demo's figures in docs/demo.md (the README points there) are the run's own summary, copied
demo: setup
	$(BIN)/snakemake --cores $(CORES)
	cp results/demo/evaluation/summary.md docs/demo.md

test: setup browser-deps slurm-deps ingest-deps cpu-deps
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

clean:
	rm -rf $(VENV) $(LOCKER) results .snakemake
