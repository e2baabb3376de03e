"""The power of the study's paired t-test (issue 33 item 19): ``summary.md`` states, per level, the smallest
difference the study could have detected with 80% probability, from the spread of the paired differences
and the number of seeds, so that "no clear difference" says what it rules out. The formula (scipy's
noncentral t) is checked against a published value, the large-sample normal formula and a simulation of
the study's own test on 20,000 studies."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from sensorgym.app.ablation.report import summary_markdown
from sensorgym.app.ablation.statistics import detectable_difference, paired_difference, paired_t_power

from .test_cli_study import SCORES, SWEEP_CFG, _rows


def test_the_power_is_the_published_one():
    """G*Power's one-sample (= paired) t-test, two-sided at 5%: d = 1 with n = 10 has power 0.8031 (Faul
    et al. 2007's program; Cohen 1988's tables give 0.80); no difference has power alpha."""
    assert paired_t_power(1.0, 1.0, 10) == pytest.approx(0.8031, abs=5e-5)
    assert paired_t_power(0.0, 3.0, 4) == pytest.approx(0.05, abs=1e-12)
    assert paired_t_power(2.0, 1.0, 1) != paired_t_power(2.0, 1.0, 1)  # one pair: no test, NaN


@pytest.mark.parametrize("n", [3, 6])
def test_the_detectable_difference_is_found_four_times_in_five_by_the_studys_test(n):
    """20,000 simulated studies of ``n`` seeds whose paired differences have sd 40 and the mean the formula
    gives: the study's paired t-test (paired_difference = scipy's ttest_rel) has p < 0.05 in 80% of them
    (a standard error of 0.0028: +-0.012 is 4.2 of them); at 0.7 of that mean clearly fewer."""
    sd, studies = 40.0, 20_000
    smallest = detectable_difference(sd, n)
    rng = np.random.default_rng(n)
    control = rng.normal(-600.0, 100.0, (studies, n))
    for scale, expected in ((1.0, 0.80), (0.7, paired_t_power(0.7 * smallest, sd, n))):
        treatment = control + rng.normal(scale * smallest, sd, (studies, n))
        p = stats.ttest_rel(treatment, control, axis=1).pvalue
        assert paired_difference(treatment[0], control[0])["p"] == pytest.approx(p[0], rel=1e-12)
        assert np.mean(p < 0.05) == pytest.approx(expected, abs=0.012), (scale, n)
    assert paired_t_power(0.7 * smallest, sd, n) < 0.65


def test_many_seeds_reach_the_normal_formula_and_few_seeds_need_far_more():
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)  # 2.80
    assert detectable_difference(1.0, 2000) == pytest.approx(z / math.sqrt(2000), rel=2e-3)
    assert detectable_difference(1.0, 3) == pytest.approx(5.65 / math.sqrt(3), rel=1e-3)  # 2x the normal one
    assert math.isnan(detectable_difference(1.0, 1)) and math.isnan(detectable_difference(0.0, 5))


@settings(max_examples=40, deadline=None)
@given(sd=st.floats(0.01, 1e4), n=st.integers(2, 60))
def test_the_detectable_difference_is_where_the_power_crosses_80_percent(sd, n):
    smallest = detectable_difference(sd, n)
    assert paired_t_power(smallest, sd, n) == pytest.approx(0.8, abs=1e-9)
    assert paired_t_power(0.99 * smallest, sd, n) < 0.8 < paired_t_power(1.01 * smallest, sd, n)
    assert detectable_difference(2 * sd, n) == pytest.approx(2 * smallest, rel=1e-6)  # in units of sd


def test_summary_states_the_smallest_detectable_difference_per_level():
    text = summary_markdown(_rows(), ["sensors.angle.noise"], SWEEP_CFG)
    for noise in (0.0, 0.2):
        d = paired_difference(SCORES[(noise, "asymmetric")], SCORES[(noise, "symmetric")])
        smallest = detectable_difference(d["sd"], 3)
        row = next(line for line in text.splitlines() if line.startswith(f"| {noise} |"))
        assert f"| {smallest:,.1f} |" in row, row
    assert "| detectable (80% power) | episode sd |" in text
    # the null level's sentence says what it rules out, and what 10 seeds would
    d = paired_difference(SCORES[(0.2, "asymmetric")], SCORES[(0.2, "symmetric")])
    null = next(line for line in text.splitlines() if line.startswith("- At angle noise = 0.2"))
    assert (
        f"With 3 seeds and this spread of the paired differences (sd {d['sd']:,.1f}), the study detects a "
        f"true difference of {detectable_difference(d['sd'], 3):,.1f} or more (either way) with 80% "
        "probability: a smaller one is not ruled out; 10 seeds would detect "
        f"{detectable_difference(d['sd'], 10):,.1f}."
    ) in null
    clear = next(line for line in text.splitlines() if line.startswith("- At angle noise = 0.0"))
    assert "80% probability" not in clear  # a difference found needs no power statement
    assert "*detectable (80% power)* is the smallest true difference" in text
