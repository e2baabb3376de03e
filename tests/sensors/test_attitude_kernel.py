"""``AttitudeSensor``'s compiled outputs (sensors/mujoco/attitude_kernel.py) against the op-by-op route
they mirror: the same bits, for every output, the measured and the true branch, both executors, with lost
samples, several sensors per class and the estimator off."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.estimators import dispatch, use_kernels
from sensorgym.sensors.mujoco.attitude import truth_key

pytestmark = pytest.mark.skipif(not dispatch.kernels_available(), reason="needs numba (the fast extra)")

ALL = ("projected_gravity", "quaternion", "roll_pitch", "bias", "ang_vel")


def _run(executor, kernels, estimator, n=120, b=5):
    previous = use_kernels(kernels)
    try:
        mgr = sg.SensorManager(num_envs=b, dt=0.01, seed=0, executor=executor)
        sensors = [
            mgr.add_sensor(sg.AttitudeOptions(body="torso", estimator=estimator, estimator_kp=2.0,
                                              estimator_ki=0.2, gyro_bias=0.05, gyro_noise=0.02, outputs=ALL,
                                              update_period=0.02, dropout=0.2)),
            mgr.add_sensor(sg.AttitudeOptions(body="torso", estimator=estimator, outputs=("ang_vel", "roll_pitch"),  # noqa: E501
                                              estimator_init="truth", estimator_init_error=4.0)),
        ]  # fmt: skip
        rng = np.random.default_rng(0)
        q = torch.from_numpy(rng.normal(size=(n, b, 4))).float()
        q = q / q.norm(dim=-1, keepdim=True)
        x = torch.from_numpy(
            rng.normal(size=(n, b, 9)) + np.array([0, 0, 9.81, 0, 0, 0, 0.2, 0, -0.4])
        ).float()
        out = []
        for k in range(n):
            state = {}
            for s in sensors:
                state[s.state_key] = x[k]
                state[truth_key(s.options)] = q[k]
            mgr.reset(state) if k == 0 else mgr.step(state)
            for s in sensors:
                for r in (s.read(), s.read_ground_truth()):
                    out += [t.clone() for t in r]
        return out
    finally:
        use_kernels(previous)


@pytest.mark.parametrize("executor", ["numpy", "torch"])
@pytest.mark.parametrize("estimator", ["mahony", "madgwick", "none"])
def test_the_compiled_outputs_are_the_op_routes_bit_for_bit(executor, estimator):
    compiled, ops = _run(executor, True, estimator), _run(executor, False, estimator)
    assert len(compiled) == len(ops)
    for a, b in zip(compiled, ops, strict=True):
        assert torch.equal(a, b)
