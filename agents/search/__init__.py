"""Search baselines: random search and greedy hill-climbing over env actions."""
