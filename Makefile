# flamedeck — `make run` serves the dashboard, `make test` runs the whole suite.
PY := .venv/bin/python
PORT ?= 8000
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: setup run test lint format screenshots bench worker

.venv/.installed: pyproject.toml
	python3 -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	.venv/bin/pip install -q -e '.[dev]'
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

setup: .venv/.installed node_modules/.installed

run: setup
	$(PY) manage.py preflight
	$(PY) manage.py migrate --noinput
	$(PY) manage.py bootstrap
	$(PY) manage.py serve --port $(PORT)

worker: setup
	.venv/bin/celery -A config worker -l info

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

format: setup
	.venv/bin/ruff format .
	.venv/bin/ruff check --fix .

screenshots: setup
	FLAMEDECK_SCREENSHOTS_DIR=docs/screenshots $(PY) -m pytest tests/browser/test_screenshots.py tests/browser/test_group.py -q

bench: setup
	$(PY) bench/bench_engine.py
	$(PY) bench/bench_pages.py
	$(PY) bench/bench_capture.py
