"""Run by tests/integrations/test_verl_ppo_step.py with the verl venv's python (.venvs/verl): one
PPO actor step of verl 0.9.1's own trainer code on CPU, on real ALFWorld episodes, with the
advantages of ``algorithm.adv_estimator=rubricgym_trca``.

    .venvs/verl/bin/python tests/integrations/verl_ppo_step_run.py WORK_DIR

verl's ``main_ppo`` cannot run on CPU (docs/verl.md): it asks Ray for GPUs, its workers open an
NCCL process group, its training engines are registered for CUDA and NPU only, and its rollout
is a vLLM / SGLang / TensorRT-LLM server. What does run here, in this one process, is the actor
side of the legacy trainer's step (``trainer.use_v1=False``, verl/trainer/ppo/ray_trainer.py):
verl's ``ActorRolloutRefWorker`` (role ``actor``) with its FSDP2 engine builds the model from
the config; the trainer's own ``_compute_old_log_prob``, ``extract_reward``,
``compute_advantage`` and ``_update_actor`` (called with a stand-in ``self`` holding the config
and that worker) compute the old log-probs, the advantages and one PPO update (verl's
``ppo_loss``, AdamW). Three things make it run on CPU, all here and none in verl:

- ``CPUPlatform``, set with verl's ``set_platform`` before anything asks for the platform: verl
  0.9.1 registers CUDA, NPU and ROCm platforms only, and falls back to CUDA (device ``cuda``,
  backend ``nccl``) on a machine without a GPU;
- ``VERL_ENGINE_DEVICE=cuda`` (verl's own override): the FSDP engine is registered for the
  devices ``cuda`` and ``npu`` only, so a ``cpu`` platform finds no engine class;
- the gloo process group is opened here: verl's ``initialize_global_process_group_ray`` asks for
  ``cpu:gloo,<device>:<backend>``, which torch refuses when the device is ``cpu``.

The model is ``rubricgym.models``' tiny random Qwen2 with its byte tokenizer (saved to WORK_DIR,
loaded by verl), SDPA attention (verl's default is FlashAttention 2), fp32, no remove-padding.
The batch is verl's layout (left-padded prompts, right-padded responses) of the episodes of
tests/integrations/verl_run.py (its ``play``: two groups of three, the expert's plan against
wandering), with the env return as ``rm_scores`` on each response's last token. The estimators
are registered the way a trainer run registers them: ``actor_rollout_ref.model.external_lib=
rubricgym.integrations.verl`` is imported when verl builds its ``HFModelConfig``, which verl's
TaskRunner does first (the runner checks the registry before and after). The same update is run
again from the same weights with junk advantages where ``response_mask`` is 0: the weights
after it must be the same. Prints one JSON line of results.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
import types
import uuid
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch: on a busy machine, more threads make it several times slower
import torch  # noqa: E402

started = time.perf_counter()
from verl.plugin.platform import platform_manager  # noqa: E402
from verl.plugin.platform.platform_base import PlatformBase  # noqa: E402

# what verl picks on its own on this machine, before the CPU platform below replaces it
_DETECTED = platform_manager._detect_platform_name()
_OWN = platform_manager._create_platform(_DETECTED)
VERL_OWN_PLATFORM = {"name": _DETECTED, "device": _OWN.device_name, "backend": _OWN.communication_backend_name(),
                     "registered": list(platform_manager.PlatformRegistry.registered_names()),
                     "set_before_ours": platform_manager._current_platform is not None}
G = 3  # rollouts per group (verl's rollout.n)
ESTIMATOR = "trca"
JUNK = 1000.0  # advantage written where response_mask is 0, for the second update


def _zero(*_: Any, **__: Any) -> int:
    return 0


def _none(*_: Any, **__: Any) -> None:
    return None


class CPUPlatform(PlatformBase):
    """The platform verl 0.9.1 lacks: its device helpers answer ``cpu`` and ``gloo``.
    ``current_device()`` is ``"cpu"``, not an index: verl hands ``get_device_id()`` to
    ``Tensor.to`` and ``torch.device``. ``device_module`` answers what verl's actor paths ask of
    ``get_torch_device()`` (memory figures are 0 here)."""

    device_name = "cpu"
    vendor_name = "cpu"
    device_module = types.SimpleNamespace(
        is_available=lambda: True, current_device=lambda: "cpu", device_count=lambda: 1, set_device=_none,
        synchronize=_none, empty_cache=_none, manual_seed=torch.manual_seed, manual_seed_all=torch.manual_seed,
        get_device_name=lambda *_: "CPU", max_memory_allocated=_zero, max_memory_reserved=_zero,
        memory_allocated=_zero, memory_reserved=_zero, mem_get_info=lambda *_, **__: (0, 0),
        reset_peak_memory_stats=_none)

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return True

    def current_device(self) -> Any:
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        pass

    def synchronize(self, device_index: int | None = None) -> None:
        pass

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def get_device_capability(self, device_index: int = 0) -> tuple[None, None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextlib.contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        pass

    def profiler_stop(self) -> None:
        pass

    def ray_resource_name(self) -> str:
        return "CPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> None:
        return None


platform_manager.set_platform(CPUPlatform())
os.environ["VERL_ENGINE_DEVICE"] = "cuda"  # verl's FSDP engine is registered for the devices cuda and npu only

from hydra import compose, initialize_config_dir  # noqa: E402
from verl.protocol import DataProto  # noqa: E402
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY  # noqa: E402
from verl.trainer.ppo.ray_trainer import RayPPOTrainer, compute_advantage  # noqa: E402
from verl.trainer.ppo.reward import extract_reward  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402
from verl.utils.model import compute_position_id_with_mask  # noqa: E402
from verl.workers.engine.base import EngineRegistry  # noqa: E402
from verl.workers.engine_workers import ActorRolloutRefWorker  # noqa: E402

import_s = time.perf_counter() - started


def verl_config(model_dir: Path) -> Any:
    """verl's own trainer config (ppo_trainer.yaml) with this run's overrides."""
    import verl  # for its config folder

    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        return compose(config_name="ppo_trainer", overrides=[
            f"actor_rollout_ref.model.path={model_dir}",
            "actor_rollout_ref.model.external_lib=rubricgym.integrations.verl",
            "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
            "actor_rollout_ref.model.use_remove_padding=False",
            "actor_rollout_ref.model.enable_gradient_checkpointing=False",
            "actor_rollout_ref.rollout.name=vllm",  # required by the schema; no rollout is built (role actor)
            f"actor_rollout_ref.rollout.n={G}",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
            "actor_rollout_ref.actor.strategy=fsdp2",
            "actor_rollout_ref.actor.ppo_mini_batch_size=2",  # prompts: both groups, one optimizer step
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
            "actor_rollout_ref.actor.use_kl_loss=False",
            "actor_rollout_ref.actor.optim.lr=1e-3",
            "actor_rollout_ref.actor.optim.weight_decay=0.0",  # weights move only by the gradient
            "+actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=fp32",
            "actor_rollout_ref.actor.fsdp_config.use_torch_compile=False",
            f"algorithm.adv_estimator=rubricgym_{ESTIMATOR}",
            "algorithm.use_kl_in_reward=False",
        ])


def actor(config: Any) -> ActorRolloutRefWorker:
    """verl's worker as its TaskRunner builds it (here in this process, not as a Ray actor)."""
    worker = ActorRolloutRefWorker(config.actor_rollout_ref, role="actor")
    worker.init_model()
    return worker


def weights(worker: ActorRolloutRefWorker) -> dict[str, torch.Tensor]:
    """The actor's parameters (FSDP2 DTensors, gathered)."""
    return {name: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().clone()
            for name, p in worker.actor.engine.module.named_parameters()}


def update(config: Any, worker: ActorRolloutRefWorker, batch: DataProto) -> dict[str, float]:
    """verl's ``RayPPOTrainer._update_actor`` on the batch; its metrics, one number each."""
    metrics = RayPPOTrainer._update_actor(types.SimpleNamespace(config=config, actor_rollout_wg=worker),
                                          batch).meta_info["metrics"]
    return {k: float(np.mean([float(x) for x in (v if isinstance(v, list) else [v])])) for k, v in metrics.items()}


def main(work_dir: str) -> None:
    work = Path(work_dir)
    from rubricgym.models import load_causal_lm

    model, tokenizer = load_causal_lm("tiny", device="cpu")
    model.save_pretrained(work / "model")
    tokenizer.save_pretrained(work / "model")
    config = verl_config(work / "model")

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))  # what verl's Worker reads (Ray sets them for its actors)
    # verl's own init (utils/distributed.py) would ask for "cpu:gloo,cpu:gloo", which torch refuses
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)

    # the estimators come from external_lib, as in a trainer run: HFModelConfig imports it
    name = f"rubricgym_{ESTIMATOR}"
    registered_before = name in ADV_ESTIMATOR_REGISTRY
    omega_conf_to_dataclass(config.actor_rollout_ref.model)  # what verl's TaskRunner.run does first
    registered_after = name in ADV_ESTIMATOR_REGISTRY

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import verl_run  # the episodes of test 4a (imports rubricgym.integrations.verl: after the check above)

    from rubricgym.integrations.episodes import Episode, completion_advantages
    from rubricgym.integrations.verl import EPISODE_FIELD

    t0 = time.perf_counter()
    worker = actor(config)
    init_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    groups = [verl_run.play(tokenizer, 11, 5), verl_run.play(tokenizer, 3, 2)]
    play_s = time.perf_counter() - t0
    rows = [(g, k) for k in range(G) for g in range(len(groups))]  # the two groups' rows interleaved
    n = len(rows)
    width_p = max(len(groups[g]["prompt_ids"][k]) for g, k in rows)
    width_r = max(len(groups[g]["completion_ids"][k]) for g, k in rows)
    prompts = torch.full((n, width_p), tokenizer.pad_token_id, dtype=torch.long)
    responses = torch.full((n, width_r), tokenizer.pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((n, width_p + width_r), dtype=torch.long)
    response_mask = torch.zeros((n, width_r), dtype=torch.long)
    rm_scores = torch.zeros((n, width_r), dtype=torch.float32)
    episodes = []
    for i, (g, k) in enumerate(rows):
        prompt, completion, mask = (groups[g][key][k] for key in ("prompt_ids", "completion_ids", "env_mask"))
        prompts[i, width_p - len(prompt):] = torch.tensor(prompt)
        responses[i, : len(completion)] = torch.tensor(completion)
        attention_mask[i, width_p - len(prompt): width_p + len(completion)] = 1
        response_mask[i, : len(mask)] = torch.tensor(mask)
        episodes.append(groups[g][EPISODE_FIELD][k])
        rm_scores[i, len(completion) - 1] = float(Episode.from_dict(episodes[-1]).env_return)
    uids = [str(uuid.uuid4()) for _ in groups]
    batch = DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses], dim=1),
                 "attention_mask": attention_mask, "position_ids": compute_position_id_with_mask(attention_mask),
                 "response_mask": response_mask, "rm_scores": rm_scores},
        non_tensors={"uid": np.array([uids[g] for g, _ in rows], dtype=object),
                     EPISODE_FIELD: np.array([json.dumps(e) for e in episodes], dtype=object)},
        meta_info={"reward_extra_keys": [], "temperature": config.actor_rollout_ref.rollout.temperature,
                   "global_token_num": attention_mask.sum(-1).tolist()})

    # the trainer's step (ray_trainer.py, RayPPOTrainer.fit), actor side: reward, old log-probs, advantages
    trainer = types.SimpleNamespace(config=config, actor_rollout_wg=worker)  # what these steps read of self
    t0 = time.perf_counter()
    reward_tensor, _ = extract_reward(batch)
    old_log_prob, _ = RayPPOTrainer._compute_old_log_prob(trainer, batch)
    entropys = old_log_prob.batch.pop("entropys")
    batch = batch.union(old_log_prob)
    batch.batch["token_level_scores"] = reward_tensor
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]  # use_kl_in_reward=False
    batch = compute_advantage(batch, adv_estimator=config.algorithm.adv_estimator, gamma=config.algorithm.gamma,
                              lam=config.algorithm.lam, num_repeat=G, norm_adv_by_std_in_grpo=True,
                              config=config.algorithm)
    log_prob_s = time.perf_counter() - t0
    advantages = batch.batch["advantages"].clone()
    before = weights(worker)
    t0 = time.perf_counter()
    metrics = update(config, worker, batch)
    update_s = time.perf_counter() - t0
    after = weights(worker)

    # rubricgym's own values for the same episodes, group by group
    expected = torch.zeros_like(advantages)
    for g, group in enumerate(groups):
        values, _ = completion_advantages(ESTIMATOR, [Episode.from_dict(e) for e in group[EPISODE_FIELD]], G, width_r)
        for k in range(G):
            expected[rows.index((g, k))] = torch.as_tensor(values[k], dtype=expected.dtype)
    mask = response_mask.bool()
    action = torch.zeros_like(mask)
    for i, e in enumerate(episodes):
        for s in Episode.from_dict(e).steps:
            if s.action is not None:
                action[i, s.action[0]: s.action[1]] = True

    # verl's old log-probs against one plain transformers forward pass per row (the same weights)
    logprob_gap = 0.0
    with torch.no_grad():
        for i in range(n):
            sequence = batch.batch["input_ids"][i][attention_mask[i].bool()]
            logits = model(sequence.unsqueeze(0)).logits[0].float()
            start, length = int(attention_mask[i, :width_p].sum()), int(attention_mask[i, width_p:].sum())
            own = torch.log_softmax(logits[start - 1: start - 1 + length], dim=-1)[torch.arange(length), sequence[start:]]
            got, on = batch.batch["old_log_probs"][i, :length], mask[i, :length]
            logprob_gap = max(logprob_gap, float((got[on] - own[on]).abs().max()))

    # the same update from the same weights, with junk advantages where response_mask is 0
    junk = batch.slice(0, n)
    junk.batch["advantages"] = torch.where(mask, advantages, torch.full_like(advantages, JUNK))
    t0 = time.perf_counter()
    junk_worker = actor(config)
    junk_start = weights(junk_worker)
    junk_metrics = update(config, junk_worker, junk)
    junk_after = weights(junk_worker)
    junk_s = time.perf_counter() - t0

    print(json.dumps({
        "verl_own_platform": VERL_OWN_PLATFORM,
        "fsdp_engine_devices": sorted(str(k) for k in EngineRegistry._engines["language_model"]["fsdp2"]),
        "external_lib": {"registered_before": registered_before, "registered_after": registered_after},
        "adv_estimator": str(config.algorithm.adv_estimator),
        "rows": n, "response_width": width_r, "response_tokens": int(mask.sum()),
        "response_region_tokens": int(attention_mask[:, width_p:].sum()),
        "reward_is_rm_scores": bool(torch.equal(reward_tensor, rm_scores)),
        "advantages": {"equal": bool(torch.equal(advantages, expected)),
                       "max_abs_diff": float((advantages - expected).abs().max()),
                       "nonzero_tokens": int((advantages != 0).sum()),
                       "distinct_values": len({round(float(v), 6) for v in advantages[advantages != 0]}),
                       "inside_response_mask": bool(not advantages[~mask].any()),
                       "only_action_tokens": bool(not advantages[~action].any())},
        # at the first update the policy is the old one (ratio 1): verl's token-mean pg loss is
        # minus the mean advantage over the response_mask tokens
        "minus_mean_advantage_on_response_mask": float(-(advantages[mask].sum() / mask.sum())),
        "minus_mean_advantage_on_response_region": float(-(advantages.sum() / attention_mask[:, width_p:].sum())),
        "metrics": metrics, "junk_metrics": junk_metrics,
        "weights": {"tensors": len(before), "changed": sum(not torch.equal(before[k], after[k]) for k in before),
                    "max_change": max(float((after[k] - before[k]).abs().max()) for k in before),
                    "junk_run_same_start": all(torch.equal(before[k], junk_start[k]) for k in before),
                    "junk_run_max_diff": max(float((after[k] - junk_after[k]).abs().max()) for k in before)},
        "old_log_prob_gap": logprob_gap, "entropy_finite": bool(torch.isfinite(entropys).all()),
        "seconds": {"import": round(import_s, 1), "init": round(init_s, 1), "play": round(play_s, 1),
                    "log_prob_and_advantage": round(log_prob_s, 1), "update": round(update_s, 1),
                    "junk_run": round(junk_s, 1), "total": round(time.perf_counter() - started, 1)},
    }))


if __name__ == "__main__":
    main(sys.argv[1])
