"""Your own RL loop over a rubricgym env, with rubricgym's per-step credit: collect a group of
rollouts from one initial state with a vector env, turn the rubric's step records into
per-step advantages, place them on the policy's tokens, and take one policy-gradient step in
plain torch. docs/own_loop.md walks through it; the test suite runs it.

    python examples/own_loop.py --env WebShop-Rubric-v0 --group 4 --model tiny

The policy here is random (an admissible action, or a malformed reply now and then) so the
example runs in seconds on a CPU; its replies are tokenized as if the model had written
them. With a real policy, sample the response ids from the model instead.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import torch

import rubricgym
from rubricgym.credit import StepTokens, token_advantages
from rubricgym.estimators import group_step_advantages, resolve_estimator
from rubricgym.models import load_causal_lm
from rubricgym.prompts import EpisodeView, PromptSettings, render_prompt
from rubricgym.tokens import response_token_spans
from rubricgym.vector import finished_trajectories, unstack_infos


@dataclass
class Step:
    """One policy decision: the tokens it was trained on and where its action is."""

    prompt_ids: list[int]
    response_ids: list[int]
    tokens: StepTokens  # spans inside response_ids


@dataclass
class Group:
    """G rollouts of one task from one initial state: their trajectories (facts, rewards and
    reward records per step) and the policy's tokens per step."""

    trajectories: list[rubricgym.Trajectory]
    steps: list[list[Step]] = field(default_factory=list)


def random_reply(view: EpisodeView, rng: random.Random) -> str:
    """An admissible action in the env's own format, or (one time in five) no action at all."""
    if rng.random() < 0.2 or not view.admissible_actions:
        return "I am not sure what to do."
    action = rng.choice(view.admissible_actions).replace("<keywords>", "something useful")
    return view.grammar.render(action, reasoning="let me try this")


def collect_group(env_id: str, group_size: int, tokenizer: object, seed: int = 0, max_steps: int = 6,
                  prompts: PromptSettings | None = None) -> Group:
    """One group: ``group_size`` sub-envs reset to the same task and seed, stepped together
    until every episode has ended once (autoreset starts new episodes we ignore)."""
    prompts = prompts or PromptSettings(style="chat")
    rng = random.Random(seed)
    envs = gym.make_vec(env_id, num_envs=group_size, vectorization_mode="sync", max_steps=max_steps)
    try:
        task = rubricgym.task_ids(env_id)[seed % 3]
        obs, infos = envs.reset(seed=[seed] * group_size, options={"task_id": task})
        per_env = unstack_infos(infos, group_size)
        views = [EpisodeView.start(envs.envs[i], obs[i], per_env[i]) for i in range(group_size)]
        steps: list[list[Step]] = [[] for _ in range(group_size)]
        trajectories: dict[int, rubricgym.Trajectory] = {}
        while len(trajectories) < group_size:
            replies, pending = [], []
            for i, view in enumerate(views):
                reply = random_reply(view, rng)
                replies.append(reply)
                if i not in trajectories:
                    pending.append((i, render_prompt(tokenizer, view, prompts), reply))
            obs, _, _, _, infos = envs.step(replies)
            per_env = unstack_infos(infos, group_size)
            for i, prompt_ids, reply in pending:
                steps[i].append(tokens_of(tokenizer, prompt_ids, reply, per_env[i]))
                views[i].record(reply, obs[i], per_env[i])
            for i, trajectory in finished_trajectories(infos):
                trajectories.setdefault(i, trajectory)
        return Group([trajectories[i] for i in range(group_size)], steps)
    finally:
        envs.close()


def tokens_of(tokenizer: object, prompt_ids: list[int], reply: str, info: dict) -> Step:
    """The reply as token ids, with the token spans of its reasoning and action (from the
    parser's character spans in ``info["transition"]``)."""
    response_ids = list(tokenizer(reply, add_special_tokens=False)["input_ids"])  # type: ignore[operator]
    parsed = info["transition"].action
    reasoning, action = response_token_spans(tokenizer, response_ids, reply, parsed.reasoning_span,
                                             parsed.action_span)
    return Step(prompt_ids, response_ids, StepTokens(response=(0, len(response_ids)), action=action,
                                                     reasoning=reasoning))


def token_credit(group: Group, estimator: str = "trca") -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Per rollout, per step: (advantages, mask) over the step's response tokens."""
    resolved = resolve_estimator(estimator)  # once: gamma, lambda, outcome and objective settled
    per_step = group_step_advantages(resolved, group.trajectories)
    return [[token_advantages(resolved.placement, [value], [step.tokens], len(step.response_ids))
             for value, step in zip(values, steps, strict=True)]
            for values, steps in zip(per_step, group.steps, strict=True)]


def policy_gradient_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, group: Group,
                         credit: list[list[tuple[np.ndarray, np.ndarray]]]) -> float:
    """REINFORCE with the token advantages: minimise -sum(A * log pi(token)) over the trained
    tokens, averaged per token. Returns the loss."""
    model.train()
    optimizer.zero_grad()
    total = torch.zeros(())
    counted = 0
    for steps, rollout_credit in zip(group.steps, credit, strict=True):
        for step, (advantages, mask) in zip(steps, rollout_credit, strict=True):
            if not mask.any():
                continue
            ids = torch.tensor([step.prompt_ids + step.response_ids])
            logits = model(input_ids=ids).logits[0, len(step.prompt_ids) - 1: -1]
            logp = torch.log_softmax(logits.float(), dim=-1)
            taken = logp.gather(1, torch.tensor(step.response_ids)[:, None])[:, 0]
            weight = torch.tensor(advantages * mask, dtype=taken.dtype)
            total = total - (weight * taken).sum()
            counted += int(mask.sum())
    loss = total / max(1, counted)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="WebShop-Rubric-v0")
    parser.add_argument("--group", type=int, default=4, help="rollouts per group (G)")
    parser.add_argument("--estimator", default="trca", help="grpo, trca, trca_no_rf, trca_no_rb")
    parser.add_argument("--model", default="tiny", help="'tiny' (random, seconds), 'smollm2' or a local folder")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    model, tokenizer = load_causal_lm(args.model, device="cpu", seed=args.seed)
    group = collect_group(args.env, args.group, tokenizer, seed=args.seed)
    credit = token_credit(group, args.estimator)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    loss = policy_gradient_step(model, optimizer, group, credit)
    result = {"loss": loss, "steps": float(sum(len(s) for s in group.steps)),
              "successes": float(sum(bool(t.outcome.success) for t in group.trajectories)),
              "trained_tokens": float(sum(int(mask.sum()) for rollout in credit for _, mask in rollout))}
    print(result)
    return result


if __name__ == "__main__":
    main()
