"""RLlib by plain env id, as the README shows it: `argus_env.rllib.register_ids()` and then
`.environment("Argus-GEMM-v0")`, with 2 remote env runners and async vectorisation."""

import pytest

pytestmark = pytest.mark.slow


def test_ppo_by_plain_id_with_remote_runners_and_async_vector_envs(ray_session):
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    import argus_env.rllib
    from argus_env.agents.rl.masking import MaskedPPOTorchRLModule
    assert "Argus-GEMM-v0" in argus_env.rllib.register_ids()
    config = (PPOConfig()
              .environment("Argus-GEMM-v0", env_config={"correctness": "none",
                                                        "shape": "decode-16",
                                                        "max_episode_steps": 8})
              .env_runners(num_env_runners=2, num_envs_per_env_runner=2,
                           gym_env_vectorize_mode="async", num_cpus_per_env_runner=0.5)
              .learners(num_learners=0)
              .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
              .rl_module(rl_module_spec=RLModuleSpec(
                  module_class=MaskedPPOTorchRLModule,
                  model_config=DefaultModelConfig(fcnet_hiddens=[16], head_fcnet_hiddens=[]))))
    algo = config.build_algo()
    try:
        for _ in range(2):
            result = algo.train()
        sampled = result["env_runners"]["num_env_steps_sampled_lifetime"]
        assert sampled >= 128, result["env_runners"]
    finally:
        algo.stop()
