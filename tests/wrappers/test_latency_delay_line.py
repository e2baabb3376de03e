"""``ActionLatency`` delays actions with the sensors' own delay line (issue 25, part 2): one law, one
implementation. The wrapper's queue is a :class:`~sensorgym.core.delay_line.DelayLine`, and a copy or a
pickle of the wrapper (its queue's buffers are views of the delay line's) continues bit for bit.
"""

from __future__ import annotations

import copy
import pickle

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest

import sensorgym as sg
from sensorgym.core.delay_line import DelayLine
from sensorgym.wrappers import ActionLatency
from sensorgym.wrappers.checkpoint import picklable_env_fns


def _lat() -> ActionLatency:
    envs = gym.make_vec(
        "Pendulum-v1", 3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": "SameStep"}
    )
    return ActionLatency(envs, delay=sg.Uniform(0.0, 0.15), jitter=0.1, initial_action="first", seed=2)


def _run(lat: ActionLatency, actions: np.ndarray) -> list[bytes]:
    out = []
    for a in actions:
        obs, _, _, _, info = lat.step(a)
        out += [obs.tobytes(), info["action_applied"].tobytes(), info["action_in_flight"].tobytes()]
    return out


def _pickled(lat: ActionLatency) -> ActionLatency:
    with picklable_env_fns(lat):  # make_vec before Gymnasium 1.4 keeps a consumed generator
        return pickle.loads(cloudpickle.dumps(lat))  # make_vec's env factories: cloudpickle


def test_the_queue_is_the_core_delay_line():
    lat = _lat()
    assert isinstance(lat._queue.line, DelayLine)
    assert (
        lat._queue.line.ring.buffer.data_ptr() == lat._queue.ring.data_ptr()
    )  # the queue is the line's ring


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copied_or_pickled_wrapper_continues_bit_for_bit(how):
    actions = np.random.default_rng(0).uniform(-2, 2, (80, 3, 1)).astype(np.float32)
    lat = _lat()
    lat.reset(seed=0)
    _run(lat, actions[:25])
    twin = copy.deepcopy(lat) if how == "deepcopy" else _pickled(lat)
    assert _run(twin, actions[25:]) == _run(lat, actions[25:])
    # the twin's queue is its own delay line's memory, not a detached copy
    assert twin._queue.line.ring.buffer.data_ptr() == twin._queue.ring.data_ptr()
    assert twin._queue.line.prev_shift.data_ptr() == twin._queue.prev.data_ptr()
