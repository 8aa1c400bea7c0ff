# Two commands: `make lab` (set up and open the course) and `make test` (set up and test).
# Set-up is idempotent: a tree that is already set up is not installed again.
#
# Overridable: PYTHON, MPI (wheel or system), VENV, NP (ranks), MPICC, MPIEXEC, PORT, TOKEN,
# PYTEST_ARGS, JOBS, NB, LAB_DIR (what `make lab` serves), COURSE (what `make instructor` serves).
# With an active conda env that has MPI (environment.yml), its python, mpicc and mpiexec are
# used instead of a venv with the mpich wheel.

PYTHON ?= python3
# MPI=wheel (default): the mpich wheel from PyPI in .venv. MPI=system: the MPI on PATH (a site's
# `module load`, or Debian's mpich from `make system-mpi`) in .venv-system, with mpi4py built
# from source against its mpicc; the wheel venv is left as it is.
MPI ?= wheel
ifeq ($(filter wheel system,$(MPI)),)
  $(error MPI=$(MPI): choose MPI=wheel (the mpich wheel) or MPI=system (the MPI on PATH))
endif
VENV ?= $(if $(filter system,$(MPI)),.venv-system,.venv)
NP ?= 2
PORT ?= 8888
PYTEST_ARGS ?=

ifneq ($(and $(CONDA_PREFIX),$(wildcard $(CONDA_PREFIX)/bin/mpicc)),)
  BIN := $(CONDA_PREFIX)/bin
  STAMP := $(CONDA_PREFIX)/.pingpong-lab-installed
  EXTRAS := course,dev,hub
else ifeq ($(MPI),system)
  BIN := $(abspath $(VENV))/bin
  STAMP := $(VENV)/.installed
  EXTRAS := course,dev,hub
  MPICC ?= $(shell command -v mpicc)
  MPIEXEC ?= $(shell command -v mpiexec)
else
  BIN := $(abspath $(VENV))/bin
  STAMP := $(VENV)/.installed
  EXTRAS := mpi,course,dev,hub
endif
PY := $(BIN)/python
MPICC ?= $(BIN)/mpicc
MPIEXEC ?= $(BIN)/mpiexec
export MPICC MPIEXEC
# Tools installed in the venv (mpicc, jupyter, nbgrader) come first on PATH.
export PATH := $(BIN):$(PATH)

.PHONY: setup system-mpi sandbox slurm kernels lab instructor validate browser hub hub-tools test test-fast test-system-mpi lint release autograde cohort solutions check-course report bench bench-peers link-tools link-dataset clean

setup: $(STAMP) kernels

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(if $(findstring $(VENV),$(STAMP)),$(VENV)/bin/python)
	$(PY) -m pip install --quiet --upgrade pip
ifeq ($(MPI),system)
	@[ -x "$(MPICC)" ] || { echo "MPI=system: no mpicc on PATH; load the site's MPI" \
		"(module load ...) or, as root on Debian, run make system-mpi"; exit 1; }
	@case "$(MPICC)" in $(CURDIR)/.venv/*) echo "MPI=system: $(MPICC) is the wheel's" \
		"mpicc; run make without the wheel venv on PATH"; exit 1;; esac
	MPICC="$(MPICC)" $(PY) -m pip install --quiet --no-cache-dir --no-binary mpi4py "mpi4py>=4.0"
endif
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $@

# The kernels of each MPI live apart (kernels_c/build, kernels_c/build-system; the environment's
# pingpong-lab-kernels file names its folder) and are rebuilt when the mpicc changes.
KBUILD := $(if $(filter system,$(MPI)),build-system,build)
kernels: $(STAMP)
	@[ "$$(cat kernels_c/$(KBUILD)/.mpicc 2>/dev/null)" = "$(MPICC)" ] || rm -rf kernels_c/$(KBUILD)
	$(MAKE) --no-print-directory -C kernels_c MPICC="$(MPICC)" BUILD=$(KBUILD)
	@echo "$(MPICC)" > kernels_c/$(KBUILD)/.mpicc
	$(if $(filter system,$(MPI)),@echo $(KBUILD) > $(VENV)/pingpong-lab-kernels)

# The labs get their own Jupyter settings (jupyter/student, jupyter/instructor) and keep what
# they write in .jupyter-state/: ~/.jupyter is neither read nor written. jupyter/<lab>/share
# comes first on JUPYTER_PATH: the student lab's python3 kernel loads the course's cell check
# (pingpong_lab/grader/labcheck.py), which says at once which line grading would refuse.
LAB_STATE := $(CURDIR)/.jupyter-state
# $(call jupyterlab,settings,root folder,first page)
jupyterlab = JUPYTER_CONFIG_DIR="$(CURDIR)/jupyter/$(1)" JUPYTER_DATA_DIR="$(LAB_STATE)/data" \
	JUPYTER_PATH="$(CURDIR)/jupyter/$(1)/share$${JUPYTER_PATH:+:$$JUPYTER_PATH}" \
	JUPYTER_RUNTIME_DIR="$(LAB_STATE)/runtime" \
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.port=$(PORT) \
	--ServerApp.root_dir="$(2)" --LabApp.default_url=$(3) \
	--LabApp.user_settings_dir="$(LAB_STATE)/$(1)/user-settings" \
	--LabApp.workspaces_dir="$(LAB_STATE)/$(1)/workspaces" \
	$(if $(TOKEN),--IdentityProvider.token=$(TOKEN)) \
	$(if $(filter 0,$(shell id -u)),--allow-root) --no-browser

# The student lab: LAB_DIR (the repository) opened on exercises/, Validate as the grader runs it,
# no instructor tools.
LAB_DIR ?= $(CURDIR)
lab: setup
	@echo "Opening the course; the URL with its token is printed below (Ctrl-C to stop)."
	$(call jupyterlab,student,$(abspath $(LAB_DIR)),/lab/tree/exercises)

# The instructor lab: the nbgrader course COURSE (course/) with Formgrader (Nbgrader menu).
COURSE ?= course
instructor: setup
	@echo "Opening the course for instructors; the URL with its token is printed below."
	cd "$(COURSE)" && $(call jupyterlab,instructor,$(abspath $(COURSE)),/lab)

# Run notebooks as the grader will (course settings, grading mode) and say which tests fail:
# make validate [NB="03_variability 04_model"] (default: every exercise).
validate: setup
	$(PY) -m pingpong_lab.grader validate $(NB)

# Everything: lint, then unit, MPI, course, Slurm and browser tiers (tests/unit, mpi, course,
# slurm, browser).
test: setup sandbox slurm link-tools browser hub-tools lint
	$(PY) -m pytest $(PYTEST_ARGS)

# The inner loop: unit tests only (seconds, no MPI job, no nbgrader run).
test-fast: setup
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# The slower tier left out of `make test`: the course built against the system MPI (root:
# installs Debian's MPICH; builds mpi4py from source in .venv-system, minutes).
test-system-mpi: setup
	$(PY) -m pytest -m system_mpi tests/mpi/test_system_mpi.py $(PYTEST_ARGS)

# ruff on the Python and the notebooks; the C (kernels and grading C) built with -Werror.
lint: setup
	$(BIN)/ruff check pingpong_lab tests course
	$(BIN)/ruff format --check pingpong_lab tests
	$(MAKE) --no-print-directory -s -C kernels_c MPICC="$(MPICC)" BUILD=build/lint WERROR=-Werror

release: setup
	cd course && $(PY) -m pingpong_lab.grader release

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

# JOBS students are graded at once (default: the cores); course/class-grading.csv sums it up.
autograde: setup sandbox
	cd course && $(PY) -m pingpong_lab.grader autograde $(if $(JOBS),--jobs $(JOBS))

# The class at a glance (after autograde): each student's measured numbers (from the results
# their notebooks saved into the submission) beside their written answers and the mark scheme,
# flagged when implausible, missing or copied; COURSE/cohort/cohort.html and cohort.csv.
cohort: setup
	$(PY) -m pingpong_lab cohort $(COURSE)

solutions: setup
	cd course && $(PY) -m pingpong_lab.grader solutions

check-course: setup
	cd course && $(PY) -m pingpong_lab.grader check

report: setup
	$(PY) -m pingpong_lab report --np $(NP) --out report

bench: setup bench-peers
	$(PY) -m pingpong_lab bench --np $(NP) --out bench-results

# Debian's MPICH (launcher and compiler wrapper), to run the same C kernel on a second MPICH
# build beside the PyPI wheel's. Only `make bench` needs it; without root or apt-get the bench's
# mpi-build rows say "not measured" and why.
DEBIAN_MPICH_PKGS = mpich libmpich-dev
bench-peers:
	@if command -v mpiexec.mpich >/dev/null && command -v mpicc.mpich >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends $(DEBIAN_MPICH_PKGS) >/dev/null; } \
	  || echo "Debian's MPICH could not be installed: the bench reports it as not measured"; \
	else echo "Debian's MPICH not installed (needs root: apt-get install $(DEBIAN_MPICH_PKGS))"; fi

# iproute2 (ip, tc) for `pingpong-lab sweep --link` (root: network namespaces, veth, tbf).
link-tools:
	@command -v ip >/dev/null && command -v tc >/dev/null \
	|| { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& { apt-get install -y -qq iproute2 >/dev/null 2>&1 || { apt-get update -qq \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null; }; }; } \
	|| echo "link-tools: iproute2 not installed (needs root and apt-get); sweep --link cannot run"

# Re-measure the dataset shipped for users without root: a sweep through an emulated 1 Gbit/s
# link (root), saved as pingpong_lab/course/shipped/link_1gbit.npz and .json.
LINK_ABOUT = C kernel, blocking ping-pong, 2 MPI ranks on one machine, each in its own network \
namespace, joined over TCP by veth cables with a tbf qdisc at 1 Gbit/s on both ends of each \
(pingpong-lab sweep --link rate=1gbit: MTU 9000, burst 125000 B). Median and fastest one-way \
times per size. On a machine busy with other work the medians of large messages fall below the \
rate; the fastest times show it.
link-dataset: setup link-tools
	$(BIN)/pingpong-lab sweep --np 2 --kernel c --mode blocking --link rate=1gbit \
		--min-bytes 1 --max-bytes 16777216 --budget 3 --out build/link_1gbit.csv
	$(PY) -m pingpong_lab.course.shipdata build/link_1gbit.csv link_1gbit "$(LINK_ABOUT)"

# The course on a JupyterHub (docs/deploying.md), as root: first
#   sudo .venv/bin/pingpong-lab hub accounts --instructor NAME STUDENT...
# then `sudo make hub` serves it on HUB_PORT (PINGPONG_LAB_HUB_SPAWNER=slurm: servers as Slurm
# jobs). Its proxy, configurable-http-proxy, comes from the npm registry into .hub-tools/
# (needs node and npm; without them the hub tests skip).
HUB_PORT ?= 8000
PROXY_VERSION = 4.6.3
hub-tools:
	@[ -x .hub-tools/node_modules/.bin/configurable-http-proxy ] || { command -v npm >/dev/null \
		&& mkdir -p .hub-tools && npm install --silent --no-audit --no-fund --prefix .hub-tools \
		configurable-http-proxy@$(PROXY_VERSION) >/dev/null; } \
		|| echo "hub-tools: npm is missing (Debian: apt-get install npm); the hub tests skip"

hub: setup hub-tools
	$(BIN)/jupyterhub -f hub/jupyterhub_config.py --port $(HUB_PORT)

# Debian's chromium for the browser tests (tests/browser, Playwright drives it; no browser is
# ever downloaded by Playwright). Installed with apt-get when root, otherwise those tests skip.
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends chromium >/dev/null; }; } \
		|| echo "browser: chromium not installed (needs root and apt-get); browser tests skip"

# Debian's MPICH as the system MPI (for MPI=system where no site MPI is loaded); needs root.
SYSTEM_MPI_PKGS = mpich libmpich-dev
system-mpi:
	@if command -v mpicc.mpich >/dev/null && command -v mpiexec.mpich >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends $(SYSTEM_MPI_PKGS) >/dev/null; } \
	  || { echo "system-mpi: apt-get could not install $(SYSTEM_MPI_PKGS)"; exit 1; }; \
	else echo "system-mpi: needs root and apt-get (apt-get install $(SYSTEM_MPI_PKGS))"; exit 1; fi

clean:
	$(MAKE) -C kernels_c clean
	rm -rf build kernels_c/build-system *.egg-info .pytest_cache
