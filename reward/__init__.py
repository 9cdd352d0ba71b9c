"""Reward functions of the Argus environments and their composition from YAML.

A reward object has `reset(state)`, `update(prev, state, event) -> float` and
`reward_on_error(kind) -> float`, and says whether it is deterministic (it is not when it
reads live GPU timings). `compose(config)` builds the weighted sum the environment uses
from a mapping such as `configs/reward/default.yaml`.
"""

from .base import (Composite, FailurePenalty, Reward, StepEvent, SubmitBonus,  # noqa: F401
                   ThroughputGain, ViolationPenalty, compose, load_reward)
