"""The verifiers plugin ``rubricgym-verifiers``: verifiers imports this module by that name and
takes the one Taskset and the one Env subclass ``__all__`` exports
(rubricgym.integrations.verifiers_env; docs/verifiers.md)."""

from rubricgym.integrations.verifiers_env import (
    RubricgymData,
    RubricgymEnv,
    RubricgymEnvConfig,
    RubricgymTask,
    RubricgymTaskset,
    RubricgymTasksetConfig,
)

__all__ = ["RubricgymData", "RubricgymEnv", "RubricgymEnvConfig", "RubricgymTask", "RubricgymTaskset",
           "RubricgymTasksetConfig"]
