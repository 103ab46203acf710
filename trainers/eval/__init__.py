"""``rubricgym eval``: measure an agent on an env (docs/eval.md). One module per concern:

* ``settings``: ``EvalSettings``, the output file names, an episode's outcome labels;
* ``policies``: ``PolicySpec`` and the policy it builds (endpoint, local, callable, adapter);
* ``workers``: the worker processes, one episode's loop, the record queue;
* ``runner``: ``run_eval``, from the settings to the output folder (resume included);
* ``summary``: ``summarize`` and ``compare_runs`` (statistics: ``rubricgym.trainers.statistics``);
* ``judge``: ``--judge``, DRACO verdicts with a task's samples as one group;
* ``cli``: the command's options, progress and messages (not imported here).

Importing the package loads no torch: the checkpoint code (``--adapter``) and the run-file
helpers are imported where they are used.
"""

from rubricgym.trainers.eval.judge import JUDGE_FILE, EvalJudge, JudgedEpisodes, judge_episodes
from rubricgym.trainers.eval.policies import (
    PolicyError,
    PolicySpec,
    Reply,
    build_policy,
    intact_checkpoint,
    trained_adapter,
)
from rubricgym.trainers.eval.runner import run_eval
from rubricgym.trainers.eval.settings import EPISODES_FILE, SUMMARY_FILE, EvalSettings, Outcome
from rubricgym.trainers.eval.summary import compare_runs, summarize
from rubricgym.trainers.eval.workers import play_episode

__all__ = [
    "EPISODES_FILE", "JUDGE_FILE", "SUMMARY_FILE", "EvalJudge", "EvalSettings", "JudgedEpisodes", "Outcome",
    "PolicyError", "PolicySpec", "Reply", "build_policy", "compare_runs", "intact_checkpoint", "judge_episodes",
    "play_episode", "run_eval", "summarize", "trained_adapter",
]
