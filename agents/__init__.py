"""Agents that optimize kernels in the Argus environments: search baselines (`search/`),
RLlib policies (`rl/`) and the in-context LLM planner (`llm/`). Each uses only the
environment's public API."""

AGENTS = {
    "random": "argus_env.agents.search.random_search",
    "greedy": "argus_env.agents.search.greedy",
    "evolutionary": "argus_env.agents.search.evolutionary",
    "bo": "argus_env.agents.search.bo",
    "mcts": "argus_env.agents.search.mcts",
    "llm": "argus_env.agents.llm.planner",
    "kb": "argus_env.agents.llm.scripted",
    "ppo": "argus_env.agents.rl.ppo",
}


def load_agent(name: str):
    """The `run(env, args)` function of agent `name`."""
    import difflib
    import importlib
    if name not in AGENTS:
        close = difflib.get_close_matches(name, list(AGENTS), 1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"unknown agent {name!r}{hint} (known: {', '.join(AGENTS)})")
    return importlib.import_module(AGENTS[name])
