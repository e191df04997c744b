# The habits: `make setup`, `make serve`, `make test`, `make lint`, `make bench`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DASHBOARD := frontend/dist/index.html
DASHBOARD_SOURCES := $(shell find frontend/src frontend/index.html frontend/package-lock.json \
	frontend/vite.config.ts frontend/tsconfig.json frontend/openapi.json -type f 2>/dev/null)

.PHONY: setup serve test test-envs lint format bench learning-table learning-report clean

setup: $(STAMP) $(DASHBOARD)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,bench,wandb,ray,menagerie,export]"
	$(PY) -m pip install --quiet --no-deps jax2onnx==0.17.1
	touch $(STAMP)

# The dashboard: built once, served by the API from frontend/dist.
$(DASHBOARD): $(DASHBOARD_SOURCES)
	cd frontend && npm ci --no-audit --no-fund --loglevel=error && npm run build

serve: setup
	$(VENV)/bin/nnx-ppo serve $(SERVE_ARGS)

test: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports
	cd frontend && npm test && npm run format-check && NNX_PPO_PYTHON=$(abspath $(PY)) npm run check-api
	$(PY) -m pytest -n 2 --dist loadfile

# Every available env (all 54 of Playground's with the menagerie extra): two tiny PPO iterations
# from its preset, a checkpoint, restore, train on, checkpoint again, a frame (long: not in
# `make test`, which runs a Spot/H1/Aloha subset: tests/envs/test_menagerie_envs.py).
# `python -m bench.env_table` writes the same check as a table (bench/results/envs.md).
test-envs: setup
	$(PY) -m pytest -q tests/envs/test_every_env.py tests/envs/test_randomization_go1.py --every-env

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports

format: setup
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

bench: setup
	$(PY) -m bench.compare

# The learning table against Brax (bench/RESULTS.md): every missing (env, library, seed) cell,
# one at a time, in the background at the lowest priority; run it again to resume. Progress:
# bench/results/learning-table/runner.log; `python -m bench.learning_cells status`.
learning-table: setup
	mkdir -p bench/results/learning-table
	nohup nice -n 19 $(PY) -m bench.learning_cells run --timeout-s 10800 >> bench/results/learning-table/runner.log 2>&1 &
	@echo "learning table running in the background; log: bench/results/learning-table/runner.log"

# bench/results/learning-table.md and its PNGs from the cells finished so far.
learning-report: setup
	$(PY) -m bench.learning_report

clean:
	rm -rf $(VENV) .cache .pytest_cache .ruff_cache .import_linter_cache frontend/node_modules frontend/dist
