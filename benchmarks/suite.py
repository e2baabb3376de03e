"""The "standard suite" workload and the per-sensor baseline used by the benchmarks.

Standard suite: 12 sensors in 3 classes
  * 4 IMU-style float (3,) sensors with delay, jitter, noise, bias, random walk, resolution, history 4
  * 4 contact-style bool (1,) sensors: float intermediate, threshold ``_post_process``, delay
  * 4 encoder-style float (12,) sensors with resolution

The baseline composes the same observation the way Isaac Lab's ObservationManager composes terms: each
sensor is its own term with its own delay buffer (circular, per-env lag gather), noise call, bias, drift,
quantization and history buffer, evaluated in a Python loop with out-of-place tensor ops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

import sensorgym as sg

DT = 0.02
N_IMU, N_CONTACT, N_ENC = 4, 4, 4
ENC_DIM = 12
HISTORY = 4


@dataclass(frozen=True, kw_only=True)
class ContactBenchOptions(sg.SimpleSensorOptions):
    threshold: float = 0.5


class ContactBench(sg.SimpleSensor):
    """Contact-style: all instances read one ``(B, n)`` state entry in one copy; bool via threshold."""

    options_cls = ContactBenchOptions
    return_format = (1,)
    cache_dtype = torch.bool
    intermediate_dtype = torch.float32

    @classmethod
    def _init_metadata(cls, md):
        # a tensor threshold: a Python scalar would be wrapped into a new 0-d tensor every step (kept in
        # md.constants, the place for values a class derives once, not as a new attribute of md)
        md.constants["threshold"] = torch.tensor(0.5, device=md.device)

    @classmethod
    def _update_raw_data(cls, state, md, raw):
        raw.copy_(state["contact"])

    @classmethod
    def _post_process(cls, md, data, timeline, *, is_measured):
        out = timeline.at(0)
        torch.gt(data, md.constants["threshold"], out=out)
        return out


@dataclass(frozen=True, kw_only=True)
class EncoderBenchOptions(sg.SimpleSensorOptions):
    pass


class EncoderBench(sg.SimpleSensor):
    """Encoder-style: all instances read one ``(B, n, 12)`` state entry in one copy."""

    options_cls = EncoderBenchOptions
    return_format = (ENC_DIM,)
    cache_dtype = torch.float32

    @classmethod
    def _update_raw_data(cls, state, md, raw):
        raw.copy_(state["joints"].flatten(1))


IMU_OPTIONS = dict(
    delay=0.04,
    jitter=0.02,
    noise=0.01,
    bias=0.02,
    random_walk=0.001,
    resolution=0.001,
    history_length=HISTORY,
)


def make_state(num_envs: int, device: str | torch.device = "cpu", seed: int = 0) -> dict:
    generator = torch.Generator(device="cpu").manual_seed(seed)
    state = {f"imu{i}": torch.randn(num_envs, 3, generator=generator) for i in range(N_IMU)}
    state["contact"] = torch.rand(num_envs, N_CONTACT, generator=generator)
    state["joints"] = torch.randn(num_envs, N_ENC, ENC_DIM, generator=generator)
    return {k: v.to(device) for k, v in state.items()}


def build_suite(
    num_envs: int,
    device: str | torch.device = "cpu",
    seed: int = 0,
    compile: bool = False,
    num_threads: int | None = None,
    executor: str = "auto",
) -> sg.SensorManager:
    mgr = sg.SensorManager(
        num_envs=num_envs,
        dt=DT,
        device=device,
        seed=seed,
        compile=compile,
        num_threads=num_threads,
        executor=executor,
    )
    for i in range(N_IMU):
        mgr.add_sensor(sg.StateSensorOptions(key=f"imu{i}", shape=(3,), **IMU_OPTIONS), name=f"imu{i}")
    for i in range(N_CONTACT):
        mgr.add_sensor(ContactBenchOptions(delay=0.02), name=f"contact{i}")
    for i in range(N_ENC):
        mgr.add_sensor(EncoderBenchOptions(resolution=0.01), name=f"enc{i}")
    return mgr


# -- baseline ---------------------------------------------------------------------------------------------
# Written after Isaac Lab's ObservationManager (2026): every sensor is an observation term evaluated in a
# Python loop; the critic group evaluates the term function again without corruption; noise is
# ``x + randn_like(x) * std``; history and delay use a CircularBuffer whose append shifts the slots so the
# newest is last and whose lagged read is an advanced-indexing gather; flattened history is a reshape of
# the transposed buffer. Random walk and quantization (absent in Isaac Lab) are stateful modifiers in the
# same style. Jitter follows Isaac Lab's Delay term: a lag drawn every step, held so that delivery is
# never out of order.
class _ShiftBuffer:
    def __init__(self, max_len: int, num_envs: int, dim: int, dtype, device) -> None:
        self.buffer = torch.zeros(max_len, num_envs, dim, dtype=dtype, device=device)
        self.max_len = max_len
        self.all_envs = torch.arange(num_envs, device=device)

    def append(self, data: torch.Tensor) -> None:
        for i in range(self.max_len - 1):
            self.buffer[i].copy_(self.buffer[i + 1])
        self.buffer[-1] = data

    def lagged(self, lag: torch.Tensor) -> torch.Tensor:
        return self.buffer[(self.max_len - 1 - lag).long(), self.all_envs]

    def flat_history_newest_first(self) -> torch.Tensor:
        return self.buffer.flip(0).transpose(0, 1).reshape(self.buffer.shape[1], -1)


class _Term:
    def __init__(
        self,
        func,
        dim,
        *,
        delay=0,
        jitter_steps=0.0,
        noise=0.0,
        bias=0.0,
        walk=0.0,
        res=0.0,
        history=0,
        threshold=None,
        num_envs=1,
        device="cpu",
    ) -> None:
        self.func, self.dim = func, dim
        self.delay, self.jitter_steps = delay, jitter_steps
        self.noise, self.bias, self.walk, self.res = noise, bias, walk, res
        self.threshold = threshold
        depth = delay + int(np.ceil(jitter_steps)) + 1
        dtype = torch.bool if threshold is not None else torch.float32
        self.delay_buf = _ShiftBuffer(depth, num_envs, dim, dtype, device) if depth > 1 else None
        self.hist = _ShiftBuffer(history, num_envs, dim, dtype, device) if history else None
        self.drift = torch.zeros(num_envs, dim, device=device)
        self.prev_lag = torch.zeros(num_envs, dtype=torch.long, device=device)

    def policy(self, state, gen) -> torch.Tensor:
        reading = self.func(state)
        if self.walk:
            self.drift = (
                self.drift + torch.randn(reading.shape, generator=gen, device=reading.device) * self.walk
            )
            reading = reading + self.drift
        if self.noise:
            reading = reading + torch.randn(reading.shape, generator=gen, device=reading.device) * self.noise
        if self.bias:
            reading = reading + self.bias
        if self.res:
            reading = torch.round(reading / self.res) * self.res
        if self.threshold is not None:
            reading = reading > self.threshold
        if self.delay_buf is not None:
            self.delay_buf.append(reading)
            lag = torch.full((reading.shape[0],), self.delay, dtype=torch.long, device=reading.device)
            if self.jitter_steps:
                jitter_draw = (
                    torch.rand(reading.shape[0], generator=gen, device=reading.device) * self.jitter_steps
                )
                uniform_draw = torch.rand(reading.shape[0], generator=gen, device=reading.device)
                lag = lag + torch.floor(jitter_draw + uniform_draw).long()
                lag = torch.minimum(lag, self.prev_lag + 1)
                self.prev_lag = lag
            reading = self.delay_buf.lagged(lag)
        if self.hist is not None:
            self.hist.append(reading)
            reading = self.hist.flat_history_newest_first()
        return reading

    def critic(self, state) -> torch.Tensor:
        truth = self.func(state)
        return truth > self.threshold if self.threshold is not None else truth


def _entry(key, col=None):
    if col is None:
        return lambda state: state[key].clone()
    return lambda state: state[key][..., col].reshape(state[key].shape[0], -1).clone()


class PerSensorBaseline:
    """The standard suite as 12 independent observation terms in a policy and a critic group."""

    def __init__(self, num_envs: int, device: str | torch.device = "cpu", seed: int = 0) -> None:
        self.gen = torch.Generator(device=device).manual_seed(seed)
        delay_steps = round(0.04 / DT)
        common = dict(num_envs=num_envs, device=device)
        self.terms = [
            *(
                _Term(
                    _entry(f"imu{i}"),
                    3,
                    delay=delay_steps,
                    jitter_steps=IMU_OPTIONS["jitter"] / DT,
                    noise=0.01,
                    bias=0.02,
                    walk=0.001,
                    res=0.001,
                    history=HISTORY,
                    **common,
                )
                for i in range(N_IMU)
            ),
            *(_Term(_entry("contact", i), 1, delay=1, threshold=0.5, **common) for i in range(N_CONTACT)),
            *(
                _Term(lambda state, i=i: state["joints"][:, i].clone(), ENC_DIM, res=0.01, **common)
                for i in range(N_ENC)
            ),
        ]

    def step(self, state) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        policy = [term.policy(state, self.gen) for term in self.terms]
        critic = [term.critic(state) for term in self.terms]
        return policy, critic
