"""The masked PPO RLModule: masked actions get probability 0 in every forward pass."""

import numpy as np
import pytest

pytest.importorskip("ray.rllib")
import torch  # noqa: E402
from ray.rllib.core.columns import Columns  # noqa: E402
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig  # noqa: E402
from ray.rllib.core.rl_module.rl_module import RLModuleSpec  # noqa: E402

from argus_env.agents.rl.masking import MaskedPPOTorchRLModule  # noqa: E402
from argus_env.agents.rl.wrappers import make_env  # noqa: E402


@pytest.fixture(scope="module")
def module_and_env():
    env = make_env({"correctness": "none", "shape": "decode-16"})
    spec = RLModuleSpec(module_class=MaskedPPOTorchRLModule,
                        observation_space=env.observation_space, action_space=env.action_space,
                        model_config=DefaultModelConfig(fcnet_hiddens=[16], head_fcnet_hiddens=[]))
    return spec.build(), env


def _batch(env, n=8):
    obs, _ = env.reset(seed=0)
    x = torch.as_tensor(np.stack([obs["observations"]] * n))
    mask = torch.as_tensor(np.stack([obs["action_mask"]] * n))
    mask[1::2, 0] = 0.0                                 # rows with another mask
    return {Columns.OBS: {"observations": x, "action_mask": mask}}, mask


@pytest.mark.parametrize("phase", ["forward_inference", "forward_exploration", "forward_train"])
def test_masked_actions_get_no_probability(module_and_env, phase):
    module, env = module_and_env
    batch, mask = _batch(env)
    out = getattr(module, phase)(batch)
    dist = module.get_exploration_action_dist_cls().from_logits(out[Columns.ACTION_DIST_INPUTS])
    samples = torch.stack([dist.sample() for _ in range(200)])
    assert bool(mask.gather(1, samples.T).all()), "sampled a masked action"
    probs = torch.softmax(out[Columns.ACTION_DIST_INPUTS].detach(), -1)
    assert float(probs[mask == 0].max()) == 0.0, "masked action with probability > 0"
    assert torch.isfinite(dist.entropy()).all(), "entropy not finite under the mask"
    assert isinstance(batch[Columns.OBS], dict), "the module must not modify its input batch"


def test_values_read_the_inner_observations(module_and_env):
    module, env = module_and_env
    batch, _ = _batch(env)
    values = module.compute_values(batch)
    assert values.shape == (8,) and torch.isfinite(values).all(), values


def test_a_space_without_mask_is_refused(module_and_env):
    _, env = module_and_env
    with pytest.raises(ValueError, match="action_mask"):
        RLModuleSpec(module_class=MaskedPPOTorchRLModule,
                     observation_space=env.observation_space["observations"],
                     action_space=env.action_space).build()
