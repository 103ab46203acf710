"""EVERY official retail, airline and telecom task, through ``gym.make`` with the scripted user.

- The gold replay (gold tool calls, the gold device actions done by the user, a closing message
  with the task's ``communicate_info``) scores tau2's reward 1.0.
- A mutating call is a gold call that changed a database fingerprint during the gold replay
  (agent side: the step's ``db_changed``; device side: the replay's calls executed again in
  order on a fresh environment). Without the LAST mutating call the task scores below 1.0,
  except the tasks listed in docs/tau_bench.md.
- With no action at all (only the closing message; the user performs no device action) the
  tasks listed in docs/tau_bench.md still score 1.0 (tau2's verdict: nothing needed changing).
- TRCA on the gold replays: every Evidence and Execution operator fires somewhere, no
  Invalidity operator fires, and no two operators of a category fire on exactly the same steps.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from requirements_guard import need

ROOT = Path(__file__).resolve().parents[2]
DOMAINS = ("retail", "airline", "telecom")
EXPECTED_COUNTS = {"retail": 114, "airline": 50, "telecom": 114}


def documented() -> dict[str, list[str]]:
    """The exception lists in docs/tau_bench.md (the fenced ``tau-bench-exceptions`` block)."""
    text = (ROOT / "docs" / "tau_bench.md").read_text()
    block = re.search(r"```text tau-bench-exceptions\n(.*?)```", text, re.DOTALL)
    assert block, "docs/tau_bench.md lacks the tau-bench-exceptions block"
    out: dict[str, list[str]] = {}
    for line in block.group(1).splitlines():
        if line.strip():
            key, _, ids = line.partition(":")
            out[key.strip()] = sorted(ids.split())
    return out


def mutating_agent_calls(transitions) -> list[int]:
    """Gold indices of the calls whose step changed the agent database (all gold calls are the agent's)."""
    calls = [t for t in transitions if t.facts.call_kind == "tool"]
    return [i for i, t in enumerate(calls) if t.facts.db_changed]


def domain_results(domain: str, judgments: list[dict[str, int]]) -> tuple[int, list, list[str], list[str]]:
    """(tasks, gold replays below 1.0, ids still 1.0 without the last mutating call, ids 1.0 with no action)."""
    from replay import make, mutating_gold_indices, replay

    from rubricgym.adapters.tau_bench.expert import gold_actions

    env = make(domain, reward="default")
    quiet_user = make(domain, scripted_user={"device_actions": False})
    ids = env.unwrapped.adapter.task_ids()
    failed, still, noop = [], [], []
    for task_id in ids:
        reward, transitions, info = replay(env, task_id, judgments=judgments)
        if reward != 1.0:
            failed.append((task_id, reward, info.get("error")))
            continue
        gold = gold_actions(env.unwrapped.adapter.task)
        user_side = any(a.requestor == "user" for a in gold)
        mutating = mutating_gold_indices(env) if user_side else mutating_agent_calls(transitions)
        if mutating:
            last = mutating[-1]
            dropper = make(domain, scripted_user={"skip_gold_actions": [last]}) if gold[last].requestor == "user" else env
            dropped, _, _ = replay(dropper, task_id, drop=last)
            if dropped >= 1.0:
                still.append(task_id)
        nothing, _, _ = replay(quiet_user, task_id, actions=[])
        if nothing >= 1.0:
            noop.append(task_id)
    return len(ids), failed, sorted(still), sorted(noop)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_every_official_task_replays_to_tau2s_reward():
    need("tau2", "pip install 'rubricgym[tau_bench]'")
    docs = documented()
    judgments: list[dict[str, int]] = []
    for domain in DOMAINS:
        n, failed, still, noop = domain_results(domain, judgments)
        assert n == EXPECTED_COUNTS[domain]
        assert failed == [], f"{domain}: gold replays below 1.0: {failed[:5]}"
        assert still == docs[f"{domain}.still_1_without_last_mutating_call"], (domain, still)
        assert noop == docs[f"{domain}.1_with_no_action"], (domain, noop)

    from rubricgym.trca.library import OperatorLibrary, read_library_file

    lib = OperatorLibrary.model_validate(read_library_file(ROOT / "operator_libraries" / "tau_bench.yaml"))
    fired = {op.id: frozenset(n for n, j in enumerate(judgments) if j[op.id]) for op in lib.operators}
    for op in lib.operators:
        if op.category == "invalidity":
            assert not fired[op.id], f"Invalidity operator {op.id} fired on a gold replay"
        else:
            assert fired[op.id], f"{op.category} operator {op.id} never fired on the gold replays"
    for category in ("evidence", "execution"):
        sets = [fired[op.id] for op in lib.operators if op.category == category]
        assert len(set(sets)) == len(sets), f"two {category} operators fire on exactly the same steps"
