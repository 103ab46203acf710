# DeepSpeed's CPU shared-memory collective (the `deepspeed_shm_comm` op) is compiled by torch's
# extension loader the first time a ZeRO run starts: about two minutes on 2 cores, which the
# first ZeRO test used to pay. Built here once, into torch's extension cache
# (~/.cache/torch_extensions, kept across clones: a fresh clone loads it in seconds).

DEEPSPEED_OPS_STAMP := $(VENV)/.deepspeed-shm-op

$(DEEPSPEED_OPS_STAMP): $(STAMP)
	@echo "[setup] DeepSpeed's CPU shared-memory op, compiled once into ~/.cache/torch_extensions (about 2 minutes the first time, seconds after)"
	$(PY) -c "from deepspeed.accelerator import get_accelerator; get_accelerator().create_op_builder('ShareMemCommBuilder').load()"
	touch $@

SETUP_TARGETS += $(DEEPSPEED_OPS_STAMP)

.PHONY: deepspeed-ops
deepspeed-ops: $(DEEPSPEED_OPS_STAMP)
