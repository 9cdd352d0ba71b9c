"""PPO's default torch RLModule with action masking, for RLlib's new API stack.

Adapted from RLlib's example `ray/rllib/examples/rl_modules/classes/action_masking_rlm.py`
(`ActionMaskingTorchRLModule`). The environment's observation is a `Dict` with
`"observations"` (what the networks read) and `"action_mask"` (1 = legal). The module
builds PPO's default encoder, policy and value heads on `"observations"` only, and adds
`log(mask)` clamped to `FLOAT_MIN` to the policy logits, so a masked action gets
probability exactly 0 when sampling (exploration), is never the argmax (inference), and
its log-probability in the loss is that of an action the policy could not take.

Differences from the example, and why:
- the batch is not modified in place: the example pops `"action_mask"` out of
  `batch[Columns.OBS]` in `compute_values` and relies on `_forward_train` seeing the same,
  mutated dict afterwards; here every forward pass takes the mask from the observation
  it is given, so the order in which RLlib's connectors and learner call the module
  does not matter;
- only `_forward` and `_forward_train` are overridden: `_forward_inference` and
  `_forward_exploration` call `_forward` in RLlib's `RLModule`;
- it derives from `DefaultPPOTorchRLModule` (the example's `PPOTorchRLModule` import
  is deprecated in Ray 2.60).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
from ray.rllib.core.columns import Columns
from ray.rllib.utils.torch_utils import FLOAT_MIN

MASK, OBS = "action_mask", "observations"


def mask_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`logits + max(log(mask), FLOAT_MIN)`: unchanged where the mask is 1, the most
    negative float32 where it is 0 (finite, so softmax and entropy stay NaN-free)."""
    return logits + torch.clamp(torch.log(mask.to(logits.dtype)), min=FLOAT_MIN)


class MaskedPPOTorchRLModule(DefaultPPOTorchRLModule):
    """PPO's default torch module on `obs["observations"]`, masked by `obs["action_mask"]`."""

    def __init__(self, *, observation_space: gym.Space | None = None, **kwargs):
        if not (isinstance(observation_space, gym.spaces.Dict)
                and {MASK, OBS} <= set(observation_space.spaces)):
            raise ValueError("MaskedPPOTorchRLModule needs a Dict observation space with "
                             f"'{MASK}' and '{OBS}' (agents.rl.wrappers.MaskedObservation), "
                             f"got {observation_space}")
        # the default PPO networks are built for the inner observation space ...
        self.observation_space_with_mask = observation_space
        super().__init__(observation_space=observation_space[OBS], **kwargs)

    def setup(self):
        super().setup()
        # ... while the module itself (its checkpointed constructor arguments and the
        # spaces RLlib compares with the env's) keeps the Dict space with the mask
        self.observation_space = self.observation_space_with_mask

    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        mask, inner = self._split(batch)
        return self._masked(super()._forward(inner, **kwargs), mask)

    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        mask, inner = self._split(batch)
        return self._masked(super()._forward_train(inner, **kwargs), mask)

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None):
        if embeddings is None:  # GAE in the learner connector: values from observations
            _, batch = self._split(batch)
        return super().compute_values(batch, embeddings)

    @staticmethod
    def _split(batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        """(mask, a shallow copy of the batch whose OBS is the inner observations)."""
        obs = batch[Columns.OBS]
        if not isinstance(obs, dict) or MASK not in obs or OBS not in obs:
            raise ValueError(f"expected batch[{Columns.OBS!r}] to be a dict with '{MASK}' and "
                             f"'{OBS}', got {type(obs).__name__}"
                             + (f" with keys {sorted(obs)}" if isinstance(obs, dict) else ""))
        inner = dict(batch)
        inner[Columns.OBS] = obs[OBS]
        return obs[MASK], inner

    @staticmethod
    def _masked(out: dict[str, Any], mask: torch.Tensor) -> dict[str, Any]:
        out[Columns.ACTION_DIST_INPUTS] = mask_logits(out[Columns.ACTION_DIST_INPUTS], mask)
        return out
