# adkweb: `make run` (embedded demo on http://127.0.0.1:8000; `make run PORT=8080` elsewhere) and `make test`
# (the whole suite).
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed

# Where `make run` (and `make services-run`'s web process) listens: `make run PORT=8080`, or PORT in the
# environment. HOST only from the command line (`make run HOST=0.0.0.0`: every interface), since some shells
# export HOST as the machine's name. Links in notifications (emails, one-tap approval links) follow unless
# ADKWEB_BASE_URL is set (to the address people use: needed with HOST=0.0.0.0).
PORT ?= 8000
HOST := $(if $(filter command line override,$(origin HOST)),$(HOST),127.0.0.1)
LINK_HOST := $(if $(filter 0.0.0.0,$(HOST)),127.0.0.1,$(HOST))
ADKWEB_BASE_URL ?= http://$(LINK_HOST):$(PORT)
# The address a server binds to, free or not: said before migrating, not after (`make run PORT=8001`).
PORT_FREE = $(PY) -c 'import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((sys.argv[1], int(sys.argv[2])))' $(HOST) $(PORT) 2>/dev/null \
	|| { echo "adkweb: port $(PORT) on $(HOST) is in use (another server?): pick another, e.g. make $@ PORT=8001"; exit 1; }

# Services mode needs both services named (in .env or the environment): said before anything runs.
SERVICES_SET = $(VENV)/bin/honcho run $(PY) -c 'import os, sys; os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL") or sys.exit("adkweb: make $@ runs services mode: set DATABASE_URL and REDIS_URL (and DJANGO_SECRET_KEY) in .env or the environment (see .env.example). make run is the embedded demo.")'

# Services used by the integration tests (override to point elsewhere).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/adkweb
TEST_REDIS_URL ?= redis://127.0.0.1:6379/13

.PHONY: install run test test-unit test-integration test-browser lint types contracts services-run services-demo bench bench-install clean

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
	@$(PORT_FREE)
	$(PY) manage.py migrate --noinput
	ADKWEB_BASE_URL=$(ADKWEB_BASE_URL) $(PY) manage.py demo_setup --conversations
	@echo "adkweb: http://$(LINK_HOST):$(PORT)  (logins: approver/approver-demo, requester/requester-demo, admin/admin-demo)"
	ADKWEB_BASE_URL=$(ADKWEB_BASE_URL) $(PY) manage.py runserver $(HOST):$(PORT) --noreload

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

# Services mode: PostgreSQL + Redis, web, worker and beat as separate processes (see Procfile), with the
# environment of .env (DATABASE_URL, REDIS_URL, DJANGO_SECRET_KEY: see .env.example). Roles, no users:
# `honcho run .venv/bin/python manage.py createsuperuser` makes the first one. `make services-demo`
# adds the demo users (published passwords) and agents, for a local trial only.
services-run: $(RUN_STAMP)
	@$(SERVICES_SET)
	@$(PORT_FREE)
	$(VENV)/bin/honcho run $(PY) manage.py migrate --noinput
	$(VENV)/bin/honcho run $(PY) manage.py setup_roles
	$(VENV)/bin/honcho run $(PY) manage.py collectstatic --noinput
	ADKWEB_BASE_URL=$(ADKWEB_BASE_URL) $(VENV)/bin/honcho start --port $(PORT)

services-demo: $(RUN_STAMP)
	@$(SERVICES_SET)
	$(VENV)/bin/honcho run $(PY) manage.py migrate --noinput
	$(VENV)/bin/honcho run $(PY) manage.py demo_setup --allow-deployed

# Benchmarks (bench/README.md). PostgreSQL and Redis as for the integration tests; the benches create and
# drop databases named adkweb_bench_* (and test_adkweb_bench_*) on BENCH_PG and flush BENCH_REDIS_URL's DB.
# `make bench` runs every script at quick sizes (a few minutes); `make bench BENCH_FULL=1` at the issue's
# sizes (1,000 sockets, 100k tickets / 1M events: about half an hour on 2 cores).
BENCH_PG ?= postgres://postgres@127.0.0.1:5432
BENCH_REDIS_URL ?= redis://127.0.0.1:6379/5
BENCH_ENV := BENCH_PG=$(BENCH_PG) BENCH_REDIS_URL=$(BENCH_REDIS_URL)
BENCH_DB_ENV := DATABASE_URL=$(BENCH_PG)/adkweb_bench REDIS_URL=$(BENCH_REDIS_URL)
ifdef BENCH_FULL
HTTP_FLOW_ARGS := --rounds 40
PAGES_ARGS :=
FANOUT_ARGS := --sockets 1000 --rounds 3 --resume 30
else
HTTP_FLOW_ARGS := --rounds 10
PAGES_ARGS := --tickets 10000 --events 100000 --db adkweb_bench_pages_small
FANOUT_ARGS := --sockets 100 --rounds 2 --resume 10
endif

$(BENCH_STAMP): $(STAMP) requirements-bench.txt
	$(PY) -m pip install --quiet -r requirements-bench.txt
	@touch $(BENCH_STAMP)

bench-install: $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) bench/session_store.py
	$(BENCH_DB_ENV) $(PY) bench/session_store.py
	$(BENCH_DB_ENV) $(PY) bench/turn_path.py
	$(BENCH_ENV) $(PY) bench/http_flow.py $(HTTP_FLOW_ARGS)
	$(BENCH_ENV) $(PY) bench/pages.py $(PAGES_ARGS)
	$(BENCH_ENV) $(PY) bench/fanout.py $(FANOUT_ARGS)

clean:
	rm -rf $(VENV) db.sqlite3 test-artifacts
