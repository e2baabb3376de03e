"""``projection_depth = 1``: a class whose ``_post_process`` reads no earlier projected slot projects straight
into its return caches where nothing else needs a return ring (no delay, no history): no ring, no copy
stage, and every read (measured, ground truth, history, delayed, held, padded, restored from a checkpoint)
bit for bit what the same class with the default depth 2 reads, on both executors."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

import sensorgym as sg


@dataclass(frozen=True, kw_only=True)
class SquashOptions(sg.SimpleSensorOptions):
    key: str = "x"


class Squash(sg.SimpleSensor):
    """``tanh`` of a 4-vector into 3 columns: a projection between spaces of different widths."""

    options_cls = SquashOptions
    cache_dtype = torch.float32
    intermediate_format = (4,)
    return_format = (3,)

    @classmethod
    def _update_raw_data(cls, state, md, raw):
        for s in md.sensors:
            raw[:, s.cache_slice] = torch.as_tensor(state[s.options.key])

    @classmethod
    def _post_process(cls, md, data, timeline, *, is_measured):
        out = timeline.at(0)  # written in place, as the hook's contract suggests
        n = len(md.sensors)
        x = data.view(data.shape[0], n, 4)
        torch.tanh(x[..., :3] + x[..., 3:], out=out.view(out.shape[0], n, 3))
        return out


@dataclass(frozen=True, kw_only=True)
class FlatSquashOptions(SquashOptions):
    pass


class FlatSquash(Squash):
    """:class:`Squash` that declares it reads no earlier projected slot."""

    options_cls = FlatSquashOptions
    projection_depth = 1


CONFIGS = {
    "plain": {},
    "noise": dict(noise=0.1, bias=0.05),
    "delay": dict(delay=0.2, noise=0.1),
    "jitter": dict(delay=0.1, jitter=0.1, max_delay=0.3),
    "history": dict(history_length=3, padding_type="zero"),
    "sampler": dict(update_period=0.2, dropout=0.3, noise=0.1),
    "sampler_history": dict(update_period=0.2, history_length=2),
}


def _manager(options_cls, opts, executor, b=5):
    mgr = sg.SensorManager(num_envs=b, dt=0.1, seed=3, executor=executor)
    sensors = [mgr.add_sensor(options_cls(key=k, **opts)) for k in ("x", "y")]
    return mgr, sensors


def _reads(sensors):
    out = []
    for s in sensors:
        out += [s.read().clone(), s.read_ground_truth().clone()]
        if s.options.history_length:
            out.append(s.read(history_length=s.options.history_length).clone())
    return out


def _states(n, b=5):
    rng = np.random.default_rng(0)
    return [
        {k: torch.from_numpy(rng.normal(size=(b, 4)).astype(np.float32)) for k in ("x", "y")}
        for _ in range(n)
    ]


@pytest.mark.parametrize("executor", ["numpy", "torch"])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_depth_one_reads_what_depth_two_reads_and_resumes_bit_for_bit(config, executor):
    opts = CONFIGS[config]
    (deep, deep_s), (flat, flat_s) = (
        _manager(SquashOptions, opts, executor),
        _manager(FlatSquashOptions, opts, executor),
    )
    states, resets = _states(40), np.random.default_rng(1).random((40, 5)) < 0.1
    saved = None
    for k, state in enumerate(states):
        for mgr in (deep, flat):
            mgr.reset(state) if k == 0 else mgr.step(state, reset_mask=torch.from_numpy(resets[k]))
        for a, b in zip(_reads(deep_s), _reads(flat_s), strict=True):
            assert torch.equal(a, b), (config, k)
        if k == 20:
            saved = flat.state_dict()
    resumed, resumed_s = _manager(FlatSquashOptions, opts, executor)
    resumed.reset(states[0])
    resumed.load_state_dict(saved)
    for k in range(21, 40):  # the same steps again from the checkpoint
        resumed.step(states[k], reset_mask=torch.from_numpy(resets[k]))
    for a, b in zip(_reads(resumed_s), _reads(flat_s), strict=True):
        assert torch.equal(a, b)


def test_depth_one_projects_into_the_caches_where_no_ring_is_needed():
    flat, _ = _manager(FlatSquashOptions, {}, "numpy")
    deep, _ = _manager(SquashOptions, {}, "numpy")
    for mgr in (flat, deep):
        mgr.reset(_states(1)[0])
    f, d = flat.storage(FlatSquash), deep.storage(Squash)
    assert f.stage_names() == ["ProjectIntoRing", "ProjectIntoRing"]  # no copy into the caches
    assert d.stage_names() == ["ProjectIntoRing", "ProjectIntoRing", "CopyToReturnCache"]
    for branch in (f.gt, f.measured):
        assert branch.ring.depth == 1 and branch.ring.buffer.data_ptr() == branch.cache.data_ptr()
    assert [r.depth for r in (d.gt.ring, d.measured.ring)] == [2, 2]
    # a delay keeps its own ring; history keeps the ground truth's
    delayed, _ = _manager(FlatSquashOptions, dict(delay=0.2, history_length=2), "numpy")
    delayed.reset(_states(1)[0])
    st = delayed.storage(FlatSquash)
    assert st.measured.ring.depth == 3 and st.gt.ring.depth == 2
