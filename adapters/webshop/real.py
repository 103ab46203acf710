"""WebShop's own text environment (``web_agent_site``), behind the same small interface as
``BundledShop``, for users who have WebShop's site package and data installed.

Only the public pieces of ``WebAgentTextEnv`` are used: ``reset(session=...)``,
``step(action)`` (a 4-tuple), ``get_available_actions()``, ``instruction_text``, and the
simulated server's ``goals`` / ``product_item_dict`` / ``user_sessions`` for the expert
player and the outcome. Task ids are goal indices; by WebShop's convention goals 0-499
are its test split, 500-1499 its eval split and the rest train.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from rubricgym import BenchmarkNotInstalled

TEXT_ENV_MODULE = "web_agent_site.envs.web_agent_text_env"
SPLITS = {"test": (0, 500), "eval": (500, 1500), "train": (1500, None)}
NOT_INSTALLED = (
    "WebShop-Real-Rubric-v0 wraps WebShop's own text environment (module 'web_agent_site' from "
    "princeton-nlp's WebShop, with its product data and search index), which is not installed here. "
    "Install WebShop's site package and data, or use the bundled engine: WebShop-Rubric-v0 / "
    "WebShop-Rubric-Eval-v0 (a catalogue written for rubricgym, not the official data)."
)


def real_env_available() -> bool:
    try:
        return importlib.util.find_spec("web_agent_site") is not None
    except (ImportError, ValueError):
        return False


class RealShop:
    """``WebAgentTextEnv(observation_mode='text')`` with goal indices as task ids."""

    def __init__(self, split: str = "train", num_products: int | None = None, human_goals: bool = True,
                 **env_kwargs: Any):
        if not real_env_available():
            raise BenchmarkNotInstalled(NOT_INSTALLED)
        try:
            module = importlib.import_module(TEXT_ENV_MODULE)
        except Exception as exc:  # installed but broken (missing data, index, Java for pyserini)
            raise BenchmarkNotInstalled(f"{NOT_INSTALLED} (import failed: {type(exc).__name__}: {exc})") from exc
        self.env = module.WebAgentTextEnv(observation_mode="text", num_products=num_products,
                                          human_goals=human_goals, **env_kwargs)
        n = len(self.env.server.goals)
        lo, hi = SPLITS.get(split, (0, None))
        self.goal_ids = [str(i) for i in range(lo, min(hi if hi is not None else n, n))]

    def reset(self, goal_id: str) -> str:
        obs, _ = self.env.reset(session=int(goal_id))
        return obs

    @property
    def instruction(self) -> str:
        return str(self.env.instruction_text)

    def available_actions(self) -> dict[str, Any]:
        return dict(self.env.get_available_actions())

    def step(self, action: str) -> tuple[str, float, bool]:
        obs, reward, done, _ = self.env.step(action)
        return obs, float(reward or 0.0), bool(done)

    @property
    def goal(self) -> dict[str, Any]:
        return self.env.server.user_sessions[self.env.session]["goal"]

    def purchased(self) -> tuple[str | None, dict[str, str], Any]:
        session = self.env.server.user_sessions.get(self.env.session, {})
        done = bool(session.get("done"))
        return (session.get("asin") if done else None), dict(session.get("options") or {}), session.get("verbose_info")
