"""Issue 33 item 4: ``set_noise``/``set_random_walk`` refuse what the options constructor refuses.

With ``noise_density=Choice([0.0, 0.01])`` the envs that drew 0 now draw again at the next reset; a
per-step ``noise`` set on them would then stand beside a density (the constructor refuses both non-zero
on one component).
"""

from __future__ import annotations

import pytest
import torch

import sensorgym as sg


def _manager(**options):
    mgr = sg.SensorManager(num_envs=64, dt=0.01, seed=0)
    sensor = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), **options))
    mgr.reset({"x": torch.zeros(64, 2)})
    return mgr, sensor


@pytest.mark.parametrize(
    ("density", "setter"), [("noise_density", "set_noise"), ("random_walk_density", "set_random_walk")]
)
def test_a_density_that_can_be_non_zero_refuses_the_per_step_twin(density, setter):
    with pytest.raises(ValueError, match="both non-zero"):  # the constructor's rule
        sg.StateSensorOptions(key="x", shape=(2,), **{density: sg.Choice([0.0, 0.01]), setter[4:]: 0.5})
    _, sensor = _manager(**{density: sg.Choice([0.0, 0.01])})
    drew_zero = (sensor.read_randomization()[density][:, 0] == 0).nonzero().flatten()
    assert 0 < len(drew_zero) < 64  # some envs drew 0 now
    with pytest.raises(ValueError, match=rf"{density}=Choice.*Fix: set {setter[4:]} only on components"):
        getattr(sensor, setter)(0.5, envs_idx=drew_zero)


def test_per_component_density_allows_the_twin_where_it_is_zero():
    mgr, sensor = _manager(noise_density=(sg.Choice([0.0, 0.01]), 0.0))
    sensor.set_noise([0.0, 0.5])  # component 1 has no density: allowed
    with pytest.raises(ValueError, match="noise_density"):
        sensor.set_noise([0.5, 0.0])
    md = mgr.metadata(sg.StateSensor)
    for _ in range(3):  # no env ever carries both, whatever the resets draw
        mgr.reset({"x": torch.zeros(64, 2)})
        drawn = sensor.read_randomization()["noise_density"]  # (B, 1): the randomized component 0
        assert drawn.shape == (64, 1) and bool((drawn != 0).any())
        assert not bool(((md.noise[:, :1] != 0) & (drawn != 0)).any())
        assert bool((md.noise[:, 1] == 0.5).all())
