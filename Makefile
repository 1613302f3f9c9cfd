# Timeshare: `make run` starts the seeded portal, `make test` runs the whole suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test bench lint install migrate seed worker clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

migrate: install
	$(BIN)/python manage.py migrate --noinput

seed: migrate
	$(BIN)/python manage.py seed_demo

# The portal on http://$(HOST):$(PORT) plus a Celery worker with an embedded beat, all on the
# embedded defaults (SQLite, filesystem broker, simulated fleet), with a load replayed from the
# Philly trace at 60x speed. scripts/supervise.py restarts whichever crashes; Ctrl-C stops
# everything within 10 s.
run: seed
	@echo "Timeshare on http://$(HOST):$(PORT)/"
	@SECURE_COOKIES=0 $(BIN)/python scripts/supervise.py \
	  "worker=$(BIN)/celery -A portal worker --beat --loglevel=INFO --concurrency=2" \
	  "load=$(BIN)/python manage.py demo_load --speed 60 --failure-rate 2" \
	  "web=$(BIN)/python manage.py runserver --noreload $(HOST):$(PORT)"

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: install
	$(BIN)/python bench/run.py

# ruff, then the import contracts in pyproject.toml (layers, a pure engine, a fleet at the ground)
lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports

clean:
	rm -rf var/celery var/timeshare.sqlite3 var/static
