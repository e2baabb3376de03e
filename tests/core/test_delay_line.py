"""The delay line: D = round(delay/dt); jitter adds floor(j/dt + u) <= ceil(jitter/dt); reads never go
back in capture time; a ramp signal makes every read exact."""

from __future__ import annotations

import torch

import sensorgym as sg
from sensorgym.core.delay_line import DelayLine
from sensorgym.core.metadata import STEP, CaptureContext
from sensorgym.core.ring import Clock

from .helpers import sensors, table


def _line(sensor_list, num_envs=2, dt=0.1, depth=None):
    params = table(sensor_list, num_envs, dt)
    clock = Clock()
    cols = sum(s.cache_slice.stop - s.cache_slice.start for s in sensor_list)
    cache = torch.zeros(num_envs, cols)
    deepest = max(params.max_shift_per_sensor())
    line = DelayLine(
        [s.return_slice.stop - s.return_slice.start for s in sensor_list],
        params.times, cache, depth or deepest + 1, params.random, clock,
    )  # fmt: skip
    return line, params, clock, cache


def _run(line, clock, steps, stage=None):
    """Write the ramp t into slot 0 at step t (t = 0 is a reset of every env); return every read."""
    reads = []
    stage = stage or line.stage()
    reset = CaptureContext(torch.ones(line.cache.shape[0], dtype=torch.bool), None, False)
    for t in range(steps):
        if t:
            clock.tick()
        line.ring.at(0).fill_(float(t))
        if t == 0:
            line.ring.buffer.fill_(0.0)  # padding is the storage's business: zeros here
            line.ring.at(0).fill_(0.0)
        stage(reset if t == 0 else STEP)
        reads.append(line.cache.clone())
    return torch.stack(reads)


def test_ring_depth_is_the_deepest_reachable_shift_plus_one():
    line, *_ = _line(sensors(dict(delay=0.4, jitter=0.35)))
    assert line.ring.depth == 4 + 4 + 1


def test_fixed_delay_is_one_slot_copy_of_the_snapshot_d_steps_back():
    line, params, clock, _ = _line(sensors(dict(delay=0.2), dict(delay=0.2)))
    assert params.times.fixed_shift == 2 and line.stage() == line.hold_fixed_shift
    reads = _run(line, clock, 6)
    assert reads[:, 0, 0].tolist() == [0.0, 0.0, 0.0, 1.0, 2.0, 3.0]  # t - 2 once filled
    assert line.current_shift(0) == 2


def test_sampled_delay_equals_the_fixed_one_without_jitter():
    # different delays per sensor: no fixed shift; sensor 1 (delay 0.3) reads t - 3
    line, params, clock, _ = _line(sensors(dict(delay=0.1), dict(delay=0.3, width=2)))
    assert params.times.fixed_shift is None and line.stage() == line.sample_delay
    reads = _run(line, clock, 6)
    assert reads[:, 1, 0].tolist() == [0.0, 0.0, 1.0, 2.0, 3.0, 4.0]
    assert reads[:, 1, 2].tolist() == [0.0, 0.0, 0.0, 0.0, 1.0, 2.0]
    assert line.current_shift(1).tolist() == [3, 3]


def test_jitter_stays_in_range_and_never_goes_back_in_capture_time():
    line, _, clock, _ = _line(sensors(dict(delay=0.3, jitter=0.25)), num_envs=64)
    reads = _run(line, clock, 40)[3:, :, 0]  # after the ring filled: the read is t - shift
    t = torch.arange(3, 40, dtype=torch.float32)[:, None]
    shift = t - reads
    assert ((shift >= 3) & (shift <= 3 + 3)).all()  # D + ceil(0.25 / 0.1)
    assert (reads[1:] >= reads[:-1]).all()  # monotone: shift <= previous + 1
    assert len(torch.unique(shift)) > 1


def test_leaving_the_fixed_shift_starts_from_it():
    line, params, clock, _ = _line(sensors(dict(delay=0.2, max_delay=0.5)))
    _run(line, clock, 5)
    params.set_time(line_sensor := params.sensors[0], "delay", 0.4, torch.arange(2), max_shift=5)
    assert params.times.fixed_shift is None
    line.follow_parameters()
    assert line.stage() == line.sample_delay and line.prev_shift.tolist() == [[2], [2]]
    clock.tick()
    line.ring.at(0).fill_(5.0)
    line.sample_delay(STEP)
    assert line.cache[:, 0].tolist() == [2.0, 2.0]  # shift min(4, 2 + 1) = 3: no jump back in time
    assert line_sensor.index == 0


def test_manager_delay_reads_a_ramp_exactly():
    mgr = sg.SensorManager(num_envs=1, dt=0.1)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), delay=0.2))
    mgr.reset({"x": torch.full((1, 1), 10.0)})
    seen = [s.read().item()]
    for t in range(1, 5):
        mgr.step({"x": torch.full((1, 1), 10.0 + t)})
        seen.append(s.read().item())
    assert seen == [10.0, 10.0, 10.0, 11.0, 12.0]  # "reset" padding repeats the first snapshot
