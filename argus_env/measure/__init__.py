"""Correctness oracle, feature extraction, the analytic cost model and the throughput
backends (`model`, `table`, `gpu`, `pool`), each built for one `argus_env.target.Target`."""
