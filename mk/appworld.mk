# AppWorld lives in its own venv (it pins pydantic<2) and is reached over HTTP through its
# own environment server. Set-up: venv + `appworld install` (decrypts the app code offline),
# then the offline task set, generated with AppWorld's own code and every variant checked with
# its evaluator. The task set is generated once per data version (AppWorld's version + the
# generator's code) and kept in ~/.cache/rubricgym/appworld-data/<version>/ (or
# $RUBRICGYM_CACHE), so a fresh clone copies it instead of checking 306 variants again.
# Licence-protected artefacts stay under .venvs/ and the cache (never committed).
# `rubricgym appworld setup` is the same step; `make appworld` runs it.

APPWORLD_DATA := .venvs/appworld-data
APPWORLD_JOBS ?= 2
APPWORLD_DATA_STAMP := $(APPWORLD_DATA)/.data-version

.PHONY: appworld

appworld: $(APPWORLD_DATA_STAMP)

# Re-checked only when the generator's code changes; the step itself skips an up-to-date version.
$(APPWORLD_DATA_STAMP): $(STAMP) adapters/appworld/generate.py $(wildcard adapters/appworld/tasks/*.py)
	$(PY) -m rubricgym.cli appworld setup --base . --python $(PYTHON) --jobs $(APPWORLD_JOBS) \
	  --installer scripts/fast_install.py
	touch $@

SETUP_TARGETS += $(APPWORLD_DATA_STAMP)
