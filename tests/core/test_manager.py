"""Manager API: storage layout, reads, registry, multi-field sensors, state_dict, bad input, devices."""

from __future__ import annotations

import io
import itertools
from dataclasses import dataclass

import numpy as np
import pytest
import torch

import sensorgym as sg

from ..helpers import ByteOptions, FilterOptions, ThresholdOptions, ThresholdSensor, ramp_state

DT = 0.1


def _suite(num_envs=4, seed=0, device="cpu"):
    mgr = sg.SensorManager(num_envs=num_envs, dt=DT, seed=seed, device=device)
    sensors = [
        mgr.add_sensor(
            sg.StateSensorOptions(
                key="x",
                index=[0, 1],
                delay=0.2,
                jitter=0.1,
                noise=0.1,
                random_walk=0.01,
                resolution=0.05,
                history_length=3,
                bias=sg.Normal(0, 0.1),
            )
        ),
        mgr.add_sensor(ThresholdOptions(width=2, threshold=3.0, delay=0.1, noise=sg.Uniform(0, 0.5))),
        mgr.add_sensor(
            FilterOptions(
                width=3,
                alpha=0.3,
                physics_offset=0.5,
                noise=0.2,
                delay=sg.Choice([0.0, 0.1]),
                padding_type="zero",
            )
        ),
        mgr.add_sensor(sg.StateSensorOptions(key="x", index=[2])),
    ]
    return mgr, sensors


def _wide_ramp(t, num_envs=4):
    return ramp_state(t, num_envs, width=3)


def test_layout_contiguous_class_slices_and_alias():
    mgr, (a, _th, f, plain) = _suite()
    mgr.reset(_wide_ramp(0))
    st_state, st_th, st_f = (mgr.storage(c) for c in (sg.StateSensor, ThresholdSensor, type(f)))
    # one float32 group holds the three classes, each a contiguous block (class-major storage)
    spans = sorted((s.columns.start, s.columns.stop) for s in (st_state, st_th, st_f))
    assert spans[0][0] == 0 and all(x[1] == y[0] for x, y in itertools.pairwise(spans))
    group = st_state.group
    assert st_state.group is st_th.group is st_f.group
    for st in (st_state, st_th, st_f):
        assert st.measured.intermediate.is_contiguous() and st.gt.intermediate.is_contiguous()
        assert (
            st.measured.intermediate.data_ptr() == group.inter.data_ptr() + 4 * st.columns.start * 4
        )  # B=4, float32
        if st.uses_timeline:
            assert st.measured.timeline.at(0).is_contiguous() and st.gt.timeline.at(1).is_contiguous()
    assert a.cache_slice == slice(0, 2) and plain.cache_slice == slice(2, 3)
    # rings only where needed; GT of a class without history/post-process aliases the intermediate
    assert st_th.measured.ring is not None and st_th.gt.ring is not None  # post-process: depth >= 2
    assert st_th.gt.ring.depth == 2 and st_th.measured.ring.depth == 2
    assert st_state.measured.history.depth == 3 and st_state.gt.ring.depth == 3
    assert st_f.gt.is_alias and st_f.gt.cache.data_ptr() == st_f.gt.intermediate.data_ptr()


def test_zero_copy_alias_read_is_a_view_of_the_intermediate():
    mgr = sg.SensorManager(num_envs=2, dt=DT)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(3,), noise=0.1))
    mgr.reset({"x": torch.zeros(2, 3)})
    st = mgr.storage(sg.StateSensor)
    assert st.measured.is_alias and st.gt.is_alias
    assert st.measured.ring is None and st.gt.ring is None and st.measured.history is None
    assert s.read().data_ptr() == st.group.inter.data_ptr()
    assert s.read_ground_truth().data_ptr() == st.group.gt_inter.data_ptr()


def test_read_sensors_per_class_new_tensors():
    mgr, (a, th, f, _plain) = _suite()
    mgr.reset(_wide_ramp(0))
    for t in range(1, 5):
        mgr.step(_wide_ramp(t))
    out = mgr.read_sensors()
    assert set(out) == {sg.StateSensor, ThresholdSensor, type(f)}
    assert out[sg.StateSensor].shape == (4, 3, 3)  # history 3 (class max), 2 + 1 columns
    assert out[ThresholdSensor].shape == (4, 2) and out[ThresholdSensor].dtype == torch.bool
    assert torch.equal(out[sg.StateSensor][:, :, :2], a.read())
    assert torch.equal(out[ThresholdSensor], th.read())
    assert torch.equal(out[type(f)], f.read())
    gt = mgr.read_sensors(ground_truth=True)
    assert torch.equal(gt[sg.StateSensor][:, 0, :2], a.read_ground_truth(0))
    assert out[type(f)].data_ptr() != f.read().data_ptr()  # a new tensor, not the cache


@dataclass(frozen=True, kw_only=True)
class PoseOptions(sg.SimpleSensorOptions):
    pass


class PoseSensor(sg.SimpleSensor):
    """Multi-field: position (3,) and a 2x2 matrix."""

    options_cls = PoseOptions

    def _get_return_format(self):
        return ((3,), (2, 2))

    @classmethod
    def _get_cache_dtype(cls):
        return torch.float32

    @classmethod
    def _update_raw_data(cls, state, md, raw):
        raw.copy_(state["pose"].repeat(1, len(md.sensors)))


def test_multi_field_sensor_reads_a_named_tuple():
    mgr = sg.SensorManager(num_envs=2, dt=DT)
    s = mgr.add_sensor(PoseOptions(history_length=2, bias=[0.0] * 3 + [1.0] * 4))
    pose = torch.arange(14, dtype=torch.float32).view(2, 7)
    mgr.reset({"pose": pose})
    r = s.read(history_length=0)
    assert type(r).__name__ == "PoseSensorReading" and r._fields == ("field0", "field1")
    assert r.field0.tolist() == [[0, 1, 2], [7, 8, 9]]
    assert r.field1.tolist() == [[[4, 5], [6, 7]], [[11, 12], [13, 14]]]
    h = s.read()
    assert h.field0.shape == (2, 2, 3) and h.field1.shape == (2, 2, 2, 2)
    assert s.read_ground_truth(0).field1[0, 0].tolist() == [3.0, 4.0]


def test_post_process_override_without_intermediate_raises_at_definition():
    with pytest.raises(TypeError, match=r"overrides _post_process but neither.*Fix"):

        class Bad(sg.SimpleSensor):
            @classmethod
            def _post_process(cls, md, data, timeline, *, is_measured):
                return data


def test_unknown_options_class_is_rejected_with_the_known_ones():
    @dataclass(frozen=True, kw_only=True)
    class Orphan(sg.SensorOptions):
        pass

    mgr = sg.SensorManager(num_envs=1, dt=DT)
    with pytest.raises(TypeError, match=r"no sensor class is registered for options class Orphan.*Fix"):
        mgr.add_sensor(Orphan())
    with pytest.raises(TypeError, match=r"SensorOptions instance"):
        mgr.add_sensor({"key": "x"})


def test_bad_calls():
    with pytest.raises(ValueError, match=r"dt=0.*> 0.*Fix"):
        sg.SensorManager(num_envs=1, dt=0)
    with pytest.raises(ValueError, match=r"num_envs=0"):
        sg.SensorManager(num_envs=0, dt=0.1)
    mgr = sg.SensorManager(num_envs=2, dt=DT)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(3,), bias=[1.0, 2.0, 3.0]), name="imu")
    with pytest.raises(ValueError, match=r"name='imu'.*already exists"):
        mgr.add_sensor(sg.StateSensorOptions(key="x"), name="imu")
    with pytest.raises(RuntimeError, match=r"step\(\) before reset\(\).*Fix"):
        mgr.step({"x": torch.zeros(2, 3)})
    with pytest.raises(RuntimeError, match=r"read\(\) before the manager was built.*Fix"):
        s.read()
    with pytest.raises(ValueError, match=r"no key 'x'.*keys: \['y'\].*Fix"):
        mgr.reset({"y": torch.zeros(2, 3)})
    mgr.reset({"x": torch.zeros(2, 3)})
    with pytest.raises(RuntimeError, match=r"add_sensor\(\) after build.*Fix"):
        mgr.add_sensor(sg.StateSensorOptions(key="x"))
    with pytest.raises(ValueError, match=r"state\['x'\] has 4 values per env.*needs 3"):
        mgr.step({"x": torch.zeros(2, 4)})
    with pytest.raises(ValueError, match=r"state\['x'\] has shape \(3, 3\); expected \(num_envs=2"):
        mgr.step({"x": torch.zeros(3, 3)})
    with pytest.raises(TypeError, match=r"not a mapping"):
        mgr.step(torch.zeros(2, 3))
    # nothing captured was lost by the failed calls: the clock did not move, reads are intact
    assert mgr.clock.t == 0 and s.read().tolist() == [[1.0, 2.0, 3.0]] * 2


def test_component_count_mismatch_names_the_sensor():
    mgr = sg.SensorManager(num_envs=1, dt=DT)
    mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(3,), noise=[0.1, 0.2]), name="gyro")
    with pytest.raises(ValueError, match=r"noise has 2 values but sensor 'gyro' has 3 components.*Fix"):
        mgr.reset({"x": torch.zeros(1, 3)})


def test_shape_inference_and_numpy_state():
    mgr = sg.SensorManager(num_envs=2, dt=DT)
    s = mgr.add_sensor(sg.StateSensorOptions(key="img", index=[0]))
    scalar = mgr.add_sensor(sg.StateSensorOptions(key="t"))
    with pytest.raises(ValueError, match=r"cannot infer its shape.*Fix"):
        _build_without_state()
    mgr.reset({"img": np.ones((2, 4, 5), dtype=np.float64), "t": np.array([1, 2])})
    assert s.read().shape == (2, 4, 1)
    assert scalar.read().tolist() == [[1.0], [2.0]]


def _build_without_state():
    mgr = sg.SensorManager(num_envs=2, dt=DT)
    mgr.add_sensor(sg.StateSensorOptions(key="q"))
    mgr.build()


# -- non-finite policy ----------------------------------------------------------------------------------
def _nan_state(b, t, bad_env=None):
    x = torch.full((b, 2), float(t))
    if bad_env is not None:
        x[bad_env, 1] = float("nan")
        x[bad_env, 0] = float("inf")
    return {"x": x}


def test_nan_propagates_by_default():
    mgr = sg.SensorManager(num_envs=2, dt=DT)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,)))
    mgr.reset(_nan_state(2, 0))
    mgr.step(_nan_state(2, 1, bad_env=1))
    assert torch.isnan(s.read()[1, 1]) and torch.isinf(s.read()[1, 0])
    assert torch.isfinite(s.read()[0]).all()


def test_nan_raise_names_the_sensor_and_loses_nothing():
    mgr = sg.SensorManager(num_envs=3, dt=DT, seed=0)
    s = mgr.add_sensor(
        sg.StateSensorOptions(key="x", shape=(2,), nan_policy="raise", delay=0.1, noise=0.1), name="joint"
    )
    mgr.reset(_nan_state(3, 0))
    mgr.step(_nan_state(3, 1))
    before = mgr.state_dict()
    read_before = s.read().clone()
    with pytest.raises(ValueError, match=r"sensor 'joint'.*non-finite.*envs \[2\] at step 2.*Fix"):
        mgr.step(_nan_state(3, 2, bad_env=2))
    assert torch.equal(s.read(), read_before)
    after = mgr.state_dict()
    assert after["t"] == before["t"]
    for k, v in before["classes"]["StateSensor"]["tensors"].items():
        assert torch.equal(v, after["classes"]["StateSensor"]["tensors"][k]), k


def test_nan_hold_keeps_last_finite_per_env_and_component():
    mgr = sg.SensorManager(num_envs=2, dt=DT)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), nan_policy="hold"))
    plain = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,)))
    mgr.reset(_nan_state(2, 0))
    mgr.step(_nan_state(2, 1))
    mgr.step(_nan_state(2, 2, bad_env=1))
    assert s.read().tolist() == [[2.0, 2.0], [1.0, 1.0]]
    assert s.read_ground_truth().tolist() == [[2.0, 2.0], [1.0, 1.0]]
    assert torch.isnan(plain.read()[1, 1])  # other sensors keep propagating
    mgr.step(_nan_state(2, 3))
    assert s.read().tolist() == [[3.0, 3.0], [3.0, 3.0]]
    mgr.reset(_nan_state(2, 4, bad_env=0), envs_idx=[0])  # nothing finite yet in the new episode
    assert s.read()[0].tolist() == [0.0, 0.0]


# -- state_dict -----------------------------------------------------------------------------------------
def _drive(mgr, sensors, t0, t1, seed=0):
    g = torch.Generator().manual_seed(seed + t0)
    out = []
    for t in range(t0, t1):
        mask = torch.rand(mgr.num_envs, generator=g) < 0.2
        if t % 7 == 3:
            mgr.reset(_wide_ramp(t), envs_idx=mask)
        else:
            mgr.step(_wide_ramp(t), reset_mask=mask)
        out.append([s.read().clone() for s in sensors] + [s.read_ground_truth().clone() for s in sensors])
    return out


def test_state_dict_round_trip_continues_bit_identically():
    mgr, sensors = _suite(seed=11)
    mgr.reset(_wide_ramp(0))
    _drive(mgr, sensors, 1, 15)
    buf = io.BytesIO()
    torch.save(mgr.state_dict(), buf)
    expected = _drive(mgr, sensors, 15, 40)

    fresh, fresh_sensors = _suite(seed=999)  # different seed: everything must come from the state
    fresh.reset(_wide_ramp(0))
    buf.seek(0)
    fresh.load_state_dict(torch.load(buf, weights_only=False))
    got = _drive(fresh, fresh_sensors, 15, 40)
    for a, b in zip(expected, got, strict=True):
        for x, y in zip(a, b, strict=True):
            assert torch.equal(x, y)


def test_load_state_dict_rejects_another_configuration():
    mgr, _ = _suite()
    mgr.reset(_wide_ramp(0))
    other = sg.SensorManager(num_envs=4, dt=DT)
    other.add_sensor(sg.StateSensorOptions(key="x", shape=(3,)))
    other.reset(_wide_ramp(0))
    with pytest.raises(ValueError, match=r"sensor set differs.*Fix"):
        other.load_state_dict(mgr.state_dict())


def test_byte_and_bool_sensors_in_one_manager():
    mgr = sg.SensorManager(num_envs=2, dt=DT)
    byte = mgr.add_sensor(ByteOptions(width=1))
    flag = mgr.add_sensor(ThresholdOptions(width=1, threshold=100.0))
    mgr.reset(ramp_state(50, 2))
    assert byte.read().tolist() == [[50], [150]] and flag.read().tolist() == [[False], [True]]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    outs = []
    for device in ("cpu", "cuda"):
        mgr, sensors = _suite(seed=3, device=device)
        mgr.reset(_wide_ramp(0))
        for t in range(1, 10):
            mgr.step(_wide_ramp(t))
        outs.append([s.read().cpu() for s in sensors])
        assert all(s.read().device.type == device for s in sensors)
    # noise draws differ between CPU and CUDA generators; the noiseless sensor must agree exactly
    assert torch.equal(outs[0][3], outs[1][3])


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_step_has_no_host_device_sync():
    mgr, _ = _suite(seed=3, device="cuda")
    state = {k: v.cuda() for k, v in _wide_ramp(0).items()}
    mgr.reset(state)
    mgr.step(state)
    done = torch.zeros(4, dtype=torch.bool, device="cuda")
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(5):
            mgr.step(state, reset_mask=done)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_numpy_and_torch_state_entries_give_identical_readings():
    """StateSensor copies numpy entries with numpy (a CPU fast path) and tensors with torch: both must give
    the same bits, for contiguous, scattered and negative indices, 1-D entries and float64/int inputs."""
    rng = np.random.default_rng(0)
    states = [
        {
            "q": rng.normal(size=(5, 6)),  # float64: cast to float32 on the way in
            "c": rng.integers(-50, 50, size=(5, 4)),
            "s": rng.normal(size=5),
        }
        for _ in range(6)
    ]
    reads = []
    for as_torch in (False, True):
        mgr = sg.SensorManager(num_envs=5, dt=DT, seed=3)
        sensors = [
            mgr.add_sensor(sg.StateSensorOptions(key="q", index=[1, 2, 3], noise=0.1, delay=DT)),
            mgr.add_sensor(sg.StateSensorOptions(key="q", index=[5, 0, -2], history_length=2)),
            mgr.add_sensor(sg.StateSensorOptions(key="c", resolution=3.0)),
            mgr.add_sensor(sg.StateSensorOptions(key="s", index=[0])),
        ]
        out = []
        for i, st in enumerate(states):
            st = {k: torch.as_tensor(v) for k, v in st.items()} if as_torch else st
            mgr.reset(st) if i == 0 else mgr.step(st)
            out.append([torch.cat([s.read().flatten(), s.read_ground_truth().flatten()]) for s in sensors])
        reads.append(out)
    for a, b in zip(*reads, strict=True):
        for x, y in zip(a, b, strict=True):
            assert torch.equal(x, y)
    # the scattered, negative index picks columns 5, 0, 4 (ground truth of the last step)
    gt = reads[0][-1][1][30:].view(5, 2, 3)[:, 0]  # after the (5, 2, 3) measured history: GT history
    assert torch.equal(gt, torch.as_tensor(states[-1]["q"][:, [5, 0, 4]]).float())


def test_randomization_names_give_each_column_its_component() -> None:
    """Regression (issue 11.8): with only some components randomized, names were numbered by position
    among the randomized ones (component 2 was named ``bias[1]``)."""
    mgr = sg.SensorManager(num_envs=2, dt=0.1, seed=0)
    mgr.add_sensor(
        sg.StateSensorOptions(
            key="x",
            shape=(3,),
            bias=[0.0, sg.Uniform(0.5, 0.5), sg.Uniform(0.25, 0.25)],
            noise=[0.0, 0.0, sg.Uniform(0.125, 0.125)],
            delay=sg.Choice([0.1]),
        ),
        name="a",
    )
    mgr.reset({"x": torch.zeros(2, 3)})
    names = mgr.randomization_names()
    assert names == ["a.delay", "a.noise[2]", "a.bias[1]", "a.bias[2]"]
    values = mgr.read_randomization()[0].tolist()
    assert dict(zip(names, values, strict=True)) == pytest.approx(
        {"a.delay": 0.1, "a.noise[2]": 0.125, "a.bias[1]": 0.5, "a.bias[2]": 0.25}
    )
