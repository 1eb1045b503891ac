# The two commands of the README: `make demo` and `make test`. Each needs only Python 3.11+:
# it installs uv with pip if it is missing, creates .venv and installs the workspace into it.
PYTHON ?= python3
UV := $(PYTHON) -m uv
VENV := .venv
STAMP := $(VENV)/.synced

.PHONY: demo test lint typecheck unit engines github-openapi devcontainer-cli registry docker browser bench clean

$(STAMP): pyproject.toml uv.lock core/pyproject.toml $(wildcard plugins/*/pyproject.toml)
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet --disable-pip-version-check uv
	$(UV) sync --frozen --python $(PYTHON)
	@touch $@

demo: $(STAMP)
	$(VENV)/bin/shadowclone demo

engines:
	scripts/install-engines

# GitHub's pinned OpenAPI description, which the tests check the fake GitHub's requests and
# answers against; under CI=true a failure stops `make test`, elsewhere the fake then goes
# unchecked, saying why.
github-openapi:
	@if scripts/install-github-openapi; then :; \
	elif [ "$$CI" = true ]; then echo "make: CI=true needs GitHub's OpenAPI description" >&2; exit 1; \
	else echo "make: no OpenAPI description here: the fake GitHub goes unchecked" >&2; fi

# The pinned Dev Containers CLI that setup reads devcontainer.json with (tools/devcontainer-cli);
# under CI=true a failure stops `make test`, elsewhere the tests that need it skip, saying why.
devcontainer-cli:
	@if scripts/install-devcontainer-cli; then :; \
	elif [ "$$CI" = true ]; then echo "make: CI=true needs the Dev Containers CLI" >&2; exit 1; \
	else echo "make: no Dev Containers CLI here: the tests that read devcontainer.json will skip" >&2; fi

# A Docker registry (tools/registry) the Docker tests publish features to on loopback; under
# CI=true a failure stops `make test`, elsewhere those tests skip, saying why.
registry:
	@if scripts/install-registry; then :; \
	elif [ "$$CI" = true ]; then echo "make: CI=true needs the Docker registry" >&2; exit 1; \
	else echo "make: no Docker registry here: the tests that publish to one will skip" >&2; fi

# A Docker engine and the clone image for the Docker tests (docker.io, dockerd, a debootstrap
# base, then image/Dockerfile). Under CI=true a failure stops `make test`; elsewhere (no root,
# no Docker) the Docker tests then skip, each saying why.
docker: $(STAMP)
	@if scripts/start-docker && scripts/build-image; then :; \
	elif [ "$$CI" = true ]; then echo "make: CI=true needs Docker and the clone image" >&2; exit 1; \
	else echo "make: no Docker engine or clone image here: the Docker tests will skip" >&2; fi

# Chromium and its driver for the dashboard's browser tests; under CI=true a failure stops
# `make test`, elsewhere those tests skip, saying why.
browser:
	@if scripts/install-browser; then :; \
	elif [ "$$CI" = true ]; then echo "make: CI=true needs Chromium for the browser tests" >&2; exit 1; \
	else echo "make: no Chromium here: the browser tests will skip" >&2; fi

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP)
	scripts/open-python-path $(VENV)/bin/python
	$(VENV)/bin/pytest $(PYTEST_ARGS)

test: $(STAMP) engines github-openapi devcontainer-cli registry docker browser lint typecheck unit

# Every benchmark in full, as one table: each figure against a floor measured in the same run,
# with its goal; written to bench-results.json (compare two commits with
# `scripts/bench-table --compare OLD.json`). `make test` runs each in its quick mode only.
bench: $(STAMP)
	$(VENV)/bin/python scripts/bench-table --out bench-results.json

clean:
	rm -rf $(VENV) tools
