"""``rubricgym.evaluate`` (issue 53, item 4): an agent object or function, sync or async, played
in this process with its concurrency; the same records and summary as ``rubricgym eval``;
imported only when used."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from eval_agents import junk
from requirements_guard import need

import rubricgym
from rubricgym.cli import main
from rubricgym.trainers.preflight import SetupError

ENV = "ALFWorld-Rubric-v0"
LOOK = "<think>I look around.</think><action>look</action>"


def lines(out) -> list[dict]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


class Agent:
    """A notebook's agent object: state of its own (it is called in this process)."""

    def __init__(self) -> None:
        self.tasks: list[str] = []

    def respond(self, messages, task_id):
        self.tasks.append(task_id)
        return LOOK


def test_a_sync_agent_object_gives_the_command_s_records_and_summary(tmp_path):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    agent = Agent()
    summary = rubricgym.evaluate(ENV, agent, tasks=2, samples=2, concurrency=2, out=tmp_path / "api", max_steps=2,
                                 progress=False)
    assert summary == json.loads((tmp_path / "api" / "summary.json").read_text())
    assert summary["episodes"] == 4 and summary["outcomes"]["truncated"] == 4 and summary["policy"]["kind"] == "agent"
    assert len(agent.tasks) == 8 and len(set(agent.tasks)) == 2  # 4 episodes x 2 steps, called here
    # the command with the same (deterministic) answers writes the same records
    same = rubricgym.evaluate(ENV, junk, tasks=1, samples=2, out=tmp_path / "junk-api", max_steps=2, progress=False)
    assert main(["eval", "--env", ENV, "--n", "1", "--samples", "2", "--policy", "callable", "--callable",
                 "eval_agents:junk", "--max-steps", "2", "--out", str(tmp_path / "junk-cli")]) == 0
    by_pair = sorted(lines(tmp_path / "junk-cli"), key=lambda r: r["sample"])
    assert sorted(lines(tmp_path / "junk-api"), key=lambda r: r["sample"]) == by_pair
    command = json.loads((tmp_path / "junk-cli" / "summary.json").read_text())
    assert {k: v for k, v in same.items() if k != "policy"} == {k: v for k, v in command.items() if k != "policy"}


def test_an_async_agent_plays_its_episodes_concurrently_even_under_a_running_loop(tmp_path):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    in_flight, most = [0], [0]

    async def respond(messages):
        in_flight[0] += 1
        most[0] = max(most[0], in_flight[0])
        await asyncio.sleep(0.05)
        in_flight[0] -= 1
        return LOOK

    async def notebook_cell():  # Jupyter runs cells inside its loop: asyncio.run would be refused
        return rubricgym.evaluate(ENV, respond, tasks=2, concurrency=2, out=tmp_path / "async", max_steps=2,
                                  progress=False)

    summary = asyncio.run(notebook_cell())
    assert summary["episodes"] == 2 and summary["outcomes"]["truncated"] == 2, summary
    assert most[0] == 2  # both episodes' calls were awaited at once
    assert all(r["steps"] == 2 and r["error"] is None for r in lines(tmp_path / "async"))
    assert (tmp_path / "async" / "summary.json").is_file()


def test_an_agent_that_cannot_answer_is_refused_before_any_folder(tmp_path):
    with pytest.raises(SetupError, match="neither callable nor has a respond method"):
        rubricgym.evaluate(ENV, object(), out=tmp_path / "x")
    with pytest.raises(SetupError, match="cannot be called with the chat messages"):
        rubricgym.evaluate(ENV, lambda: "x", out=tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_import_rubricgym_stays_light_and_evaluate_loads_on_use():
    code = ("import sys, rubricgym\n"
            "assert 'rubricgym.trainers.eval' not in sys.modules and 'torch' not in sys.modules\n"
            "try:\n"
            "    rubricgym.evaluate('ALFWorld-Rubric-v0', object())\n"
            "except ValueError as exc:\n"
            "    assert 'respond method' in str(exc)\n"
            "assert 'rubricgym.trainers.eval.api' in sys.modules\n"
            "print('torch' in sys.modules)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "False", run.stderr[-2000:]
