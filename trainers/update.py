"""One policy update over an iteration's step samples, top to bottom.

1. Drop the samples whose trained tokens all have advantage 0 when ``skip_zero_advantage``.
   Of the rest, those with trained tokens are forwarded (sorted by length so micro-batches pad
   little); those without (a response with no parsed action under action placement) still
   count in the normaliser of the step-defined aggregations (TRCA's Eq. 22 sums 1/T_i over
   every step of rollout i) and contribute no policy-gradient term.
2. Reference log-probs under the KL reference (``trainers/reference.py``): the policy RL
   started from (the frozen base, LoRA off; after a warm start, the warm-started adapter,
   put in place for the pass). Old log-probs: the policy before this update (computed once when the update
   takes several optimizer steps; otherwise the live values, detached, are identical).
3. For each epoch and minibatch: micro-batch forward/backward of ``policy_loss``, then clip
   the gradient norm and take one optimizer (and scheduler) step.

Several processes: each rank holds the samples of its own groups. The loss's denominators
(sample count, token count, the aggregation total) are summed over the ranks before the
weights are formed, so each rank's loss is its exact share of the global loss. Who turns the
shares' gradients into the global gradient, clips and steps is the run's ``ParallelStrategy``
(trainers/parallel/): ``backward`` each pass, ``extra_passes`` empty passes where the
strategy needs every rank in step, then ``step``. A rank with fewer (or no) micro-batches
still joins every sum, so ranks never wait on each other mid-step. Training forwards run
under the strategy's ``autocast()`` (the run's mixed precision).

Batch layout per sequence: ``[left padding][prompt][response][right padding]`` with every
response starting at the same column, so the logits of all responses come from one slice
(``logits_to_keep``) and position ids follow the attention mask exactly as in generation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rubricgym.estimators import Objective
from rubricgym.trainers.config import AlgorithmSettings
from rubricgym.trainers.loss import entropy_from_logits, policy_loss
from rubricgym.trainers.parallel.base import ParallelStrategy, empty_loss
from rubricgym.trainers.reference import KLReference
from rubricgym.trainers.parallel.choose import single_process
from rubricgym.trainers.rollout import StepSample


@dataclass
class Batch:
    input_ids: torch.Tensor  # [B, P + R]
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    response_ids: torch.Tensor  # [B, R]
    response_mask: torch.Tensor  # [B, R] real (non-padding) response tokens
    loss_mask: torch.Tensor  # [B, R] tokens that are trained
    advantages: torch.Tensor  # [B, R]
    response_len: int


def collate(samples: Sequence[StepSample], pad_id: int, device: torch.device | str = "cpu") -> Batch:
    P = max(len(s.prompt_ids) for s in samples)
    R = max(len(s.response_ids) for s in samples)
    B = len(samples)
    ids = torch.full((B, P + R), pad_id, dtype=torch.long)
    attn = torch.zeros((B, P + R), dtype=torch.long)
    resp = torch.full((B, R), pad_id, dtype=torch.long)
    resp_mask = torch.zeros((B, R), dtype=torch.bool)
    loss_mask = torch.zeros((B, R), dtype=torch.bool)
    adv = torch.zeros((B, R), dtype=torch.float32)
    for b, s in enumerate(samples):
        p, r = len(s.prompt_ids), len(s.response_ids)
        ids[b, P - p : P] = torch.tensor(s.prompt_ids, dtype=torch.long)
        ids[b, P : P + r] = torch.tensor(s.response_ids, dtype=torch.long)
        attn[b, P - p : P + r] = 1
        resp[b, :r] = torch.tensor(s.response_ids, dtype=torch.long)
        resp_mask[b, :r] = True
        if s.loss_mask is not None and s.token_advantages is not None:
            loss_mask[b, :r] = torch.tensor(s.loss_mask, dtype=torch.bool)
            adv[b, :r] = torch.tensor(s.token_advantages, dtype=torch.float32)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    return Batch(ids.to(device), attn.to(device), pos.to(device), resp.to(device), resp_mask.to(device),
                 (loss_mask & resp_mask).to(device), adv.to(device), R)


def response_logprobs(model: Any, batch: Batch, temperature: float = 1.0,
                      with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of the response tokens (and the entropy of each predicting distribution)."""
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                position_ids=batch.position_ids, logits_to_keep=batch.response_len + 1, use_cache=False)
    logits = out.logits[:, :-1, :].float() / temperature  # positions P-1 .. P+R-2 predict the response
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, batch.response_ids.unsqueeze(-1)).squeeze(-1)
    logp = torch.where(batch.response_mask, logp, torch.zeros_like(logp))
    entropy = entropy_from_logits(logits) if with_entropy else None
    return logp, entropy


def micro_batches(items: Sequence[int], size: int) -> Iterator[list[int]]:
    for k in range(0, len(items), size):
        yield list(items[k : k + size])


@torch.no_grad()
def _logprobs_no_grad(model: Any, samples: Sequence[StepSample], order: Sequence[int], size: int, pad_id: int,
                      device: Any, temperature: float, parallel: ParallelStrategy) -> dict[int, torch.Tensor]:
    out: dict[int, torch.Tensor] = {}
    batches = list(micro_batches(order, size))
    empty = parallel.extra_passes(len(batches))
    for mb in batches:
        batch = collate([samples[i] for i in mb], pad_id, device)
        with parallel.autocast():
            logp, _ = response_logprobs(model, batch, temperature)
        for row, i in enumerate(mb):
            out[i] = logp[row, : len(samples[i].response_ids)].detach()
    for _ in range(empty):
        empty_loss(model, pad_id, device)
    return out


def _stack(values: dict[int, torch.Tensor], mb: Sequence[int], width: int, device: Any) -> torch.Tensor:
    t = torch.zeros((len(mb), width), dtype=torch.float32, device=device)
    for row, i in enumerate(mb):
        v = values[i]
        t[row, : v.shape[0]] = v
    return t


def has_trained_tokens(sample: StepSample) -> bool:
    return bool(sample.loss_mask) and any(sample.loss_mask)


def counted_samples(samples: Sequence[StepSample], skip_zero: bool) -> list[StepSample]:
    """The samples the update counts: all of them, less (when ``skip_zero``) those whose trained
    tokens all have advantage 0. Samples without trained tokens are kept: they count in a
    step-defined normaliser without a gradient term of their own."""
    if not skip_zero:
        return list(samples)
    return [s for s in samples if not has_trained_tokens(s)
            or any(a != 0.0 for a, m in zip(s.token_advantages or [], s.loss_mask or [], strict=False) if m)]


def step_aggregation_base(aggregation: str, trained_tokens: Sequence[float],
                          rollout_steps: Sequence[int]) -> list[float]:
    """Unnormalised per-step weights, one per step (every trainer's one rule): n_s (``token_mean``:
    the step's trained tokens, so a step without any adds nothing), 1 (``step_mean``), 1/T_i
    (``rollout_mean_step_mean``, T_i the steps of the step's rollout); the last two count every
    step, trained tokens or not."""
    if aggregation == "token_mean":
        return [float(n) for n in trained_tokens]
    if aggregation == "step_mean":
        return [1.0] * len(rollout_steps)
    if aggregation == "rollout_mean_step_mean":
        return [1.0 / max(1, t) for t in rollout_steps]
    raise ValueError(f"unknown loss aggregation {aggregation!r}")


def aggregation_base(samples: Sequence[StepSample], aggregation: str) -> list[float]:
    """``step_aggregation_base`` of the samples (trained tokens: their loss mask's)."""
    return step_aggregation_base(aggregation, [sum(s.loss_mask or []) for s in samples],
                                 [s.rollout_steps for s in samples])


def aggregation_weights(samples: Sequence[StepSample], aggregation: str, total: float | None = None) -> list[float]:
    """Per-sample weight of one optimizer step's samples (docs/design.md §6), summing to 1 over
    ``samples`` when ``total`` is their own normaliser.

    ``token_mean``: n_s / sum n (every trained token weighs the same); ``step_mean``: 1/S;
    ``rollout_mean_step_mean``: 1/(N T_i) when the step holds all of its N rollouts' steps (the
    paper's 1/N sum_i 1/T_i sum_t). A sample's weight is spread evenly over its n_s trained
    tokens; a sample without any has weight but no term. ``total``: the normaliser when
    ``samples`` are one rank's share of the step (the sum of ``aggregation_base`` over every
    rank's counted samples); default: these samples' own."""
    if not samples:
        return []
    base = aggregation_base(samples, aggregation)
    total = sum(base) if total is None else total
    return [b / total for b in base] if total > 0 else [0.0] * len(samples)


def _token_weights(samples: Sequence[StepSample], weights: Sequence[float], width: int, device: Any) -> torch.Tensor:
    t = torch.zeros((len(samples), width), dtype=torch.float32, device=device)
    for row, (s, w) in enumerate(zip(samples, weights, strict=True)):
        mask = torch.tensor(s.loss_mask or [], dtype=torch.float32)
        n = float(mask.sum())
        if n > 0:
            t[row, : mask.shape[0]] = mask * (w / n)
    return t


def ppo_update(model: Any, optimizer: torch.optim.Optimizer, scheduler: Any, samples: Sequence[StepSample],
               settings: AlgorithmSettings, objective: Objective, *, pad_id: int, temperature: float = 1.0,
               generator: torch.Generator | None = None, parallel: ParallelStrategy | None = None,
               reference: KLReference | None = None) -> dict[str, float]:
    """Run the update; returns token-weighted means of the loss terms (only the counts when
    nothing is trained). ``settings``: clipping, KL, entropy, epochs, batch sizes; ``objective``:
    the resolved estimator's ratio level, aggregation and zero-advantage rule. ``parallel``: the
    run's strategy, prepared with ``model`` and ``optimizer`` (default: one process); with
    several ranks, ``samples`` are this rank's and the statistics are global. ``reference``: the
    KL term's (default: the base model, the adapter off)."""
    if parallel is None:
        parallel = single_process()
        parallel.prepare_model(model, next(model.parameters()).device)
        parallel.prepare_optimizer(optimizer, settings.max_grad_norm)
    ranks = parallel.ranks
    parallel.begin_update()
    policy = parallel.module  # the training passes' forward (the model, or an engine around it)
    aggregation = objective.loss_aggregation
    samples = counted_samples(samples, objective.skip_zero_advantage)
    forwarded = [i for i, s in enumerate(samples) if has_trained_tokens(s)]
    trained, update_tokens = ranks.sum([len(forwarded), sum(len(samples[i].prompt_ids) + len(samples[i].response_ids)
                                                             for i in forwarded)])
    stats = {"trained_samples": trained, "update_tokens": update_tokens}
    if not trained:  # on no rank
        return stats
    device = next(model.parameters()).device
    # sort by total length: shorter padding per micro-batch; ties keep rollout order
    order = sorted(forwarded, key=lambda i: len(samples[i].prompt_ids) + len(samples[i].response_ids))
    rank = {i: k for k, i in enumerate(order)}
    size = settings.micro_batch_size
    was_training = model.training
    model.eval()  # no dropout in the reference/old passes
    ref = None
    if settings.kl_coef > 0:
        with (reference or KLReference()).applied(model, parallel):
            ref = _logprobs_no_grad(model, samples, order, size, pad_id, device, temperature, parallel)
    steps_per_iteration = settings.epochs * settings.minibatches
    old = (_logprobs_no_grad(model, samples, order, size, pad_id, device, temperature, parallel)
           if steps_per_iteration > 1 else None)
    model.train()

    sums = {"loss": 0.0, "pg": 0.0, "kl": 0.0, "entropy": 0.0, "clipped": 0.0, "ratio": 0.0, "tokens": 0.0}
    grad_norms: list[float] = []
    counted = list(range(len(samples)))  # every counted sample joins a minibatch's normaliser
    for epoch in range(settings.epochs):
        perm = torch.randperm(len(counted), generator=generator).tolist() if settings.minibatches > 1 else counted
        shuffled = [counted[k] for k in perm]
        minibatches = [shuffled[k :: settings.minibatches] for k in range(settings.minibatches)]
        for minibatch in minibatches:
            chunk = sorted((i for i in minibatch if i in rank), key=rank.__getitem__)  # the forwarded ones
            # global denominators: this optimizer step's samples, tokens and aggregation total on all ranks
            minibatch_samples = [samples[i] for i in minibatch]
            count, num_tokens, total = ranks.sum([
                len(chunk), sum(sum(samples[i].loss_mask or []) for i in chunk),
                sum(aggregation_base(minibatch_samples, aggregation))])
            if not count:
                continue
            step_weight = dict(zip(minibatch, aggregation_weights(minibatch_samples, aggregation, total),
                                   strict=True))
            optimizer.zero_grad(set_to_none=True)
            batches = list(micro_batches(chunk, size))
            passes: list[list[int] | None] = [*batches, *[None] * parallel.extra_passes(len(batches))]
            for k, mb in enumerate(passes):
                last = k == len(passes) - 1
                if mb is None:  # an empty pass: in step with the busiest rank's engine collectives
                    parallel.backward(empty_loss(policy, pad_id, device), last)
                    continue
                batch = collate([samples[i] for i in mb], pad_id, device)
                weights = _token_weights([samples[i] for i in mb], [step_weight[i] for i in mb], batch.response_len,
                                         device)
                with parallel.autocast():
                    logp, entropy = response_logprobs(policy, batch, temperature, with_entropy=settings.entropy_coef > 0)
                old_logp = _stack(old, mb, batch.response_len, device) if old is not None else logp.detach()
                ref_logp = _stack(ref, mb, batch.response_len, device) if ref is not None else None
                terms = policy_loss(
                    logp, old_logp, ref_logp, batch.advantages, batch.loss_mask, entropy,
                    clip_low=settings.clip_low, clip_high=settings.clip_high, kl_coef=settings.kl_coef,
                    entropy_coef=settings.entropy_coef, num_tokens=num_tokens,
                    ratio_level=objective.ratio_level, weights=weights,
                )
                parallel.backward(terms.loss, last)
                sums["loss"] += float(terms.loss.detach()) * num_tokens
                for key in ("pg", "kl", "entropy", "clipped", "ratio", "tokens"):
                    sums[key] += float(getattr(terms, key))
            grad_norms.append(parallel.step())
            if scheduler is not None:
                scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    if not was_training:
        model.eval()
    sums = dict(zip(sums, ranks.sum(list(sums.values())), strict=True))
    n = max(sums["tokens"], 1.0)
    stats.update({
        "loss": sums["loss"] / n,
        "pg_loss": sums["pg"] / n,
        "kl": sums["kl"] / n,
        "entropy": sums["entropy"] / n,
        "clip_frac": sums["clipped"] / n,
        "ratio": sums["ratio"] / n,
        "trained_tokens": sums["tokens"] / (settings.epochs),
        "grad_norm": sum(grad_norms) / len(grad_norms),
        "optimizer_steps": float(len(grad_norms)),
    })
    return stats
