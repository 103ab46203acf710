# DeepSpeed's CPU shared-memory collective (the `deepspeed_shm_comm` op). Left to DeepSpeed,
# torch's extension loader compiles it at the first ZeRO run (about two minutes on 2 cores), and
# again in every clone: its build commands name the clone's venv, so torch's extension cache
# never matches another clone's. Instead, DeepSpeed is built once per DeepSpeed and torch
# version with the op compiled in (DeepSpeed's own DS_BUILD_SHM_COMM), kept under
# ~/.cache/rubricgym/wheels/deepspeed-ops/torch-<version>/ and installed over the plain wheel:
# a fresh clone then installs it in seconds and DeepSpeed loads the op without compiling.

DEEPSPEED_OPS_STAMP := $(VENV)/.deepspeed-ops-wheel
DEEPSPEED_OPS_WHEELS := $(HOME)/.cache/rubricgym/wheels/deepspeed-ops
VERSION_OF = $$($(PY) -c "import importlib.metadata as m; print(m.version('$(1)'))")

$(DEEPSPEED_OPS_STAMP): $(STAMP)
	@echo "[setup] DeepSpeed with its CPU shared-memory op compiled in (about 2.5 minutes once per DeepSpeed and torch version, kept in $(DEEPSPEED_OPS_WHEELS); seconds after)"
	set -e; ds=$(call VERSION_OF,deepspeed); house=$(DEEPSPEED_OPS_WHEELS)/torch-$(call VERSION_OF,torch); \
	ls $$house/deepspeed-$$ds-*.whl >/dev/null 2>&1 || \
	  DS_BUILD_OPS=0 DS_BUILD_SHM_COMM=1 DS_ACCELERATOR=cpu $(PIP) wheel -q --no-deps --no-build-isolation \
	    --no-cache-dir --no-binary deepspeed "deepspeed==$$ds" -w $$house; \
	$(INSTALL) --no-deps --reinstall "$$(ls $$house/deepspeed-$$ds-*.whl | head -n 1)"
	$(PY) scripts/check_deepspeed_ops.py
	touch $@

SETUP_TARGETS += $(DEEPSPEED_OPS_STAMP)

.PHONY: deepspeed-ops
deepspeed-ops: $(DEEPSPEED_OPS_STAMP)
