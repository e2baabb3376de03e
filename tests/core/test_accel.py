"""The optional fast paths equal the eager step bit for bit: the ``torch.compile``-fused imperfection
kernel (CPU here; any device) and CUDA-graph capture of the whole step (needs CUDA; skipped without)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

import sensorgym as sg

from ..helpers import FilterOptions, HalfOptions, HalfSensor

B = 48


#: every term of the error model (docs/error_model.md), the sampler's own rate and bursty losses included
ERROR_MODEL = dict(
    noise_density=[0.1, 0.0, 0.05], noise=[0.0, 0.2, 0.0], random_walk_density=0.05,
    bias_instability=sg.Uniform(0.1, 0.3), bias_correlation_time=2.0, scale_factor=[0.01, -0.02, 0.0],
    bandwidth=[3.0, 0.0, sg.Uniform(1.0, 6.0)], update_period=sg.Uniform(0.005, 0.05), dropout=0.1,
    dropout_burst=3.0, delay=0.02, history_length=2,
)  # fmt: skip


def _build(device: str, *, compile: bool = False, error_model: bool = False) -> sg.SensorManager:
    mgr = sg.SensorManager(num_envs=B, dt=0.02, device=device, seed=5, compile=compile)
    if error_model:
        mgr.add_sensor(sg.StateSensorOptions(key="imu", shape=(3,), **ERROR_MODEL), name="modelled")
    mgr.add_sensor(
        sg.StateSensorOptions(
            key="imu",
            shape=(3,),
            noise=sg.Uniform(0.0, 0.3),
            random_walk=0.05,
            bias=sg.Normal(0.0, 1.0),
            resolution=[0.01, 0.0, 0.1],  # partly quantized: the masked kernel
            delay=sg.Choice([0.02, 0.04]),
            jitter=0.02,
            history_length=3,
        ),
        name="imu",
    )
    mgr.add_sensor(sg.StateSensorOptions(key="enc", shape=(4,), noise=0.1, resolution=0.05), name="enc")
    mgr.add_sensor(sg.StateSensorOptions(key="force", shape=(2,), bias=0.5, delay=0.06), name="force")
    mgr.add_sensor(FilterOptions(key="imu", width=3, alpha=0.5, random_walk=0.01), name="filtered")
    return mgr


def _states(device: str, n: int):
    g = torch.Generator().manual_seed(0)
    for _ in range(n):
        state = {
            "imu": torch.randn(B, 3, generator=g) * 10,
            "enc": torch.randn(B, 4, generator=g),
            "force": torch.randn(B, 2, generator=g),
        }
        mask = torch.rand(B, generator=g) < 0.1
        yield {k: v.to(device) for k, v in state.items()}, mask.to(device)


def _readings(mgr: sg.SensorManager) -> list[torch.Tensor]:
    return [s.read().clone() for s in mgr.sensors] + [s.read_ground_truth().clone() for s in mgr.sensors]


@pytest.mark.parametrize("error_model", [False, True])
def test_compiled_kernel_equals_eager_bit_for_bit(error_model):
    eager, fused = (
        _build("cpu", error_model=error_model),
        _build("cpu", compile=True, error_model=error_model),
    )
    for i, (state, mask) in enumerate(_states("cpu", 30)):
        for mgr in (eager, fused):
            if i == 0:
                mgr.reset(state)
            elif i % 7 == 0:
                mgr.step(state)
                mgr.reset(state, mask)  # non-advancing partial reset
            else:
                mgr.step(state, reset_mask=mask if i % 3 == 0 else None)
        if i == 15:  # run-time setters change which kernel variant runs
            for mgr in (eager, fused):
                mgr.sensors[-4].set_resolution(0.02)
                mgr.sensors[-3].set_noise(0.0, envs_idx=[0, 1])
        for a, b in zip(_readings(eager), _readings(fused), strict=True):
            assert torch.equal(a, b), f"step {i}"
    assert torch.equal(eager.state_dict()["generator"], fused.state_dict()["generator"])


@dataclass(frozen=True, kw_only=True)
class _BFloatOptions(sg.SimpleSensorOptions):
    pass


class _BFloatSensor(HalfSensor):
    options_cls = _BFloatOptions
    intermediate_dtype = cache_dtype = torch.bfloat16


@pytest.mark.parametrize(
    ("options_cls", "dtype"), [(HalfOptions, torch.float16), (_BFloatOptions, torch.bfloat16)]
)
def test_compile_keeps_reduced_precision_classes_bit_exact(options_cls, dtype):
    reads = []
    for compile in (False, True):
        mgr = sg.SensorManager(num_envs=64, dt=0.1, seed=0, compile=compile, executor="torch")
        s = mgr.add_sensor(options_cls(noise=0.1, bias=0.3, random_walk=0.05, resolution=0.01))
        g = torch.Generator().manual_seed(0)
        mgr.reset({"x": torch.randn(64, 3, generator=g).to(dtype)})
        for _ in range(4):
            mgr.step({"x": torch.randn(64, 3, generator=g).to(dtype)})
        reads.append(s.read().clone())
    assert reads[0].dtype == dtype and torch.equal(reads[0], reads[1])


def test_capture_needs_cuda():
    mgr = _build("cpu")
    state, _ = next(_states("cpu", 1))
    mgr.reset(state)
    with pytest.raises(RuntimeError, match=r"CUDA device.*Fix"):
        mgr.capture_cuda_graph(state)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("error_model", [False, True])
def test_cuda_graph_step_equals_eager_bit_for_bit(error_model):
    eager, captured = _build("cuda", error_model=error_model), _build("cuda", error_model=error_model)
    states = list(_states("cuda", 80))
    eager.reset(states[0][0])
    captured.reset(states[0][0])
    step = captured.capture_cuda_graph(states[0][0])
    assert step.period > 1  # several clock phases
    for i, (state, mask) in enumerate(states[1:], start=1):
        reset = mask if i % 3 == 0 else None
        eager.step(state, reset_mask=reset if reset is not None else torch.zeros_like(mask))
        step(state, reset_mask=reset)
        for a, b in zip(_readings(eager), _readings(captured), strict=True):
            assert torch.equal(a, b), f"step {i}"
    assert eager.clock.t == captured.clock.t
