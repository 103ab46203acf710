"""The GRPO-family loss as one pure function over per-token tensors (CleanRL style).

Per response token t with advantage A_t, mask m_t (1 = trained):

    ratio_t   = exp(logp_t - old_logp_t)
    pg_t      = max(-A_t * ratio_t, -A_t * clip(ratio_t, 1 - clip_low, 1 + clip_high))
    kl_t      = exp(ref_t - logp_t) - (ref_t - logp_t) - 1          (k3 estimator, >= 0)
    loss_t    = pg_t + kl_coef * kl_t - entropy_coef * entropy_t
    loss      = sum_t m_t * loss_t / num_tokens                       (token-level aggregation)

``num_tokens`` is the number of trained tokens of the whole optimizer step (all its
micro-batches), so gradient accumulation sums micro-batch losses to exactly the loss of
the full batch and every token weighs the same whatever sequence it belongs to.
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
) -> LossTerms:
    """All tensors are ``[batch, response_len]``; ``mask`` is 0/1 (bool or float)."""
    m = mask.to(logp.dtype)
    ratio = torch.exp(logp - old_logp)
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
    loss = (per_token * m).sum() / max(float(num_tokens), 1.0)
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
