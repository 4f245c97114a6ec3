# Two commands do all set-up on a fresh machine:
#   make demo   the whole instructor flow on sample submissions, ending in the grade table
#   make test   the kit's own test suite
#   make test-fast   only its fast tier, the engine's unit tests and the sandbox's own (tests/conftest.py: FAST_TIER), in about a minute
# Python 3.11, the one pyproject.toml's requires-python and requirements.lock are for (torch stays exactly
# 2.13.0, for the reason given at setup below).  PYTHON=... names it; otherwise setup takes the first that
# really is 3.11 of: python3.11 on PATH, uv's, pyenv's, /usr/local and /opt, python3.  Found once, and only
# when a target uses it.
PYTHON_311_PLACES = $(HOME)/.pyenv/versions/3.11*/bin/python3.11 /usr/local/bin/python3.11 /opt/python3.11/bin/python3.11
VERSION_OF = -c 'import sys; print("%d.%d" % sys.version_info[:2])'
FIND_PYTHON_311 = for p in python3.11 $$(command -v uv >/dev/null 2>&1 && uv python find 3.11 2>/dev/null) \
	$(PYTHON_311_PLACES) python3; do [ "$$("$$p" $(VERSION_OF) 2>/dev/null)" = 3.11 ] && { command -v "$$p"; break; }; done
PYTHON ?= $(eval PYTHON := $(shell $(FIND_PYTHON_311)))$(PYTHON)
NO_PYTHON_311 = make setup needs Python 3.11$(if $(PYTHON), and $(PYTHON) is not one, and found none (python3.11 on PATH, uv python find 3.11, ~/.pyenv/versions/3.11*, /usr/local/bin)): install it (Debian 12: apt install python3.11-venv; Ubuntu 24.04: apt install python3.11-venv from the deadsnakes PPA; anywhere: uv python install 3.11 or pyenv install 3.11), or name it with make setup PYTHON=/path/to/python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast durations setup benchmark browser containers

setup: $(STAMP)

# torch==2.13.0 is always its CPU build.  A machine whose pip finds a local wheel of it (its find-links, as on the
# course machines) installs that one; any other (a laptop, a server) gets it from PyTorch's CPU index, whose
# 2.13.0+cpu sorts above PyPI's multi-GB CUDA build of 2.13.0.  TORCH_INDEX=URL names another index, TORCH_INDEX=
# none at all.  requirements.lock pins everything else.
# (find-links from pip's configuration files and from PIP_FIND_LINKS alike; evaluated only when setup runs)
FIND_LINKS = $(subst file://,,$(shell $(PYTHON) -m pip config list 2>/dev/null | sed -n "s/.*find-links='\(.*\)'/\1/p") $(PIP_FIND_LINKS))
LOCAL_TORCH = $(foreach d,$(FIND_LINKS),$(wildcard $(d)/torch-2.13.0+cpu-*.whl))
TORCH_INDEX ?= $(if $(LOCAL_TORCH),,https://download.pytorch.org/whl/cpu)
$(STAMP): pyproject.toml requirements.lock
	$(if $(wildcard $(BIN)/python),,$(if $(and $(PYTHON),$(filter 3.11,$(shell $(PYTHON) $(VERSION_OF) 2>/dev/null))),,$(error $(NO_PYTHON_311))))
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) \
		-c requirements.lock -e '.[instructor,test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m autograder.authoring.demo

# the browser tests drive Debian's chromium (tests/test_browser.py); nothing downloads a browser
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
browser:
	command -v chromium >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# the container tests (tests/test_containers.py) grade in real Docker and Podman containers: Debian's dockerd
# (the tests start it), rootful Podman on runc, and mmdebstrap for the root file system; nothing is pulled
CONTAINER_PACKAGES := docker.io podman mmdebstrap runc
containers:
	@missing=$$(for p in $(CONTAINER_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed$$' || echo $$p; done); \
	test -z "$$missing" || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; }

test: $(STAMP) browser containers
	$(BIN)/python -m pytest -q -n 2 --dist loadfile tests

# measures each test file's time in a full run, which orders the files of the next runs (tests/conftest.py)
durations: $(STAMP) browser containers
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --record-durations tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not slow" tests

benchmark: $(STAMP)
	$(BIN)/python -m autograder.authoring.benchmark
