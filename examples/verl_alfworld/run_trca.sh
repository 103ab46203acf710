#!/usr/bin/env bash
# ALFWorld with rubricgym's TRCA credit in verl 0.9.1: Qwen2.5-1.5B-Instruct, vLLM (async server,
# rubricgym's agent loop), 2 GPUs, 150 steps of 16 tasks x 8 rollouts. Modelled on verl-agent's
# examples/gigpo_trainer/run_alfworld.sh (its hyperparameters; docs/verl.md says what differs).
# NOT RUN YET on a GPU: every override is checked against verl 0.9.1's config tree and its
# validate_config on CPU (tests/integrations/test_verl_recipe.py). model.external_lib registers
# rubricgym_trca & co. where compute_advantage runs: verl imports it when it builds the model
# config, first in its trainer's Ray actor (importing it in this shell would not reach that actor).
#
#   python examples/verl_alfworld/prepare_data.py data/verl_alfworld
#   MODEL=/path/to/Qwen2.5-1.5B-Instruct bash examples/verl_alfworld/run_trca.sh [more overrides]
set -euo pipefail
MODEL=${MODEL:-Qwen/Qwen2.5-1.5B-Instruct}
DATA=${DATA:-$PWD/data/verl_alfworld}
NGPUS=${NGPUS:-2}

"${PYTHON:-python}" -m verl.trainer.main_ppo \
    trainer.use_v1=False \
    algorithm.adv_estimator=rubricgym_trca \
    algorithm.use_kl_in_reward=False \
    data.train_files="$DATA/train.parquet" \
    data.val_files="$DATA/val.parquet" \
    data.train_batch_size=16 \
    data.max_prompt_length=2048 \
    data.max_response_length=16384 \
    data.dataloader_num_workers=2 \
    actor_rollout_ref.model.path="$MODEL" \
    actor_rollout_ref.model.external_lib=rubricgym.integrations.verl \
    actor_rollout_ref.model.use_remove_padding=True \
    actor_rollout_ref.model.enable_gradient_checkpointing=True \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_mini_batch_size=16 \
    actor_rollout_ref.actor.use_dynamic_bsz=True \
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=20480 \
    actor_rollout_ref.actor.use_kl_loss=True \
    actor_rollout_ref.actor.kl_loss_coef=0.01 \
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \
    actor_rollout_ref.actor.entropy_coeff=0.001 \
    actor_rollout_ref.actor.fsdp_config.param_offload=False \
    actor_rollout_ref.actor.fsdp_config.optimizer_offload=False \
    actor_rollout_ref.ref.fsdp_config.param_offload=True \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.mode=async \
    actor_rollout_ref.rollout.n=8 \
    actor_rollout_ref.rollout.temperature=1.0 \
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
    actor_rollout_ref.rollout.max_model_len=18432 \
    actor_rollout_ref.rollout.calculate_log_probs=True \
    actor_rollout_ref.rollout.val_kwargs.temperature=0.4 \
    actor_rollout_ref.rollout.val_kwargs.do_sample=True \
    actor_rollout_ref.rollout.agent.agent_loop_config_path="$DATA/agent_loops.yaml" \
    actor_rollout_ref.rollout.agent.default_agent_loop=rubricgym_agent \
    actor_rollout_ref.rollout.agent.num_workers=8 \
    reward.num_workers=1 \
    trainer.critic_warmup=0 \
    trainer.logger='["console"]' \
    trainer.project_name=rubricgym_verl_alfworld \
    trainer.experiment_name=trca_qwen2.5_1.5b \
    trainer.n_gpus_per_node="$NGPUS" \
    trainer.nnodes=1 \
    trainer.total_training_steps=150 \
    trainer.total_epochs=1 \
    trainer.save_freq=-1 \
    trainer.test_freq=5 \
    trainer.val_before_train=True "$@"
