"""SearchQA-Rubric envs through gym.make: the oracle wins every bundled question in both
grammars with the operators it should fire, check_env, determinism, users' files, budgets,
and gold answers that reach only the terminal reward."""

from __future__ import annotations

import collections
import json
import subprocess
import sys

import pytest
from gymnasium.utils.env_checker import check_env

from searchqa.support import GRAMMARS, respond
from rubricgym.adapters.searchqa.data import BUNDLED_CORPUS, BUNDLED_QUESTIONS
from rubricgym.adapters.searchqa.expert import expert_actions
from rubricgym.registration import operator_library
from rubricgym.trca import load_library

LIBRARY = load_library(operator_library("SearchQA"))
BY_CATEGORY = {c: {o.id for o in LIBRARY.operators if o.category == c} for c in ("evidence", "invalidity", "execution")}


def play_oracle(env) -> tuple[list[dict], dict]:
    records, info = [], {}
    for action in expert_actions(env.unwrapped.adapter):
        _, reward, terminated, truncated, info = env.step(respond(action, env.unwrapped.adapter.grammar_name))
        records.append({"reward": reward, "info": info})
        if terminated or truncated:
            break
    return records, info


@pytest.mark.parametrize("grammar", GRAMMARS)
def test_oracle_scores_one_on_every_bundled_question_and_fires_the_right_operators(make_env, grammar):
    fired: collections.Counter[str] = collections.Counter()
    for env_id in ("SearchQA-Rubric-v0", "SearchQA-Rubric-Eval-v0"):
        env = make_env(env_id, grammar=grammar)
        tasks = env.unwrapped.adapter.task_ids()
        assert len(tasks) >= 30
        for task_id in tasks:
            env.reset(seed=0, options={"task_id": task_id})
            records, info = play_oracle(env)
            assert info["env_reward"] == 1.0 and info["outcome"].success and info["outcome"].score == 1.0, task_id
            last = info["transition"]
            assert last.terminated and not last.truncated and last.facts.tool == "answer"
            for r in records:
                on = {i for i, v in r["info"]["trca"]["judgments"].items() if v}
                assert not on & BY_CATEGORY["invalidity"], (task_id, on)
                fired.update(on)
    assert BY_CATEGORY["evidence"] | BY_CATEGORY["execution"] <= set(fired), \
        f"never fired: {(BY_CATEGORY['evidence'] | BY_CATEGORY['execution']) - set(fired)}"


def test_two_hop_oracle_follows_the_lead(make_env):
    env = make_env(grammar="search-r1")
    adapter = env.unwrapped.adapter
    task = next(t for t in adapter.task_ids() if adapter._questions[t].hops == 2)
    env.reset(seed=0, options={"task_id": task})
    records, _ = play_oracle(env)
    first, second = (r["info"]["transition"].facts for r in records[:2])
    assert first.tool == second.tool == "search" and first.query_targets and not first.query_uses_discovered_entity
    assert second.query_uses_discovered_entity and second.new_passage_ids
    assert records[1]["info"]["trca"]["judgments"]["lead_followed"]


@pytest.mark.parametrize("env_id,grammar", [("SearchQA-Rubric-v0", "search-r1"), ("SearchQA-Rubric-Eval-v0", "search-r1"),
                                            ("SearchQA-Rubric-v0", "trca")])
def test_gymnasium_env_checker(make_env, env_id, grammar):
    env = make_env(env_id, grammar=grammar)
    check_env(env.unwrapped, skip_render_check=False)


def _episode(env, task_id, seed, responses):
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    out = [obs, info["instruction"], info["binding"].model_dump()]
    for response in responses:
        obs, reward, terminated, truncated, info = env.step(response)
        t = info["transition"]
        out.append((obs, reward, terminated, truncated, t.facts.model_dump(), t.context_key, info["trca"]["r_TRCA"]))
        if terminated or truncated:
            break
    return out


@pytest.mark.parametrize("grammar", GRAMMARS)
def test_same_task_and_seed_give_identical_episodes(make_env, grammar):
    a, b = make_env(grammar=grammar), make_env(grammar=grammar)
    task = a.unwrapped.adapter.task_ids()[3]
    a.reset(seed=0, options={"task_id": task})
    responses = ["no tags", respond("search[velmora]" if grammar == "trca" else "velmora", grammar)]
    responses += [respond(x, grammar) for x in expert_actions(a.unwrapped.adapter)]
    assert _episode(a, task, 5, responses) == _episode(a, task, 5, responses) == _episode(b, task, 5, responses)
    picks = [a.reset(seed=s)[1]["task_id"] for s in (1, 2, 1)]
    assert picks[0] == picks[2]


def test_search_r1_protocol_surface(make_env):
    env = make_env()
    obs, info = env.reset(seed=0, options={"task_id": env.unwrapped.adapter.task_ids()[0]})
    assert "<search>" in obs and "Question: " in obs and info["question_id"]
    obs, reward, *_ , info = env.step("<think>hm</think><search>Velmora river</search><answer>ignored</answer>")
    assert obs.strip().startswith("<information>Doc 1(Title: ") and reward <= 0.6
    assert info["transition"].facts.tool == "search" and not info["transition"].terminated  # the first block decides
    obs, *_ , info = env.step("I think the answer is 42")
    assert "My previous action is invalid" in obs and info["transition"].facts.parse_error == "missing_tag"


def test_trca_grammar_pages_and_admissible_listing(make_env):
    env = make_env(grammar="trca")
    obs, _ = env.reset(seed=0, options={"task_id": env.unwrapped.adapter.task_ids()[0]})
    assert "Admissible actions: search[<query>], answer[<text>]" in obs
    entity = env.unwrapped.adapter.binding().target_entities[0]
    obs, *_ , info = env.step(respond(f"search[{entity}]", "trca"))
    assert obs.startswith(f"Results for '{entity}':\n[1] ") and "open[1]" in obs
    obs, *_ , info = env.step(respond("open[1]", "trca"))
    facts = info["transition"].facts
    assert obs.startswith("Document: ") and facts.tool == "open" and facts.opened_title and "read[1]" in obs
    assert not facts.new_passage_ids  # snippets only
    obs, *_ , info = env.step(respond("read[1]", "trca"))
    assert info["transition"].facts.new_passage_ids and "passage [1]" in obs
    assert info["admissible_actions"] is None  # free-text commands: listed in the observation instead


def test_turn_budget_truncates_without_answer(make_env):
    env = make_env(max_turns=3)
    env.reset(seed=0, options={"task_id": env.unwrapped.adapter.task_ids()[0]})
    results = [env.step(r) for r in ("<search>a b c</search>", "nothing", "<search>velmora</search>")]
    *_, terminated, truncated, info = results[-1]
    assert truncated and not terminated and info["outcome"].success is False and info["outcome"].score == 0.0
    assert info["transition"].facts.turns_left == 0


def test_gold_answers_reach_only_the_terminal_reward(make_env, tmp_path):
    """Same questions, different gold answers: every fact, binding and observation is identical."""
    rows = [json.loads(line) for line in BUNDLED_QUESTIONS["eval"].read_text().splitlines()][:6]
    runs = []
    for golds in (None, ["zzz-changed"]):
        path = tmp_path / f"q{len(runs)}.jsonl"
        path.write_text("".join(json.dumps({**r, **({"golden_answers": golds} if golds else {})}) + "\n" for r in rows))
        env = make_env(questions=str(path), corpus=str(BUNDLED_CORPUS))
        trace = []
        for r in rows:
            q = env.unwrapped.adapter._questions[r["id"]]
            responses = [f"<search>{x}</search>" for x in q.oracle_queries] + [f"<answer>{r['golden_answers'][0]}</answer>"]
            trace.append(_episode(env, r["id"], 0, responses))
        runs.append(trace)
    for original, changed in zip(*runs):
        rewards = [step[1] for step in original[3:]], [step[1] for step in changed[3:]]
        assert rewards[0][-1] > rewards[1][-1]  # the terminal reward differs ...
        strip = lambda ep: [ep[0], ep[1], ep[2]] + [(s[0], s[4], s[5]) for s in ep[3:]]  # noqa: E731
        assert strip(original) == strip(changed)  # ... and nothing else does


def test_users_files_through_gym_make(make_env, tmp_path):
    corpus = tmp_path / "wiki.jsonl"
    corpus.write_text("".join(json.dumps(p) + "\n" for p in [
        {"id": "0", "contents": '"Paris"\nParis is the capital and most populous city of France.'},
        {"id": "1", "contents": '"Berlin"\nBerlin is the capital of Germany.'},
        {"id": "2", "contents": '"Eiffel Tower"\nThe Eiffel Tower is a wrought-iron lattice tower in Paris.'}]))
    questions = tmp_path / "nq.jsonl"
    questions.write_text(json.dumps({"id": "q0", "question": "what is the capital of france",
                                     "golden_answers": ["Paris"], "data_source": "nq"}) + "\n")
    env = make_env(corpus=str(corpus), questions=str(questions))
    obs, info = env.reset(seed=0)
    assert info["task_id"] == "q0" and info["data_source"] == "nq"
    obs, *_ = env.step("<search>capital of France</search>")
    assert "Doc 1(Title: Paris)" in obs
    *_, terminated, _, info = env.step("<answer>paris.</answer>")
    assert terminated and info["env_reward"] == 1.0
    with pytest.raises(FileNotFoundError):
        make_env(questions=str(tmp_path / "none.jsonl"))
    with pytest.raises(ValueError, match="grammar"):
        make_env(grammar="xml")


def test_fresh_subprocess_make_without_import():
    code = ("import gymnasium as gym, sys\n"
            "assert 'rubricgym' not in sys.modules\n"
            "env = gym.make('rubricgym:SearchQA-Rubric-Eval-v0')\n"
            "obs, info = env.reset(seed=0)\n"
            "obs, r, term, trunc, info = env.step('<search>river</search>')\n"
            "print(type(env.unwrapped).__name__, info['transition'].facts.tool, sorted(info['trca']))\n")
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("RubricEnv search")


def test_per_dataset_ids_for_users_files(tmp_path):
    import gymnasium as gym

    from rubricgym.adapters.searchqa.datasets import register_dataset

    rows = [json.loads(line) for line in BUNDLED_QUESTIONS["eval"].read_text().splitlines()]
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows[:5]))
    test.write_text("".join(json.dumps(r) + "\n" for r in rows[5:8]))
    ids = register_dataset("mini", train, test, grammar="trca")
    assert ids == ["SearchQA-mini-Rubric-v0", "SearchQA-mini-Rubric-Eval-v0"]
    env = gym.make("SearchQA-mini-Rubric-Eval-v0")
    assert list(env.unwrapped.adapter.task_ids()) == [r["id"] for r in rows[5:8]]
    assert env.unwrapped.adapter.grammar_name == "trca"
    env.reset(seed=0)
    info = env.step("no action")[4]
    assert info["trca"]["judgments"]["parse_failure"]  # the SearchQA library is attached
    env.close()
    with pytest.raises(ValueError, match="already registered"):
        register_dataset("mini", train)
    with pytest.raises(ValueError, match="alphanumeric"):
        register_dataset("bad name", train)
    with pytest.raises(FileNotFoundError):
        register_dataset("missing", tmp_path / "nope.jsonl")


def test_malformed_search_r1_action_gets_the_fixed_message(make_env):
    env = make_env()
    env.reset(seed=0)
    obs, *_, info = env.step("<search><answer>x</answer></search>")
    facts = info["transition"].facts
    assert "My previous action is invalid" in obs and facts.malformed and facts.rejected and not facts.accepted
    assert "Malformed action" in facts.error_text and facts.tool == ""


@pytest.mark.parametrize("command", ["open[²]", "read[١]", "open[" + "9" * 5000 + "]"])
def test_page_numbers_int_would_refuse_are_a_scored_malformed_action(make_env, command):
    """str.isdigit accepts '²' and other Unicode digits that int() refuses, and int() refuses
    5,000 digits: each is the policy's malformed action, never an environment failure."""
    env = make_env(grammar="trca")
    env.reset(seed=0, options={"task_id": env.unwrapped.adapter.task_ids()[0]})
    entity = env.unwrapped.adapter.binding().target_entities[0]
    env.step(respond(f"search[{entity}]", "trca"))
    obs, reward, terminated, truncated, info = env.step(respond(command, "trca"))
    assert "environment_failure" not in info and not truncated and not terminated
    assert info["transition"].facts.malformed and "Malformed action" in obs
