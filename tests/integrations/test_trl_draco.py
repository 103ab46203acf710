"""DRACO through TRL: ``RubricGRPOTrainer(estimator="draco", judge=DracoJudge(...))`` trains one
real TRL step on ALFWorld whose per-step advantages come from the judge's verdicts on each
group's trajectories (a scripted OpenAI-compatible judge on loopback: criterion k passes when
the rollout took the 'inventory' action at least k times, citing its first step)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from integrations.trl_setup import make_trainer, need_trl_stack

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges"))
from judge_test_servers import ScriptedJudgeServer, _schema_of, scripted_answer  # noqa: E402

pytestmark = pytest.mark.slow
INVENTORY = re.compile(r'"action":\s*"inventory"')


def count_answer(body: dict) -> str:
    schema = _schema_of(body)
    if schema is None or "criteria" in schema.get("properties", {}):
        return scripted_answer(body)  # the criteria phases
    taken = len(INVENTORY.findall(body["messages"][-1]["content"]))
    answer = {}
    for k, cid in enumerate(sorted(schema["properties"])):
        answer[cid] = {"verdict": "pass" if taken > k else "fail", "steps": [0]}
        if "reason" in schema["properties"][cid].get("properties", {}):
            answer[cid] = {"reason": "scripted", **answer[cid]}
    return json.dumps(answer)


def test_a_trl_step_trains_on_the_judge_s_per_step_credit(tmp_path, monkeypatch):
    need_trl_stack()
    from rubricgym.credit import token_advantages
    from rubricgym.credit.draco import DracoVariant, draco_step_advantages
    from rubricgym.judges import JudgeSettings
    from rubricgym.judges.client import OpenAIChatBackend
    from rubricgym.judges.pipeline import DracoJudge

    server = ScriptedJudgeServer()
    server.answer = count_answer
    monkeypatch.setenv("RUBRICGYM_TEST_JUDGE_KEY", "sk-test-not-secret")
    settings = JudgeSettings(base_url=server.base_url, model="scripted", api_key_env="RUBRICGYM_TEST_JUDGE_KEY",
                             response_format="json_object_schema", timeout_s=10.0, concurrency=2)
    try:
        trainer = make_trainer(tmp_path, estimator="draco", judge=DracoJudge(OpenAIChatBackend(settings), settings))
        lora = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" in n}
        trainer.train()
    finally:
        server.stop()
    assert server.requests, "the judge was never called"
    advantages, episodes = trainer.last_advantages.numpy(), trainer.last_episodes
    assert advantages.ndim == 2 and advantages.shape[0] == len(episodes) == 4
    for row, episode in enumerate(episodes):
        record = episode.judge
        assert record is not None and record["variant"] == DracoVariant.DYNAMIC_CREDIT.value
        n_j = [s.response[1] - s.response[0] for s in episode.steps]
        a_j = draco_step_advantages(DracoVariant.DYNAMIC_CREDIT, record["advantage"], n_j,
                                    record["step_passes"], record["step_fails"])
        expected, _ = token_advantages("response", [float(v) for v in a_j], [s.tokens for s in episode.steps],
                                       advantages.shape[1])
        np.testing.assert_allclose(advantages[row], expected, atol=1e-6)
    assert np.abs(advantages).max() > 0, "every rollout judged alike: the test would show nothing"
    after = {n: p.detach() for n, p in trainer.model.named_parameters() if "lora_" in n}
    assert any(not np.allclose(lora[n].numpy(), after[n].numpy()) for n in lora)
    trainer.rollout_func.close()
