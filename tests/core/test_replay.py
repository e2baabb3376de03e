"""Replayed real errors (SPEC §5.4, issue 36 item 1) in the engine: a component with ``replay`` reads the
recording from its drawn offset on, exactly (float32), where drift, noise and filter stand; every due
sample takes the next recorded sample (lost ones too), ``M`` of them at a multiple of the file's interval;
the index wraps; offsets are uniform per env and reset; the random stream, the batch, both executors and a
checkpoint behave as everywhere else; the refusals are one line naming both sides.

The recordings here are synthetic (their exact values are the point); tests/fitting/test_replay_real.py
replays real ones made by ``sensorgym fit --residuals``."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

import sensorgym as sg
from sensorgym.core import diagnostics
from sensorgym.core.recording import write_residuals
from sensorgym.wrappers.layout import measured_bounds

N = 37  # samples per channel: not a multiple of anything the tests advance by


@pytest.fixture
def recording(tmp_path):
    """Three channels of float64 values that float32 cannot hold exactly, at 0.02 s."""
    rng = np.random.default_rng(7)
    channels = {"gx": rng.normal(0, 0.1, N), "gy": rng.normal(0, 0.2, N), "gz": rng.normal(0, 0.3, N)}
    path = tmp_path / "rest.npz"
    write_residuals(path, 0.02, channels)
    return str(path), np.stack([channels[c] for c in ("gx", "gy", "gz")], axis=1)


def _run(
    path, steps, *, b=3, dt=0.02, executor="torch", seed=0, per_env_rng=False, x=None, resets=(), **opts
):
    """Readings, ground truths and replay indices ``(steps + 1, B, 3)`` of a 3-component replaying sensor;
    ``x``: the truth per step (zeros by default); ``resets``: ``{step: envs}`` resets with the step."""
    mgr = sg.SensorManager(num_envs=b, dt=dt, seed=seed, executor=executor, per_env_rng=per_env_rng)
    s = mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(3,), replay=path, **opts))
    truth = (lambda t: torch.zeros(b, 3)) if x is None else x
    mgr.reset({"w": truth(0)})
    reads, gts, index = [s.read().clone()], [s.read_ground_truth().clone()], []
    index.append(diagnostics.replay_state(s)["index"].clone())
    for t in range(1, steps + 1):
        mask = None
        if t in dict(resets):
            mask = torch.zeros(b, dtype=torch.bool)
            mask[list(dict(resets)[t])] = True
        mgr.step({"w": truth(t)}, reset_mask=mask)
        reads.append(s.read().clone())
        gts.append(s.read_ground_truth().clone())
        index.append(diagnostics.replay_state(s)["index"].clone())
    return torch.stack(reads), torch.stack(gts), torch.stack(index), mgr, s


@pytest.mark.parametrize("executor", ["numpy", "torch"])
def test_a_replayed_stream_is_the_recording_from_its_offset_on(recording, executor):
    path, rec = recording
    reads, gts, index, *_ = _run(path, 3 * N, b=4, executor=executor)
    rec32 = torch.from_numpy(rec.astype(np.float32))
    offset = index[0, :, 0]
    assert torch.equal(index[0], offset[:, None].expand(4, 3))  # a sensor's components stay aligned
    for t in range(3 * N + 1):
        at = (offset + t) % N
        assert torch.equal(reads[t], rec32[at]), t  # bit for bit, the recording rounded once to float32
    assert torch.equal(gts, torch.zeros_like(gts))  # ground truth never sees the recording


def test_the_recording_stands_where_drift_and_noise_stand(recording):
    """SPEC 5.1's order: scale factor, the recorded value (for drift, noise and filter), bias, resolution;
    on both executors the same float32 operations."""
    path, rec = recording
    gen = torch.Generator().manual_seed(1)
    xs = [torch.randn(3, 3, generator=gen) for _ in range(30)]
    opts = dict(scale_factor=0.01, bias=(0.3, -0.2, 0.1), resolution=0.05)
    runs = [_run(path, 29, executor=e, x=lambda t: xs[t], **opts) for e in ("numpy", "torch")]
    assert torch.equal(runs[0][0], runs[1][0])
    reads, gts, index, *_ = runs[0]
    rec32 = torch.from_numpy(rec.astype(np.float32))
    k, bias, r = torch.tensor(1.01), torch.tensor([0.3, -0.2, 0.1]), torch.tensor(0.05)
    for t in range(30):
        value = rec32[index[t], torch.arange(3)]
        expected = torch.round(((xs[t] * k + value) + bias) / r) * r
        assert torch.equal(reads[t], expected), t
        assert torch.equal(gts[t], xs[t])


def test_the_index_wraps_at_the_end(recording):
    path, _ = recording
    _, _, index, *_ = _run(path, 2 * N, b=2)
    steps = index[1:, :, 0] - index[:-1, :, 0]
    assert set(steps.flatten().tolist()) == {1, 1 - N}  # forward by one, back to 0 once per N samples
    for b in range(2):
        wraps = torch.nonzero(steps[:, b] != 1).flatten()
        assert len(wraps) == 2 and int(index[int(wraps[0]) + 1, b, 0]) == 0
        assert int(index[int(wraps[0]), b, 0]) == N - 1


@pytest.mark.parametrize(
    ("file_interval", "options", "advance", "every"),
    [
        (0.005, {}, 4, 1),  # T_s = dt = 4 x the file's: every 4th recorded sample
        (0.005, {"update_period": 0.04}, 8, 2),  # its own rate: 8 per sample, a sample every 2 steps
        (0.005, {"update_period": 0.01}, 4, 1),  # below dt: 2 own samples per step, 2 recorded each
        (0.0201, {}, 1, 1),  # within 1% of the file's interval: one per step
        (0.01, {"update_period": 0.06, "update_phase": 0.0}, 6, 3),
    ],
)
def test_a_multiple_of_the_file_interval_takes_every_mth_sample(
    tmp_path, file_interval, options, advance, every
):
    rec = np.random.default_rng(3).normal(size=(101, 3))
    path = str(tmp_path / "fast.npz")
    write_residuals(path, file_interval, {c: rec[:, i] for i, c in enumerate("abc")})
    reads, _, index, _, s = _run(path, 24, b=2, **options)
    assert diagnostics.replay_state(s)["advance"].tolist() == [advance] * 3
    offset = (index[0, :, 0]).long()
    rec32 = torch.from_numpy(rec.astype(np.float32))
    for t in range(25):
        k = t // every  # samples taken since the reset (a sample every `every` steps)
        at = (offset + advance * k) % 101
        assert torch.equal(index[t, :, 0], at), t
        assert torch.equal(reads[t], rec32[at]), t


def test_lost_samples_take_their_recorded_sample_and_are_not_shown(recording):
    """dropout: every due sample advances the index (lost ones too); the reading holds the last taken."""
    path, rec = recording
    mgr = sg.SensorManager(num_envs=3, dt=0.02, seed=4)
    s = mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(3,), replay=path, dropout=0.4))
    mgr.reset({"w": torch.zeros(3, 3)})
    rec32 = torch.from_numpy(rec.astype(np.float32))
    first = diagnostics.replay_state(s)["index"][:, 0].clone()
    shown = rec32[first]
    lost = 0
    for t in range(1, 60):
        mgr.step({"w": torch.zeros(3, 3)})
        index = diagnostics.replay_state(s)["index"][:, 0]
        assert torch.equal(index, (first + t) % N)  # one per due sample, taken or lost
        taken = diagnostics.sampler_state(s)["taken"]
        shown = torch.where(taken[:, None], rec32[index], shown)
        assert torch.equal(s.read(), shown)
        lost += int((~taken).sum())
    assert 40 < lost < 100  # 0.4 of 177 due samples: about 71


def test_offsets_are_uniform_over_the_recording(recording):
    """4000 envs, 3 resets each: 12000 offsets in 37 cells (324 expected each); chi-square at 1e-3."""
    path, _ = recording
    mgr = sg.SensorManager(num_envs=4000, dt=0.02, seed=11)
    s = mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(3,), replay=path))
    offsets = []
    for _ in range(3):
        mgr.reset({"w": torch.zeros(4000, 3)})
        index = diagnostics.replay_state(s)["index"]
        offsets.append(index[:, 0].numpy().copy())
    counts = np.bincount(np.concatenate(offsets), minlength=N)
    assert counts.size == N and counts.min() > 0
    assert stats.chisquare(counts).pvalue > 1e-3
    # and independent between resets of one env: the pairs (first, second) fill the 37 x 37 table evenly
    pairs = np.bincount(offsets[0] * N + offsets[1], minlength=N * N)
    assert stats.chisquare(pairs).pvalue > 1e-3


def test_a_partial_reset_draws_new_offsets_for_its_envs_only(recording):
    path, _ = recording
    _, _, index, *_ = _run(path, 12, b=4, resets={6: [1, 3]})
    steps = (index[6] - index[5])[:, 0]
    assert steps[0] == 1 and steps[2] == 1  # the others advance as always
    assert not torch.equal(index[6, [1, 3], 0], (index[5, [1, 3], 0] + 1) % N)  # drawn afresh (seed 0)


@pytest.mark.parametrize("executor", ["numpy", "torch"])
def test_a_batch_equals_single_envs_with_per_env_generators(recording, executor):
    path, _ = recording
    opts = dict(dropout=0.2, bias=sg.Uniform(0.0, 1.0), update_period=0.04)
    batch = _run(path, 50, b=4, seed=20, per_env_rng=True, executor=executor, resets={17: [2]}, **opts)[0]
    for b in range(4):
        single = _run(path, 50, b=1, seed=20 + b, per_env_rng=True, executor=executor,
                      resets={17: [0]} if b == 2 else {}, **opts)[0]  # fmt: skip
        assert torch.equal(single[:, 0], batch[:, b]), b


def test_both_executors_give_the_same_bits(recording):
    path, _ = recording
    opts = dict(dropout=0.3, dropout_burst=2.0, update_period=0.04, bias=0.1)
    runs = [_run(path, 80, b=5, executor=e, resets={9: [0, 4], 33: [2]}, **opts) for e in ("numpy", "torch")]
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][2], runs[1][2])


@pytest.mark.parametrize("executor", ["numpy", "torch"])
def test_a_checkpoint_mid_episode_resumes_bit_for_bit(recording, executor):
    path, _ = recording
    opts = dict(dropout=0.25, bias=sg.Uniform(0.0, 0.5))
    *_, mgr, s = _run(path, 21, b=3, executor=executor, **opts)
    saved = mgr.state_dict()
    assert saved["classes"]["StateSensor"]["tensors"]["md.replay_index"].dtype == torch.int64

    def future(m, sensor):
        out = []
        for t in range(40):  # resets after the load draw from the restored stream
            m.step({"w": torch.zeros(3, 3)}, reset_mask=torch.tensor([t == 7, False, t == 19]))
            out.append(torch.cat([sensor.read(), diagnostics.replay_state(sensor)["index"].float()], 1))
        return torch.stack(out)

    expected = future(mgr, s)
    again = sg.SensorManager(num_envs=3, dt=0.02, seed=999, executor=executor)
    s2 = again.add_sensor(sg.StateSensorOptions(key="w", shape=(3,), replay=path, **opts))
    again.reset({"w": torch.zeros(3, 3)})
    again.load_state_dict(saved)
    assert torch.equal(future(again, s2), expected)


def test_a_checkpoint_of_another_recording_length_is_refused(recording):
    path, _ = recording
    *_, mgr, _ = _run(path, 5, b=2)
    saved = mgr.state_dict()
    saved["classes"]["StateSensor"]["tensors"]["md.replay_index"].fill_(N + 3)  # past the end
    with pytest.raises(ValueError, match=r"^load_state_dict: a replay index lies outside its recording"):
        mgr.load_state_dict(saved)


def test_a_replayed_component_is_unbounded_and_the_others_keep_their_bounds(recording):
    path, _ = recording
    mgr = sg.SensorManager(num_envs=1, dt=0.02)
    a = mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(3,), replay=path))
    b = mgr.add_sensor(sg.StateSensorOptions(key="v", shape=(2,), noise=0.1))  # the same class
    c = mgr.add_sensor(sg.StateSensorOptions(key="u", shape=(1,), bias=0.5))
    mgr.reset({"w": torch.zeros(1, 3), "v": torch.zeros(1, 2), "u": torch.zeros(1, 1)})
    assert np.isinf(measured_bounds(a, -np.ones(3), np.ones(3))[0]).all()
    lo, hi = measured_bounds(c, -np.ones(1), np.ones(1))
    assert lo[0] == pytest.approx(-0.5, abs=1e-5) and hi[0] == pytest.approx(1.5, abs=1e-5)
    # the class runs the noise term for b and the replay for a: each only where its sensor has it
    model = mgr.metadata(sg.StateSensor).imperfections
    assert [t.name for t, _ in model.terms_run()] == ["white_noise", "replay", "bias"]
    assert torch.equal(a.read_ground_truth(), torch.zeros(1, 3)) and float(c.read()[0, 0]) == 0.5
    assert diagnostics.replay_state(b) is None


def test_the_defaults_change_nothing_the_random_stream_included():
    plain = sg.StateSensorOptions(key="w", shape=(2,), noise=0.1)
    explicit = sg.StateSensorOptions(key="w", shape=(2,), noise=0.1, replay=None, replay_channels=None)
    assert plain == explicit
    outs = []
    for o in (plain, explicit):
        mgr = sg.SensorManager(num_envs=2, dt=0.02, seed=3)
        s = mgr.add_sensor(o)
        mgr.reset({"w": torch.zeros(2, 2)})
        mgr.step({"w": torch.zeros(2, 2)})
        outs.append((s.read().clone(), mgr.random.generator.get_state()))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])


def test_channels_are_chosen_and_ordered_by_replay_channels(recording):
    path, rec = recording
    mgr = sg.SensorManager(num_envs=1, dt=0.02, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(2,), replay=path, replay_channels=["gz", "gx"]))
    mgr.reset({"w": torch.zeros(1, 2)})
    i = int(diagnostics.replay_state(s)["index"][0, 0])
    assert s.read()[0].tolist() == [float(np.float32(rec[i, 2])), float(np.float32(rec[i, 0]))]


def test_a_setter_cannot_add_noise_or_a_walk_to_a_replayed_component(recording):
    path, _ = recording
    mgr = sg.SensorManager(num_envs=2, dt=0.02)
    s = mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(3,), replay=path))
    mgr.reset({"w": torch.zeros(2, 3)})
    for setter in (s.set_noise, s.set_random_walk):
        with pytest.raises(ValueError, match=r"has replay=.* white noise and drift from the recording\. Fix"):
            setter(0.1)
    s.set_bias(0.2)  # combines as usual
    s.set_noise(0.0)


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"noise": 0.01}, ("replay=", "noise=0.01")),
        ({"noise_density": 1e-4}, ("replay=", "noise_density=0.0001")),
        ({"random_walk": 0.01}, ("replay=", "random_walk=0.01")),
        ({"random_walk_density": 1e-4}, ("replay=", "random_walk_density=0.0001")),
        ({"bias_instability": 0.1, "bias_correlation_time": 10.0}, ("replay=", "bias_instability=0.1")),
        ({"bandwidth": 5.0}, ("replay=", "bandwidth=5.0")),
        ({"noise": sg.Uniform(0.0, 0.1)}, ("replay=", "noise=Uniform")),
        ({"update_period": sg.Uniform(0.02, 0.04)}, ("replay=", "update_period=Uniform")),
        ({"replay_channels": ["gx", "nope"]}, ("replay_channels=", "'nope'")),
    ],
)
def test_combinations_are_refused_in_one_line_naming_both(recording, kwargs, names):
    path, _ = recording
    with pytest.raises(ValueError) as info:
        sg.StateSensorOptions(key="w", shape=(2,), replay=path, **kwargs)
    message = str(info.value)
    assert "\n" not in message and "Fix: " in message, message
    for name in names:
        assert name in message, message


def test_the_interval_must_be_the_file_s_or_a_whole_multiple(tmp_path):
    path = str(tmp_path / "r.npz")
    write_residuals(path, 0.03, {"a": np.zeros(10)})
    mgr = sg.SensorManager(num_envs=1, dt=0.02)
    with pytest.raises(ValueError) as info:  # 0.02 / 0.03: below the file's rate
        mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(1,), replay=path))
    message = str(info.value)
    assert "T_s = 0.02 s (its dt)" in message and "T_s = 0.03 s" in message and "\n" not in message
    with pytest.raises(ValueError, match=r"T_s = 0\.05 s \(its update_period\) .* T_s = 0\.03 s"):
        mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(1,), replay=path, update_period=0.05))
    write_residuals(path, 0.004, {"a": np.zeros(10)})
    with pytest.raises(ValueError, match=r"2\.5 own samples per step"):  # 0.008 = 2 x 0.004: 2.5 per dt
        mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(1,), replay=path, update_period=0.008))


def test_bad_files_and_counts_are_one_line_each(tmp_path, recording):
    path, _ = recording
    cases = []
    missing = str(tmp_path / "missing.npz")
    cases.append((dict(replay=missing), "no such file"))
    text = tmp_path / "text.npz"
    text.write_text("not a zip")
    cases.append((dict(replay=str(text)), "not a recording NPZ"))
    np.savez(tmp_path / "plain.npz", a=np.zeros(3))
    cases.append((dict(replay=str(tmp_path / "plain.npz")), "no 'T_s' and no 'channels'"))
    np.savez(tmp_path / "pickled.npz", T_s=0.02, channels=np.array(["a"]), a=np.array([object()]))
    cases.append((dict(replay=str(tmp_path / "pickled.npz")), "allow_pickle"))
    cases.append((dict(replay=42), "expected the path of a recording"))
    cases.append((dict(replay_channels=["gx"]), "replay is None"))
    for kwargs, pattern in cases:
        with pytest.raises((ValueError, TypeError)) as info:
            mgr = sg.SensorManager(num_envs=1, dt=0.02)
            mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(1,), **kwargs))
            mgr.reset({"w": torch.zeros(1, 1)})
        assert pattern in str(info.value) and "\n" not in str(info.value) and "Fix: " in str(info.value)
    mgr = sg.SensorManager(num_envs=1, dt=0.02)
    mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(2,), replay=path), name="gyro")
    with pytest.raises(ValueError, match=r"sensor 'gyro': the recording's 3 channels .* its 2 components"):
        mgr.reset({"w": torch.zeros(1, 2)})


@pytest.mark.slow
def test_the_compiled_kernel_gives_the_same_bits(recording):
    path, _ = recording
    outs = []
    for compiled in (False, True):
        mgr = sg.SensorManager(num_envs=4, dt=0.02, seed=2, compile=compiled)
        s = mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(3,), replay=path, dropout=0.2, bias=0.1))
        mgr.reset({"w": torch.zeros(4, 3)})
        seen = [s.read().clone()]
        for t in range(30):
            mgr.step({"w": torch.zeros(4, 3)}, reset_mask=torch.tensor([t == 5, False, False, t == 9]))
            seen.append(s.read().clone())
        outs.append(torch.stack(seen))
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("executor", ["numpy", "torch"])
def test_a_copied_manager_replays_on_its_own_buffers_alike(recording, executor):
    path, _ = recording
    *_, mgr, s = _run(path, 5, b=3, executor=executor, dropout=0.2)
    twin = copy.deepcopy(mgr)
    s2 = twin.sensors[0]
    for t in range(20):
        mask = torch.tensor([t == 3, False, t == 11])
        mgr.step({"w": torch.zeros(3, 3)}, reset_mask=mask)
        twin.step({"w": torch.zeros(3, 3)}, reset_mask=mask)
        assert torch.equal(s.read(), s2.read())
    state = twin.storage(sg.StateSensor).md.imperfections.state("replay_index")
    assert state.data_ptr() != mgr.storage(sg.StateSensor).md.imperfections.state("replay_index").data_ptr()


def test_a_relative_path_that_is_not_there_names_the_working_directory(tmp_path, recording, monkeypatch):
    """A relative recording path is read from the working directory: run from another folder, the refusal
    says which directory it looked in and how to fix it (it said only 'no such file', with a fix about
    writing the file, though the file was there, beside the config's folder)."""
    path, _ = recording
    monkeypatch.chdir(Path(path).parent)
    sg.StateSensorOptions(key="w", shape=(3,), replay=Path(path).name)  # found from its own folder
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    with pytest.raises(ValueError) as info:
        sg.StateSensorOptions(key="w", shape=(3,), replay=Path(path).name)
    message = str(info.value)
    assert f"no such file in the working directory {tmp_path / 'elsewhere'}" in message, message
    assert "Fix: run from the folder the path is relative to, or give an absolute path." in message
    assert "\n" not in message
