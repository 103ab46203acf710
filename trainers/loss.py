"""The GRPO-family loss as one pure function over per-token tensors (CleanRL style).

Per response token t of step sample s with advantage A_t, mask m_t (1 = trained):

    ratio_t   = exp(logp_t - old_logp_t)                                  ratio_level="token"
    ratio_s   = exp(sum_t m_t (logp_t - old_logp_t))  on every t of s     ratio_level="action"
                (the whole action's probability ratio, the TRCA paper's Eq. 21)
    pg_t      = max(-A_t * ratio, -A_t * clip(ratio, 1 - clip_low, 1 + clip_high))
    kl_t      = exp(ref_t - logp_t) - (ref_t - logp_t) - 1          (k3 estimator, >= 0)
    loss_t    = pg_t + kl_coef * kl_t - entropy_coef * entropy_t
    loss      = sum_t W_t * m_t * loss_t

``W_t`` (``weights``) is the aggregation weight of each token (``aggregation_weights`` in
trainers/update.py): ``token_mean`` 1/num_tokens of the optimizer step; ``step_mean``
1/(S * n_s); ``rollout_mean_step_mean`` 1/(N * T_i * n_s) (the paper's 1/N sum_i 1/T_i sum_t,
Eq. 11/22). With ``weights=None`` it is 1/``num_tokens``. Weights span the whole optimizer step
(all micro-batches), so gradient accumulation sums micro-batch losses to exactly the loss of
the full batch. With the action-level ratio every token of a step carries the same pg value,
so a step's pg term is its weight times pg_s.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LossTerms:
    loss: torch.Tensor  # scalar to backpropagate
    pg: torch.Tensor  # the following are sums over masked tokens (detached), for logging
    kl: torch.Tensor
    entropy: torch.Tensor
    clipped: torch.Tensor
    ratio: torch.Tensor
    tokens: torch.Tensor


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    entropy: torch.Tensor | None,
    *,
    clip_low: float,
    clip_high: float,
    kl_coef: float,
    entropy_coef: float,
    num_tokens: float,
    ratio_level: str = "token",
    weights: torch.Tensor | None = None,
) -> LossTerms:
    """All tensors are ``[batch, response_len]``; ``mask`` is 0/1 (bool or float); one row is
    one step sample (one action)."""
    m = mask.to(logp.dtype)
    if ratio_level == "action":
        log_ratio = ((logp - old_logp) * m).sum(dim=-1, keepdim=True)
        ratio = torch.exp(log_ratio).expand_as(logp)
    elif ratio_level == "token":
        ratio = torch.exp(logp - old_logp)
    else:
        raise ValueError(f"ratio_level must be 'token' or 'action', got {ratio_level!r}")
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    pg = torch.maximum(unclipped, clipped)
    per_token = pg
    if ref_logp is not None and kl_coef > 0:
        log_ref_ratio = ref_logp - logp
        kl = torch.exp(log_ref_ratio) - log_ref_ratio - 1.0
        per_token = per_token + kl_coef * kl
    else:
        kl = torch.zeros_like(logp)
    if entropy is not None and entropy_coef > 0:
        per_token = per_token - entropy_coef * entropy
    ent = entropy if entropy is not None else torch.zeros_like(logp)
    w = m / max(float(num_tokens), 1.0) if weights is None else weights.to(logp.dtype) * m
    loss = (per_token * w).sum()
    engaged = ((clipped > unclipped) & (m > 0)).to(logp.dtype)
    return LossTerms(
        loss=loss,
        pg=(pg * m).sum().detach(),
        kl=(kl * m).sum().detach(),
        entropy=(ent * m).sum().detach(),
        clipped=engaged.sum().detach(),
        ratio=(ratio * m).sum().detach(),
        tokens=m.sum().detach(),
    )


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of softmax(logits) over the last dimension."""
    logz = torch.logsumexp(logits, dim=-1)
    probs = torch.softmax(logits, dim=-1)
    return logz - (probs * logits).sum(dim=-1)
