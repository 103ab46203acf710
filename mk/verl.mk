# verl (docs/verl.md): rubricgym's estimators in verl's advantage registry
# (rubricgym.integrations.verl), tested through verl's own compute_advantage.
#
# Its own venv (.venvs/verl): verl 0.9.1 pins transformers >=5.5.3,<5.11 where the main venv
# has a newer one, so it cannot live in the main venv. The CPU torch is pinned first, as for the
# main venv: verl's requirements take any torch and would otherwise pull a multi-GB CUDA build.
# verl's own requirements come with it (ray, tensordict, hydra, ...; uv links them from its
# cache in seconds); its trainer module (verl.trainer.ppo.ray_trainer, where compute_advantage
# lives) also imports cachetools, fastapi, uvicorn, pyzmq and msgspec, which verl lists only
# under its [verl-core] extra (whose remaining members, TransferQueue, torchcodec, nvtx,
# qwen_vl_utils, ..., that module does not need). Then rubricgym, editable, with ALFWorld's and WebShop's
# extra. No vLLM, SGLang, FSDP or Megatron extras: nothing here runs verl's workers.

VERL_VERSION := 0.9.1
VERL_VENV := .venvs/verl
VERL_PY := $(VERL_VENV)/bin/python
VERL_STAMP := $(VERL_VENV)/.installed-$(VERL_VERSION)
VERL_INSTALL := $(PY) scripts/fast_install.py --python $(VERL_PY) -q

$(VERL_STAMP): pyproject.toml mk/verl.mk | $(STAMP)  # order only on the main venv: it holds the uv it installs with
	@echo "[setup] the verl venv $(VERL_VENV): torch (CPU), verl $(VERL_VERSION) and rubricgym[alfworld,webshop] (about 25 s with warm caches)"
	$(PY) scripts/fast_install.py --python $(VERL_PY) --create-from $(PYTHON) -q torch==2.13.0
	$(VERL_INSTALL) "verl==$(VERL_VERSION)" cachetools fastapi uvicorn pyzmq msgspec
	$(VERL_INSTALL) -e ".[alfworld,webshop]"
	$(VERL_PY) -c "import verl.trainer.ppo.ray_trainer, verl.protocol, rubricgym.integrations.verl"
	touch $@

SETUP_TARGETS += $(VERL_STAMP)

.PHONY: verl-venv
verl-venv: $(VERL_STAMP)
