"""rubricgym inside other training libraries: ``rubricgym.integrations.trl`` (TRL's
``GRPOTrainer``: multi-turn rollouts and per-step advantages, docs/integrations.md) and
``rubricgym.integrations.skyrl`` (SkyRL-gym text envs with per-step rewards, docs/skyrl.md)."""
