"""The RLlib action-masking wrappers, which live in `argus_env.rllib` (kept importable
here for the PPO agent and for checkpoints that name this module)."""

from argus_env.rllib import (DEFAULT_ENV_ID, ENV_NAME, OBS_HIGH, WRAPPER_KEYS,  # noqa: F401
                             MaskAudit, MaskedObservation, ShapeChoice, env_creator,
                             flatten_observation, make_env, make_raw_env, masked_observation,
                             normalise_perf, normalise_report, read_audit, register,
                             register_ids)
