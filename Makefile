# flamedeck — `make run` serves the dashboard, `make test` runs the whole suite.
PY := .venv/bin/python
# The interpreter `.venv` is made from. By default the distribution's own CPython where it
# can make a virtual environment (Debian's python3-venv): Debian builds it with PGO and
# LTO and links libpython into the executable, and it runs this project's Python 15-35%
# faster than a source build with --enable-shared such as pyenv's (the engine's property
# tests 28-31 instead of 38-43 CPU-s, two URL walks 38 instead of 44-46; the suite 443
# instead of 544 s; docs/figures.md). Else python3 on PATH. Another: `make setup
# PYTHON=python3.12` (after `rm -r .venv`).
PYTHON ?= $(shell /usr/bin/python3 -c 'import ensurepip, sys; assert sys.version_info >= (3, 11)' 2>/dev/null && echo /usr/bin/python3 || echo python3)
PORT ?= 8000
# The address `make run` binds: this machine only; HOST=0.0.0.0 serves the nodes of a
# job (docs/serving.md).
HOST ?= 127.0.0.1
# Bytecode is cached (__pycache__/ is ignored by git), whatever the shell says: without
# it every test process rewrote and compiled every test module again (collection 5.3 s
# a process instead of 2.2 s), and every worker and `manage.py` it started compiled the
# project's own modules.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup run test test-fast lint format screenshots bench worker static docs torchenv

.venv/.installed: pyproject.toml
	$(PYTHON) -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	.venv/bin/pip install -q -e '.[dev]'
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

setup: .venv/.installed node_modules/.installed

# PyTorch (CPU) in a venv of its own, for the tests that start real gloo jobs (a hung
# rank, a relaunch) and the recorders in bench/. Pinned: this machine kind keeps that
# wheel on disk (PIP_FIND_LINKS); `torch` unpinned would fetch a CUDA build of several GB.
# The tests find it at .torchenv/ (or TORCH_PYTHON); without it they skip, or fail under CI.
torchenv: .torchenv/.installed

.torchenv/.installed:
	$(PYTHON) -m venv .torchenv
	.torchenv/bin/pip install -q --only-binary=:all: torch==2.13.0
	# Real framework jobs (bench/targets/: hf_job.py, lightning_job.py); torch pinned so pip keeps it.
	.torchenv/bin/pip install -q torch==2.13.0 transformers accelerate lightning
	touch $@

run: setup
	$(PY) manage.py preflight
	$(PY) manage.py migrate --noinput
	$(PY) manage.py bootstrap
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

worker: setup
	$(PY) manage.py serve --workers-only

# Production static files: hashed, bundled offline, pre-compressed (run with COMPRESS_OFFLINE=1
# in the environment the web server gets too).
static: setup
	COMPRESS_OFFLINE=1 $(PY) manage.py collectstatic --noinput -v0
	COMPRESS_OFFLINE=1 $(PY) manage.py compress --force
	$(PY) -m whitenoise.compress -q $${FLAMEDECK_VAR_DIR:-var}/static/CACHE

# The whole suite in four processes (pytest-xdist) on two cores: many tests wait on a
# sampling window, an ssh login or a page, and two processes left the cores 40% idle.
# The longest tests go first, one at a time; tests marked `alone` (timing on this
# machine) run last with nothing beside them (tests/support/parallel.py). The 25
# slowest tests are printed at the end. One process: PYTEST_ARGS="-n 0".
test: setup
	$(PY) -m pytest -n 4 --durations=25 $(PYTEST_ARGS)

# The edit loop: engine, models, views and API, on whatever database answers; no
# browser, sshd, Celery worker or real sampling. Two processes (it waits on the database
# more than it computes).
test-fast: setup
	$(PY) -m pytest -n 2 -m "not (browser or sshd or services or slow)" $(PYTEST_ARGS)

# The documentation site (mkdocs.yml) into var/site/; strict: a broken link or anchor,
# or a page missing from the navigation, fails the build.
docs: setup
	@# Never --quiet: it hides the warnings --strict counts, and nothing would fail.
	.venv/bin/mkdocs build --strict

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

format: setup
	.venv/bin/ruff format .
	.venv/bin/ruff check --fix .

screenshots: setup
	FLAMEDECK_SCREENSHOTS_DIR=docs/screenshots $(PY) -m pytest tests/browser/test_screenshots.py tests/browser/test_group.py -q

bench: setup
	$(PY) bench/engine/bench_engine.py
	$(PY) bench/app/bench_pages.py
	$(PY) bench/app/bench_capture.py
	$(PY) bench/app/bench_group.py
	$(PY) bench/app/bench_hostile.py
	$(PY) bench/app/bench_series.py
	$(PY) bench/suite/bench_ssh.py
