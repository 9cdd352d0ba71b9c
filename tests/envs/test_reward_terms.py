"""Reward terms on figures that are not numbers: a NaN or missing library figure, or a
non-positive throughput, is no measurement, and no term returns a NaN."""

from __future__ import annotations

import math

import pytest

from argus_env.reward.base import StepEvent, SubmitBonus


@pytest.mark.parametrize("throughput,anchor", [(500.0, math.nan), (500.0, None), (500.0, 0.0),
                                               (math.nan, 600.0), (0.0, 600.0),
                                               (500.0, -600.0), (math.inf, 600.0)])
def test_submit_bonus_without_a_usable_figure_is_the_unmeasured_penalty(throughput, anchor):
    bonus = SubmitBonus(1.0)
    got = bonus.update(StepEvent("submit", measured=True, throughput=throughput, anchor=anchor))
    assert math.isfinite(got) and got == -bonus.unmeasured


def test_submit_bonus_is_the_log_of_the_fraction_of_the_library():
    bonus = SubmitBonus(1.0)
    got = bonus.update(StepEvent("submit", measured=True, throughput=300.0, anchor=600.0))
    assert got == pytest.approx(math.log(0.5))
    assert bonus.update(StepEvent("transform", measured=True, throughput=1.0, anchor=1.0)) == 0
