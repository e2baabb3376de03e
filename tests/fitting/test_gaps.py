"""A logging gap inside a rest window (issue 33 item 16c): the Allan deviation of received samples models
lost samples as a sampler loses them, a few at a time, not a minute without data, so no window bridges a
gap: the window found lies on one side of it, a window given with --static is cut to its longest part
without one, and either is said in one line."""

from __future__ import annotations

import numpy as np
import pytest

from sensorgym.fitting.api import fit

from .published import Params, generate

#: a 100 Hz gyro at rest with a walk, 10 min, logging nothing from 200 to 260 s
P = Params(rate=100.0, noise_density=0.003, random_walk_density=3e-4, level=0.3)


@pytest.fixture
def gapped(tmp_path):
    t, y = generate(P, 600.0, seed=2)
    keep = (t < 200.0) | (t >= 260.0)
    path = tmp_path / "gap.npz"
    np.savez(path, t=t[keep], gyro=y[keep])
    return path, t[keep], y[keep]


def test_the_window_found_bridges_no_gap(gapped, tmp_path):
    """d71066f took 0-600 s, across the gap (the walk read 0.000377 for 0.0003, from a log whose 60 s jump
    the model spreads over every sample)."""
    path, t, y = gapped
    result = fit(path, ["gyro"], simulate_config=False)
    f = result.channels[0]
    assert f.window[0] >= 260.0 and f.window[1] == pytest.approx(599.99)
    assert any("logging gap of 60 s at 200 s" in w and "bridges none" in w for w in result.warnings)
    # the same fit as the part after the gap alone (the same window: trimmed by half a second after it)
    after = t >= 260.0
    np.savez(tmp_path / "after.npz", t=t[after], gyro=y[after])
    static = f"{f.window[0] - 260.0}:{f.window[1] - 260.0 + 1.0}"
    alone = fit(tmp_path / "after.npz", ["gyro"], static=static, simulate_config=False).channels[0]
    for term in ("noise_density", "random_walk_density"):
        assert f.noise.estimates[term].value == pytest.approx(alone.noise.estimates[term].value, rel=1e-9)


def test_a_given_window_is_cut_at_the_gap(gapped):
    path, *_ = gapped
    result = fit(path, ["gyro"], static="0:600", simulate_config=False)
    f = result.channels[0]
    assert f.window == pytest.approx((260.0, 599.99))  # the longer part
    assert f.gaps == [pytest.approx((199.99, 260.0))]
    line = next(w for w in result.warnings if "--static 0:600" in w)
    assert "holds a logging gap of 60 s at 200 s" in line and "longest part without one, 260-600 s" in line
