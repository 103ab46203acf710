#!/usr/bin/env bash
# Trainer GPU check: a few bf16 training iterations on CUDA, recording tokens/s and peak memory,
# then every parallel strategy that runs on one GPU (replicated, FSDP and DeepSpeed ZeRO-2/3 in a
# process group of one, bf16 autocast replicated and under FSDP: scripts/gpu_strategies.py).
# Meant for a short GPU loan (about 5-8 minutes including model builds). Needs a Python with a
# CUDA torch, transformers, peft, gymnasium, pydantic, pyyaml, tqdm, numpy (no network used).
#
# The device machine has no package index: what its image lacks (gymnasium, pydantic, DeepSpeed,
# which PyPI ships only as a source distribution, and their small dependencies) travels as
# wheels in .whl/, built here by `bash scripts/gpu_wheels.sh` (a few MiB, inside the device
# tool's 64 MiB carry limit); this script installs them into /tmp/site first when .whl/ exists.
#
#   bash scripts/gpu_wheels.sh                                     # here, once
#   PY=python3 OUT=benchmarks/results bash scripts/gpu_check.sh    # there, with carry [".whl"]
#
# Writes $OUT/trainer_gpu.json (throughput, memory, phase shares) and $OUT/trainer_gpu_vllm.json
# when vLLM is importable. The model is SmolLM2-135M's shape with random weights
# ("random-135m"), because the GGUF weights are not on the GPU machine; speed and memory
# depend on the shape, not the values. Set MODEL=/path/to/hf-folder to use real weights.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
OUT=${OUT:-benchmarks/results}
MODEL=${MODEL:-random-135m}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
"$PY" - <<'PYEOF'
import importlib, sys
missing = [m for m in ("torch", "transformers", "peft", "gymnasium", "pydantic", "yaml", "tqdm", "numpy")
           if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"gpu_check: missing packages {missing}")
import torch
if not torch.cuda.is_available():
    sys.exit("gpu_check: torch sees no CUDA device")
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
PYEOF

# rubricgym without installing it: a package folder that links the mapped top-level folders
SHIM=$(mktemp -d)
mkdir "$SHIM/rubricgym"
for f in rubricgym/*; do ln -s "$PWD/$f" "$SHIM/rubricgym/"; done
ln -s "$PWD/trainers" "$SHIM/rubricgym/trainers"
ln -s "$PWD/adapters" "$SHIM/rubricgym/adapters"
ln -s "$PWD/operator_libraries" "$SHIM/rubricgym/operator_libraries"
export PYTHONPATH="$SHIM:$PWD/tests${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 RUBRICGYM_CACHE="$SHIM/cache"
# the repository's own rubricgym/ folder (the core alone) must not shadow the shim: no cwd on sys.path
export PYTHONSAFEPATH=1

# 1. correctness on CUDA/bf16: generation log-probs vs the update's forward, LoRA KL at step 0
"$PY" - <<'PYEOF'
import json, os, torch
from rubricgym.models import load_causal_lm
from rubricgym.trainers.rollout import StepSample
from rubricgym.trainers.update import collate, response_logprobs, ppo_update
from rubricgym.trainers.config import AlgorithmSettings
from rubricgym.estimators import resolve_estimator
from peft import LoraConfig, get_peft_model
model, tok = load_causal_lm(os.environ.get("MODEL", "random-135m"), device="cuda")
prompts = [[10 + k for k in range(n)] for n in (5, 17, 9, 30)]
w = max(map(len, prompts))
ids = torch.tensor([[tok.pad_token_id] * (w - len(p)) + p for p in prompts], device="cuda")
att = (torch.arange(w, device="cuda")[None, :] >= torch.tensor([w - len(p) for p in prompts], device="cuda")[:, None]).long()
torch.manual_seed(0)
with torch.no_grad():
    out = model.generate(input_ids=ids, attention_mask=att, do_sample=True, max_new_tokens=16, min_new_tokens=16,
                         output_logits=True, return_dict_in_generate=True, pad_token_id=tok.pad_token_id)
gen = out.sequences[:, w:]
glp = torch.stack([torch.log_softmax(l.float(), -1) for l in out.logits], 1).gather(-1, gen.unsqueeze(-1)).squeeze(-1)
samples = [StepSample(prompt_ids=p, response_ids=gen[i].tolist(), response_text="", reasoning_tokens=None,
                      action_tokens=None, reward=0.0, env_reward=0.0, token_advantages=[1.0] * 16,
                      loss_mask=[True] * 16) for i, p in enumerate(prompts)]
with torch.no_grad():
    lp, _ = response_logprobs(model, collate(samples, tok.pad_token_id, "cuda"))
diff = (lp - glp).abs().max().item()
pm = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
opt = torch.optim.AdamW([p for p in pm.parameters() if p.requires_grad], lr=1e-4)
stats = ppo_update(pm, opt, None, samples, AlgorithmSettings(micro_batch_size=2), resolve_estimator("grpo").objective,
                   pad_id=tok.pad_token_id)
res = {"dtype": str(model.dtype), "max_abs_logprob_diff_generate_vs_update": diff, "kl_first_update": stats["kl"],
       "loss_finite": bool(torch.isfinite(torch.tensor(stats["loss"])))}
print(json.dumps(res))
assert stats["kl"] == 0.0 and res["loss_finite"], res
assert diff < 0.1, f"bf16 generation and update disagree: {diff}"
open(os.path.join(os.environ.get("OUT", "benchmarks/results"), "trainer_gpu_correctness.json"), "w").write(json.dumps(res, indent=2))
PYEOF

# 2. throughput and memory: bf16, gradient checkpointing, G=16, 128 new tokens, 2 iterations
"$PY" benchmarks/trainer_speed.py --device cuda --model "$MODEL" --env word --group-size 16 --tasks 2 \
    --max-steps 2 --max-new-tokens 128 --micro-batch-size 8 --iterations 2 --json "$OUT/trainer_gpu.json"

# 3. optional: the same with vLLM generation (reports clearly when vLLM is not installed)
if "$PY" -c "import vllm" 2>/dev/null; then
  echo "vLLM found: generation.backend=vllm is not wired into the benchmark flags yet; skipped" >&2
  # TRL's route with use_vllm=True (colocate): two steps of SmolLM2 on ALFWorld with TRCA credit
  "$PY" examples/trl_alfworld.py --model smollm2 --vllm --steps 2 --max-steps 4 > "$OUT/trl_vllm_alfworld.json" \
    || echo "gpu_check: TRL with use_vllm=True failed" >&2
else
  echo "vLLM not installed: generation.backend=vllm and TRL's use_vllm=True unverified" >&2
fi
# 4. every strategy that runs on one GPU, two iterations each (a failing one is recorded, the rest run)
"$PY" scripts/gpu_strategies.py --device cuda --model "$MODEL" --out "$OUT/trainer_gpu_strategies.json" \
  || echo "gpu_check: some strategies failed: see $OUT/trainer_gpu_strategies.json" >&2
# 5. the TRCA paper config's shape (configs/alfworld_trca_paper_gpu.yaml): Qwen2.5-1.5B's layers with random
#    weights, 16 tasks x 8 rollouts, 512 new tokens, LoRA r 64 on every linear layer, two iterations
"$PY" benchmarks/trainer_speed.py --device cuda --model random-qwen2.5-1.5b --env word --group-size 8 --tasks 16 \
    --max-steps 2 --max-new-tokens 512 --micro-batch-size 16 --iterations 2 --lora-r 64 --lora-all-linear \
    --json "$OUT/trainer_gpu_paper_shape.json" \
  || echo "gpu_check: the paper config's shape failed: see the log above" >&2
# 6. optional: the verl recipe's smoke run (examples/verl_alfworld/run_trca_smoke.sh: rubricgym's agent loop on
#    verl's async vLLM server, TRCA advantages, 2 PPO steps on 1 GPU) where verl 0.9.1 and vLLM are installed
#    and VERL_MODEL names a local model folder (the lent machines have neither verl nor a network to fetch it)
if [ -n "${VERL_MODEL:-}" ] && "$PY" -c "import verl, vllm" 2>/dev/null; then
  "$PY" examples/verl_alfworld/prepare_data.py "$SHIM/verl_data" --smoke
  MODEL="$VERL_MODEL" DATA="$SHIM/verl_data" PYTHON="$PY" timeout 540 bash examples/verl_alfworld/run_trca_smoke.sh \
      > "$OUT/verl_smoke.log" 2>&1 || echo "gpu_check: the verl smoke run failed: see $OUT/verl_smoke.log" >&2
else
  echo "verl smoke run skipped: needs verl 0.9.1 and vLLM importable and VERL_MODEL=/a/local/model" >&2
fi
echo "gpu_check: OK -> $OUT"
