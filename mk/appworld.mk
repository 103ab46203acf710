# AppWorld lives in its own venv (it pins pydantic<2) and is reached over HTTP through its
# own environment server. Set-up: venv + `appworld install` (decrypts the app code offline),
# then generate the offline task set and check every variant with AppWorld's own evaluator
# (APPWORLD_JOBS worker processes). Licence-protected artefacts stay under .venvs/ (ignored).
# `rubricgym appworld setup` does the same from an installed rubricgym.

APPWORLD_VENV := .venvs/appworld
APPWORLD_PY := $(APPWORLD_VENV)/bin/python
APPWORLD_DATA := .venvs/appworld-data
APPWORLD_VERSION ?= 0.1.3.post1
APPWORLD_STAMP := $(APPWORLD_VENV)/.appworld-installed
APPWORLD_DATA_STAMP := $(APPWORLD_DATA)/.generated
APPWORLD_JOBS ?= 2

.PHONY: appworld

appworld: $(APPWORLD_DATA_STAMP)

$(APPWORLD_STAMP):
	test -x $(APPWORLD_PY) || $(PYTHON) -m venv $(APPWORLD_VENV)
	$(APPWORLD_PY) -m pip install -q --upgrade pip
	$(APPWORLD_PY) -m pip install -q "appworld==$(APPWORLD_VERSION)" "uvicorn"
	$(APPWORLD_VENV)/bin/appworld install
	touch $@

# The generator and the scenario code are committed; regenerate when they change.
$(APPWORLD_DATA_STAMP): $(APPWORLD_STAMP) adapters/appworld/generate.py $(wildcard adapters/appworld/tasks/*.py)
	$(APPWORLD_PY) adapters/appworld/generate.py --root $(APPWORLD_DATA) --jobs $(APPWORLD_JOBS)
	touch $@

SETUP_TARGETS += $(APPWORLD_DATA_STAMP)
