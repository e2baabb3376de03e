"""What long delays and unusual dtypes cost, and how they are refused (issue 23, "also" items).

* The delay line's slot table grows with the delay, not with its square: at 4,000 steps of delay the old
  (depth x depth) table alone took 128 MB (3.2 GB at 20,000 steps, whatever the batch).
* A delay too large for the device's memory is refused before anything is allocated, with the size that
  would really be needed (the ring and its slot table), and ``ActionLatency`` refuses one the same way
  instead of ending in an allocator error.
* A float128 (``np.longdouble``) state is read like any float (torch has no such dtype): both executors
  give the same bits as numpy's own cast.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.core.delay_line import delay_line_bytes
from sensorgym.wrappers import ActionLatency

DT = 0.01


@pytest.mark.parametrize("executor", ["torch", "numpy"])
def test_a_long_delay_costs_memory_linear_in_its_steps(executor):
    steps = 4000
    mgr = sg.SensorManager(num_envs=1, dt=DT, executor=executor)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), delay=steps * DT))
    mgr.reset({"x": torch.zeros(1, 1)})
    report = sg.memory_report(mgr)
    assert report.total < 1 << 20, report  # the (depth x depth) int64 table alone was 128 MB
    for t in range(1, steps + 3):  # the reads are still exact
        mgr.step({"x": torch.full((1, 1), float(t))})
    assert s.read().item() == 2.0


def test_a_delay_beyond_the_memory_is_refused_with_the_size_it_needs():
    steps = 10**12
    mgr = sg.SensorManager(num_envs=1, dt=DT)
    mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), delay=steps * DT), name="imu")
    ring = (steps + 1) * 4  # one float32 column
    table = delay_line_bytes(steps + 1, 1, 1, torch.float32, numpy_views=True) - ring  # tables and views
    with pytest.raises(ValueError, match=r"sensor 'imu': delay=.*Fix: give the delay in seconds") as err:
        mgr.reset({"x": torch.zeros(1, 1)})
    message = str(err.value)
    assert (
        f"({ring:,} bytes for 1 envs x 1 columns of torch.float32 and {table:,} bytes of slot tables and "
        "views)" in message
    )
    assert "about 2.3 PiB" in message  # the sum of both


@pytest.mark.parametrize("option", ["delay", "jitter"])
def test_action_latency_refuses_a_queue_beyond_the_memory_naming_the_option(option):
    envs = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync")
    kwargs = {"delay": 4e9, "jitter": 4e9 if option == "jitter" else 0.0}
    with pytest.raises(
        ValueError,
        match=rf"ActionLatency\.{option}=4000000000\.0 is invalid: .*Fix: give the {option} in seconds",
    ):
        ActionLatency(envs, **kwargs)


@pytest.mark.parametrize("with_torch_entry", [False, True], ids=["numpy-state", "mixed-state"])
def test_a_float128_state_reads_like_numpys_cast_on_both_executors(with_torch_entry):
    """A state holding a torch entry too is read through torch, where float128 has no dtype."""
    x = (np.arange(6, dtype=np.longdouble).reshape(2, 3) + 1) / np.longdouble(3)
    y = {"y": torch.ones(2, 1)} if with_torch_entry else {}
    reads = []
    for executor in ("torch", "numpy"):
        mgr = sg.SensorManager(num_envs=2, dt=DT, executor=executor)
        whole = mgr.add_sensor(sg.StateSensorOptions(key="x", delay=DT))
        picked = mgr.add_sensor(sg.StateSensorOptions(key="x", index=[2, 0]))
        if with_torch_entry:
            mgr.add_sensor(sg.StateSensorOptions(key="y"))
        mgr.reset({"x": x, **y})
        mgr.step({"x": 2 * x, **y})
        assert mgr.executor_used == executor
        np.testing.assert_array_equal(whole.read().numpy(), x.astype(np.float32))  # delayed by one step
        np.testing.assert_array_equal(picked.read().numpy(), (2 * x)[:, [2, 0]].astype(np.float32))
        reads.append((whole.read().clone(), picked.read().clone()))
    assert all(torch.equal(a, b) for a, b in zip(*reads, strict=True))
