"""The one ring class: slot k is the snapshot written k steps ago; views share storage and the clock."""

from __future__ import annotations

import pytest
import torch

from sensorgym.core.ring import Clock, Ring


def _ramp_ring(depth: int, steps: int, clock: Clock) -> Ring:
    ring = Ring(depth, batch=2, cols=3, dtype=torch.float32, device="cpu", clock=clock)
    for t in range(steps):
        if t:
            clock.tick()
        ring.at(0).fill_(float(t))
    return ring


def test_at_k_is_the_snapshot_k_steps_back():
    clock = Clock()
    ring = _ramp_ring(4, 7, clock)  # wrote 0..6
    assert [ring.at(k)[0, 0].item() for k in range(4)] == [6.0, 5.0, 4.0, 3.0]
    assert ring.slot(0) == clock.t % 4
    with pytest.raises(IndexError, match="holds 4"):
        ring.at(4)


def test_history_is_newest_first_and_a_new_tensor():
    clock = Clock()
    ring = _ramp_ring(3, 5, clock)
    hist = ring.history(3, slice(1, 3))
    assert hist.shape == (2, 3, 2)
    assert hist[1, :, 0].tolist() == [4.0, 3.0, 2.0]
    hist.zero_()
    assert ring.at(0)[0, 0].item() == 4.0
    assert ring.buffer[ring.order(3), 0, 0].tolist() == [4.0, 3.0, 2.0]


def test_block_is_a_ring_over_the_same_storage_and_clock():
    clock = Clock()
    ring = Ring(2, batch=2, cols=5, dtype=torch.float32, device="cpu", clock=clock)
    block = ring.block(1, 3)  # columns 1..3 of each slot, class-major: B * 3 consecutive elements
    assert isinstance(block, Ring) and block.depth == 2 and block.clock is clock
    assert block.at(0).is_contiguous() and block.at(0).shape == (2, 3)
    block.at(0).fill_(7.0)
    flat = ring.buffer.view(2, -1)[clock.t % 2]
    assert flat[2:8].tolist() == [7.0] * 6 and flat[:2].tolist() == [0.0, 0.0]
    clock.tick()
    block.at(0).fill_(8.0)
    assert block.at(1)[0, 0].item() == 7.0  # rotates with the shared clock


def test_single_slot_ring_is_the_tensor_itself():
    data = torch.arange(6.0).view(2, 3)
    ring = Ring.single(data, Clock())
    assert ring.depth == 1 and ring.at(0).data_ptr() == data.data_ptr()
    with pytest.raises(IndexError):
        ring.at(1)
