# Two commands: `make lab` (set up and open the course) and `make test` (set up and test).
# Set-up is idempotent: a tree that is already set up is not installed again.
#
# Overridable: PYTHON, VENV, NP (ranks), MPICC, MPIEXEC, PORT, TOKEN, PYTEST_ARGS, JOBS.
# With an active conda env that has MPI (environment.yml), its python, mpicc and mpiexec are
# used instead of a venv with the mpich wheel.

PYTHON ?= python3
VENV ?= .venv
NP ?= 2
PORT ?= 8888
PYTEST_ARGS ?=

ifneq ($(and $(CONDA_PREFIX),$(wildcard $(CONDA_PREFIX)/bin/mpicc)),)
  BIN := $(CONDA_PREFIX)/bin
  STAMP := $(CONDA_PREFIX)/.pingpong-lab-installed
  EXTRAS := course,dev
else
  BIN := $(abspath $(VENV))/bin
  STAMP := $(VENV)/.installed
  EXTRAS := mpi,course,dev
endif
PY := $(BIN)/python
MPICC ?= $(BIN)/mpicc
MPIEXEC ?= $(BIN)/mpiexec
export MPICC MPIEXEC
# Tools installed in the venv (mpicc, jupyter, nbgrader) come first on PATH.
export PATH := $(BIN):$(PATH)

.PHONY: setup sandbox slurm kernels lab test test-fast lint release autograde solutions check-course report bench bench-peers clean

setup: $(STAMP) kernels

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(if $(findstring $(VENV),$(STAMP)),$(VENV)/bin/python)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $@

kernels: $(STAMP)
	$(MAKE) --no-print-directory -C kernels_c MPICC="$(MPICC)"

lab: setup
	@echo "Opening the course; the URL with its token is printed below (Ctrl-C to stop)."
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.port=$(PORT) \
		--ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/exercises \
		$(if $(TOKEN),--IdentityProvider.token=$(TOKEN)) \
		$(if $(filter 0,$(shell id -u)),--allow-root) --no-browser

# Everything: lint, then unit, MPI and course tiers (tests/unit, tests/mpi, tests/course).
test: setup sandbox slurm lint
	$(PY) -m pytest $(PYTEST_ARGS)

# The inner loop: unit tests only (seconds, no MPI job, no nbgrader run).
test-fast: setup
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# ruff on the Python and the notebooks; the C (kernels and grading C) built with -Werror.
lint: setup
	$(BIN)/ruff check pingpong_lab tests course
	$(BIN)/ruff format --check pingpong_lab tests
	$(MAKE) --no-print-directory -s -C kernels_c MPICC="$(MPICC)" BUILD=build/lint WERROR=-Werror

release: setup
	cd course && $(PY) -m pingpong_lab.course.build release

# bubblewrap isolates each graded submission (no network, private processes, read-only course);
# installed with apt-get when root on Debian/Ubuntu, otherwise grading says it is not isolated.
sandbox:
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& { apt-get install -y -qq bubblewrap >/dev/null 2>&1 || { apt-get update -qq \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; }; }; } \
		|| echo "sandbox: bubblewrap not installed (needs root and apt-get); grading runs unisolated"

# A single-node Slurm (Debian's slurm-wlm 22.05: slurmctld, slurmd, clients) for the `slurm` test
# tier (tests/slurm), which starts its own daemons in a temporary directory and skips without
# them. Installed with apt-get when root on Debian/Ubuntu; otherwise one line says why not.
SLURM_PKGS = slurmctld slurmd slurm-client
slurm:
	@if command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
	    && command -v sbatch >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      $(SLURM_PKGS) >/dev/null 2>&1 || { apt-get update -qq \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      $(SLURM_PKGS) >/dev/null; }; } \
	  || echo "slurm: slurm-wlm could not be installed; the slurm tests skip"; \
	else echo "slurm: not installed (needs root: apt-get install $(SLURM_PKGS)); the slurm tests skip"; fi

# JOBS students are graded at once (default: the cores); course/grades.csv sums it up.
autograde: setup sandbox
	cd course && $(PY) -m pingpong_lab.course.build autograde $(if $(JOBS),--jobs $(JOBS))

solutions: setup
	cd course && $(PY) -m pingpong_lab.course.build solutions

check-course: setup
	cd course && $(PY) -m pingpong_lab.course.build check

report: setup
	$(PY) -m pingpong_lab report --np $(NP) --out report

bench: setup bench-peers
	$(PY) -m pingpong_lab bench --np $(NP) --out bench-results

# NetPIPE (Debian's MPI and TCP builds) and Debian's MPICH headers, to compare our C kernel with
# NetPIPE on the same MPI. Only `make bench` needs them; without root or apt-get the bench's
# netpipe rows say "not measured" and why.
NETPIPE_PKGS = netpipe-tcp netpipe-mpich2 libmpich-dev
bench-peers:
	@if command -v NPtcp >/dev/null && command -v NPmpich2 >/dev/null \
	    && command -v mpicc.mpich >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends $(NETPIPE_PKGS) >/dev/null; } \
	  || echo "NetPIPE could not be installed: the bench reports it as not measured"; \
	else echo "NetPIPE not installed (needs root: apt-get install $(NETPIPE_PKGS))"; fi

clean:
	$(MAKE) -C kernels_c clean
	rm -rf build *.egg-info .pytest_cache
