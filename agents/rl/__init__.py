"""RLlib policies for the Argus environments: the action-masking observation wrapper
(`wrappers`), the masked PPO RLModule (`masking`) and the PPO agent (`ppo`).

Ray is imported only by the modules that need it, so `import agents.rl` stays cheap."""
