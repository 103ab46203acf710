# verifiers (PrimeIntellect, 0.4.0): its own venv, because it needs openai<3 and the main venv
# has openai 3.x. It holds verifiers, rubricgym (editable, with the ALFWorld and WebShop extras)
# and the plugin module verifiers finds by name (plugins/verifiers: `vf-eval rubricgym-verifiers`),
# plus uv, which verifiers' chat harness runs its program with. docs/verifiers.md.

VERIFIERS_VERSION := 0.4.0
VERIFIERS_VENV := .venvs/verifiers
VERIFIERS_STAMP := $(VERIFIERS_VENV)/.installed-$(VERIFIERS_VERSION)

$(VERIFIERS_STAMP): pyproject.toml plugins/verifiers/pyproject.toml | $(STAMP)  # the main venv holds the uv it installs with
	@echo "[setup] the verifiers venv $(VERIFIERS_VENV) (verifiers $(VERIFIERS_VERSION), rubricgym[alfworld,webshop]; seconds with warm caches)"
	$(PY) scripts/fast_install.py --python $(VERIFIERS_VENV)/bin/python --create-from $(PYTHON) -q \
	  "verifiers==$(VERIFIERS_VERSION)" uv==0.13.9 -e ".[alfworld,webshop]" -e plugins/verifiers
	$(VERIFIERS_VENV)/bin/python -c "from verifiers.v1.utils.loaders import taskset_class; taskset_class('rubricgym-verifiers')"
	touch $@

SETUP_TARGETS += $(VERIFIERS_STAMP)

.PHONY: verifiers-venv
verifiers-venv: $(VERIFIERS_STAMP)
