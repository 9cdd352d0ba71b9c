"""Prompt pieces: nothing in a prompt may vary between identical runs."""

from argus_env.agents.llm.prompt import perf_line, report_lines


def test_the_checkers_wall_time_stays_out_of_the_prompt():
    a = report_lines("gemm: all invariants hold (14 checks proven, 349 ms)")
    b = report_lines("gemm: all invariants hold (14 checks proven, 1203.5 ms)")
    assert a == b == ["gemm: all invariants hold (14 checks proven)"], (a, b)
    lines = report_lines("moe: 3 violation(s)\n- [scatter] one\n- [padding] two\n- [combine] three")
    assert lines == ["moe: 3 violation(s)", "- [scatter] one", "- [padding] two", "- ... 1 more"]


def test_performance_names_no_particular_library():
    assert "cuBLAS" not in perf_line([0, 0, 0.5, 0.7], True)
    assert perf_line([0, 0, 0.5, 0.7], True) == "Performance: 0.50x the library; best so far 0.70x"
