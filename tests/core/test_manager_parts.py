"""The manager's own small parts: env masks, the rollback copies, the episode step counter."""

from __future__ import annotations

import pytest
import torch

import sensorgym as sg
from sensorgym.core.rows import Rollback, env_mask


def test_env_mask_from_bools_and_indices():
    cpu = torch.device("cpu")
    assert env_mask([1, 3], 4, cpu).tolist() == [False, True, False, True]
    assert env_mask(torch.tensor([True, False]), 2, cpu).tolist() == [True, False]
    assert env_mask([], 3, cpu).tolist() == [False, False, False]
    with pytest.raises(ValueError, match=r"reset_mask: env indices \[5\] out of range for num_envs=4"):
        env_mask([5], 4, cpu, "reset_mask")
    with pytest.raises(ValueError, match=r"shape \(3,\) but num_envs=2"):
        env_mask([True, False, True], 2, cpu)
    with pytest.raises(TypeError, match="integers"):
        env_mask(torch.tensor([0.5]), 2, cpu)


def test_rollback_restores_all_rows_but_the_kept_ones():
    a, b = torch.arange(6.0).view(3, 2), torch.tensor([1, 2, 3])
    rollback = Rollback()
    rollback.save([a, b])
    a.fill_(-1.0)
    b.fill_(0)
    rollback.restore([a, b], torch.tensor([False, True, False]))
    assert a.tolist() == [[0.0, 1.0], [-1.0, -1.0], [4.0, 5.0]] and b.tolist() == [1, 0, 3]


def test_rollback_through_numpy_views_restores_the_same_rows():
    """The numpy executor's route: saved and restored through numpy views of the same tensors."""
    a, b = torch.arange(6.0).view(3, 2), torch.tensor([1, 2, 3])
    rollback = Rollback()
    rollback.save([a, b], [a.numpy(), b.numpy()])
    a.fill_(-1.0)
    b.fill_(0)
    rollback.restore([a, b], torch.tensor([False, True, False]))
    assert a.tolist() == [[0.0, 1.0], [-1.0, -1.0], [4.0, 5.0]] and b.tolist() == [1, 0, 3]
    a.fill_(7.0)
    rollback.restore([a, b], torch.zeros(3, dtype=torch.bool))  # a failed capture: every row
    assert a.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]] and b.tolist() == [1, 2, 3]
    rollback.save([a, b])  # back on torch: its own copies
    a.fill_(0.0)
    rollback.restore([a, b], torch.tensor([True, True, False]))
    assert a.tolist() == [[0.0, 0.0], [0.0, 0.0], [4.0, 5.0]]


def test_episode_steps_count_from_each_envs_reset_and_drive_read_age():
    mgr = sg.SensorManager(num_envs=3, dt=0.1)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), delay=0.2))
    state = {"x": torch.zeros(3, 1)}
    mgr.reset(state)
    for _ in range(4):
        mgr.step(state)
    mgr.reset(state, envs_idx=[1])  # a reset capture does not advance the others
    mgr.step(state, reset_mask=[False, False, True])  # an autoreset with the step
    assert mgr.episode.steps.tolist() == [5, 1, 0]
    assert mgr.episode_start.tolist() == [0, 4, 5]
    # delay 2 steps: age 0.2 s once filled; while padding shows the reset snapshot, the steps since it
    assert s.read_age().tolist() == pytest.approx([0.2, 0.1, 0.0])
    saved = mgr.state_dict()
    assert saved["episode_start"].tolist() == [0, 4, 5]
    mgr.step(state)
    mgr.load_state_dict(saved)
    assert mgr.episode.steps.tolist() == [5, 1, 0]
