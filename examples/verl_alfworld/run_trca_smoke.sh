#!/usr/bin/env bash
# The recipe's smoke run on one GPU: 2 tasks x 4 rollouts, episodes of at most 5 steps of 256
# tokens, 2 PPO steps, no validation, eager vLLM (no CUDA-graph capture at start). For a short
# GPU loan (scripts/gpu_check.sh runs it when verl and vLLM are installed there; PYTHON picks the
# interpreter, default python). NOT RUN YET.
#
#   python examples/verl_alfworld/prepare_data.py data/verl_alfworld_smoke --smoke
#   MODEL=/path/to/model bash examples/verl_alfworld/run_trca_smoke.sh [more overrides]
set -euo pipefail
MODEL=${MODEL:-Qwen/Qwen2.5-1.5B-Instruct}
DATA=${DATA:-$PWD/data/verl_alfworld_smoke}

"${PYTHON:-python}" -m verl.trainer.main_ppo \
    trainer.use_v1=False \
    algorithm.adv_estimator=rubricgym_trca \
    data.train_files="$DATA/train.parquet" \
    data.val_files="$DATA/val.parquet" \
    data.train_batch_size=2 \
    data.max_prompt_length=1024 \
    data.max_response_length=3072 \
    data.dataloader_num_workers=0 \
    actor_rollout_ref.model.path="$MODEL" \
    actor_rollout_ref.model.external_lib=rubricgym.integrations.verl \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_mini_batch_size=2 \
    actor_rollout_ref.actor.use_dynamic_bsz=True \
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192 \
    actor_rollout_ref.actor.use_kl_loss=True \
    actor_rollout_ref.actor.kl_loss_coef=0.01 \
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.mode=async \
    actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.4 \
    actor_rollout_ref.rollout.max_model_len=4096 \
    actor_rollout_ref.rollout.enforce_eager=True \
    actor_rollout_ref.rollout.agent.agent_loop_config_path="$DATA/agent_loops.yaml" \
    actor_rollout_ref.rollout.agent.num_workers=2 \
    reward.num_workers=1 \
    trainer.logger='["console"]' \
    trainer.n_gpus_per_node=1 \
    trainer.nnodes=1 \
    trainer.total_training_steps=2 \
    trainer.save_freq=-1 \
    trainer.test_freq=-1 \
    trainer.val_before_train=False "$@"
