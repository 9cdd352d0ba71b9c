"""Correctness oracle and throughput backends (`gpu`, `table`, `model`)."""
