# adkweb: `make run` (embedded demo on http://127.0.0.1:8000) and `make test` (the whole suite).
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed

# Services used by the integration tests (override to point elsewhere).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/adkweb
TEST_REDIS_URL ?= redis://127.0.0.1:6379/13

.PHONY: install run test test-unit test-integration test-browser lint types contracts services-run bench clean

# What the app needs to run (requirements.txt), then what tests and checks add (requirements-dev.txt).
$(RUN_STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP) requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	@touch $(STAMP)

install: $(STAMP)

run: $(RUN_STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py demo_setup
	@echo "adkweb: http://127.0.0.1:8000  (logins: approver/approver-demo, requester/requester-demo, admin/admin-demo)"
	$(PY) manage.py runserver 127.0.0.1:8000 --noreload

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports
	$(PY) manage.py makemigrations --check --dry-run > /dev/null
	$(PY) -m pytest tests --ignore=tests/integration --ignore=tests/browser -q
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(PY) -m pytest tests/integration -q
	$(PY) -m pytest tests/browser -q

test-unit: $(STAMP)
	$(PY) -m pytest tests --ignore=tests/integration --ignore=tests/browser -q

test-integration: $(STAMP)
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(PY) -m pytest tests/integration -q

test-browser: $(STAMP)
	$(PY) -m pytest tests/browser -q

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

types: $(STAMP)
	$(PY) -m mypy

contracts: $(STAMP)
	$(VENV)/bin/lint-imports

# Services mode: PostgreSQL + Redis, web, worker and beat as separate processes (see Procfile).
services-run: $(RUN_STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py demo_setup
	$(VENV)/bin/honcho start

bench: $(STAMP)
	$(PY) bench/session_store.py && $(PY) bench/turn_path.py

clean:
	rm -rf $(VENV) db.sqlite3 test-artifacts
