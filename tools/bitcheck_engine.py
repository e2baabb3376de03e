"""bitcheck scenarios of the engine: ``StateSensor`` under every option of SPEC 2.5, 2.8 and 5.1 (values,
per-component values and distributions), on both executors, with one shared generator and with one per
env; resets folded into steps and partial resets; every read. The driver (:func:`drive`) and the feed of
states (:class:`Feed`) are shared with bitcheck_sensors.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import sensorgym as sg

B, DT, SEED = 5, 0.02, 11
U, N, C, LU = sg.Uniform, sg.Normal, sg.Choice, sg.LogUniform


class Feed:
    """The state of step ``t``: each entry drawn from its own stream ``(seed, t, entry)``, so the same
    step gets the same state whatever was asked before. ``nan`` puts non-finite values in ``"x"`` at a few
    steps; ``as_torch`` hands torch tensors instead of numpy arrays."""

    def __init__(
        self, widths: dict[str, int], seed: int = 0, as_torch: bool = False, nan: bool = False, b: int = B
    ):
        self.widths, self.seed, self.as_torch, self.nan, self.b = widths, seed, as_torch, nan, b

    def __call__(self, t: int) -> dict[str, Any]:
        out = {}
        for i, (key, width) in enumerate(self.widths.items()):
            rng = np.random.default_rng([self.seed, t, i])
            dtype = np.float64 if key == "y" else np.float32
            x = (rng.normal(size=(self.b, width)) * 2.0 + np.sin(0.3 * t)).astype(dtype)
            if self.nan and key == "x" and t in (5, 6, 12):
                x[min(1, self.b - 1), 0] = np.nan
                if t == 12:
                    x[-1, :] = np.inf
            out[key] = torch.from_numpy(x) if self.as_torch else x
        return out


def _mask(*rows: int, as_torch: bool = True, b: int = B) -> Any:
    m = np.zeros(b, dtype=bool)
    m[[r % b for r in rows]] = True
    return torch.from_numpy(m) if as_torch else m


def schedule(b: int) -> dict[int, tuple[str, Any]]:
    """:data:`SCHEDULE` for ``b`` envs (rows taken modulo ``b``)."""
    return {
        4: ("mask", _mask(1, b=b)),
        7: ("partial", sorted({0, 3 % b})),
        10: ("mask", _mask(0, 3, 4, as_torch=False, b=b)),
        13: ("partial", _mask(2, b=b)),
        16: ("full", None),
        19: ("mask", _mask(b=b)),
        21: ("mask", torch.ones(b, dtype=torch.bool)),
    }


#: step -> what happens at it besides the plain step: a reset folded into the step (``reset_mask`` in its
#: several forms), a partial or full ``reset`` after the step's reads
SCHEDULE: dict[int, tuple[str, Any]] = {
    4: ("mask", _mask(1)),
    7: ("partial", [0, 3]),
    10: ("mask", _mask(0, 3, 4, as_torch=False)),
    13: ("partial", _mask(2)),
    16: ("full", None),
    19: ("mask", _mask()),  # an empty mask: a plain step
    21: ("mask", _mask(0, 1, 2, 3, 4)),
}
STEPS = 24


def reads(rec: Any, tag: str, mgr: sg.SensorManager) -> None:
    """Every read of every sensor: measured, ground truth, age, and the history reads it allows."""
    for s in mgr.sensors:
        p = f"{tag}.{s.name}"
        rec.attempt(p + ".m", lambda s=s, p=p: rec.out(p + ".m", s.read()))
        rec.attempt(p + ".gt", lambda s=s, p=p: rec.out(p + ".gt", s.read_ground_truth()))
        rec.attempt(p + ".age", lambda s=s, p=p: rec.out(p + ".age", s.read_age()))
        if s.options.history_length:
            n = s.options.history_length - 1
            rec.out(p + f".h{n}", s.read(history_length=n))
            rec.out(p + ".h0", s.read(history_length=0))
            rec.out(p + ".gth1", s.read_ground_truth(history_length=1))


def randomization(rec: Any, tag: str, mgr: sg.SensorManager) -> None:
    rec.out(f"{tag}.names", mgr.randomization_names())
    rec.out(f"{tag}.rand", mgr.read_randomization())
    for s in mgr.sensors:
        rec.out(f"{tag}.{s.name}.rand", s.read_randomization())


def drive(
    rec: Any,
    mgr: sg.SensorManager,
    feed: Callable[[int], Any],
    steps: range,
    schedule: dict[int, tuple[str, Any]] | None = None,
    events: dict[int, Callable[[], None]] | None = None,
    tag: str = "",
) -> None:
    """Steps ``steps`` with the resets of ``schedule`` and the calls of ``events`` (run before the step of
    that number), recording every read after each step; exceptions are recorded where they happen."""
    schedule = SCHEDULE if schedule is None else schedule
    for t in steps:
        if events and t in events:
            rec.attempt(f"{tag}{t}.event", events[t])
        kind, arg = schedule.get(t, ("step", None))
        if kind == "full":
            rec.attempt(f"{tag}{t}.reset", lambda t=t: mgr.reset(feed(t)))
        elif kind == "mask":
            rec.attempt(f"{tag}{t}.step", lambda t=t, arg=arg: mgr.step(feed(t), reset_mask=arg))
        else:
            rec.attempt(f"{tag}{t}.step", lambda t=t: mgr.step(feed(t)))
        if kind == "partial":
            rec.attempt(f"{tag}{t}.reset", lambda t=t, arg=arg: mgr.reset(feed(1000 + t), envs_idx=arg))
        reads(rec, f"{tag}{t}", mgr)
        if t % 8 == 0:
            randomization(rec, f"{tag}{t}", mgr)


def manager(executor: str, per_env: bool, sensors: dict[str, Any], seed: int = SEED, b: int = B, **kw: Any):
    mgr = sg.SensorManager(num_envs=b, dt=DT, seed=seed, per_env_rng=per_env, executor=executor, **kw)
    for name, options in sensors.items():
        mgr.add_sensor(options, name=name)
    return mgr


def start(rec: Any, mgr: sg.SensorManager, feed: Callable[[int], Any]) -> None:
    """The first reset (which builds), the reads and the randomization it gives."""
    rec.attempt("0.reset", lambda: mgr.reset(feed(0)))
    rec.out("0.executor", mgr.executor_used)
    reads(rec, "0", mgr)
    randomization(rec, "0", mgr)


def finish(rec: Any, mgr: sg.SensorManager) -> None:
    randomization(rec, "end", mgr)
    for ground_truth in (False, True):
        every = mgr.read_sensors(ground_truth=ground_truth)
        rec.out(f"end.read_sensors.{ground_truth}", {cls.__name__: v for cls, v in every.items()})
    rec.state("end.sd", mgr.state_dict())
    rec.out("end.generator", mgr.random.generator.get_state())


def _state_sensors(kw_a: dict, kw_b: dict) -> dict[str, sg.StateSensorOptions]:
    """Three sensors of one class: the option set on ``x`` (3 components) and on two of ``y``'s four
    (float64, through ``index``), and a plain one on one component of ``x``."""
    return {
        "a": sg.StateSensorOptions(key="x", shape=(3,), **kw_a),
        "b": sg.StateSensorOptions(key="y", index=[0, 2], **kw_b),
        "c": sg.StateSensorOptions(key="x", index=[1]),
    }


def _same(**kw: Any) -> tuple[dict, dict]:
    return kw, kw


DEFAULTS = dict(
    delay=0.0,
    jitter=0.0,
    history_length=0,
    padding_type="reset",
    nan_policy="propagate",
    max_delay=None,
    update_period=0.0,
    update_phase=None,
    dropout=0.0,
    dropout_burst=None,
    noise=0.0,
    bias=0.0,
    random_walk=0.0,
    resolution=0.0,
    noise_density=0.0,
    random_walk_density=0.0,
    bias_instability=0.0,
    bias_correlation_time=0.0,
    scale_factor=0.0,
    bandwidth=0.0,
)

#: option set -> (options of sensor a (3 components), of sensor b (2 components))
OPTION_SETS: dict[str, tuple[dict, dict]] = {
    "plain": _same(),
    "defaults_explicit": _same(**DEFAULTS),
    "delay": _same(delay=0.04),
    "delay_fraction": ({"delay": 0.05}, {"delay": 0.03}),  # not multiples of dt
    "delay_uniform": _same(delay=U(0.0, 0.08)),
    "delay_choice": _same(delay=C([0.0, 0.02, 0.06])),
    "delay_normal": _same(delay=N(0.04, 0.02, low=0.0, high=0.08)),
    "delay_loguniform": _same(delay=LU(0.01, 0.08)),
    "jitter": _same(delay=0.06, jitter=0.04),
    "jitter_uniform": ({"delay": 0.08, "jitter": U(0.0, 0.05)}, {"delay": U(0.02, 0.06), "jitter": 0.02}),
    "jitter_over_dt": _same(delay=0.1, jitter=0.07),
    "max_delay": _same(delay=0.02, max_delay=0.1),
    "history": _same(history_length=3),
    "history_delay_zero": _same(delay=0.04, history_length=4, padding_type="zero"),
    "history_jitter_reset": _same(delay=U(0.02, 0.06), jitter=0.02, history_length=2, padding_type="reset"),
    "nan_propagate": _same(delay=0.02, history_length=2),
    "nan_hold": _same(nan_policy="hold", delay=0.02, history_length=2, noise=0.1),
    "nan_raise": _same(nan_policy="raise", noise=0.1, delay=0.04),
    "noise": _same(noise=0.1),
    "noise_components": ({"noise": [0.0, 0.1, 0.5]}, {"noise": [0.2, 0.0]}),
    "noise_loguniform": _same(noise=LU(0.01, 0.5)),
    "noise_component_distributions": (
        {"noise": (N(0.1, 0.05, low=0.0), 0.0, U(0.0, 0.3))},
        {"noise": U(0.0, 0.2)},
    ),
    "bias": ({"bias": 0.3}, {"bias": [-0.5, 0.25]}),
    "bias_distributions": ({"bias": N(0.0, 0.2)}, {"bias": (U(-1.0, 1.0), 0.1)}),
    "random_walk": _same(random_walk=0.05),
    "random_walk_distributions": ({"random_walk": U(0.0, 0.1)}, {"random_walk": (0.02, C([0.0, 0.05]))}),
    "resolution": ({"resolution": 0.25}, {"resolution": [0.0, 0.1]}),
    "resolution_distributions": ({"resolution": C([0.1, 0.2])}, {"resolution": LU(0.01, 0.1)}),
    "noise_density": _same(noise_density=0.01),
    "noise_density_fast_sampler": _same(noise_density=0.002, update_period=0.005),
    "noise_density_distributions": (
        {"noise_density": U(0.001, 0.01)},
        {"noise_density": (0.005, LU(0.001, 0.01))},
    ),
    "random_walk_density": _same(random_walk_density=0.02),
    "random_walk_density_uniform": _same(random_walk_density=U(0.0, 0.05)),
    "gauss_markov": _same(bias_instability=0.1, bias_correlation_time=0.5),
    "gauss_markov_distributions": (
        {"bias_instability": U(0.05, 0.2), "bias_correlation_time": LU(0.1, 2.0)},
        {"bias_instability": (0.1, 0.0), "bias_correlation_time": (C([0.2, 1.0]), 0.0)},
    ),
    "scale_factor": ({"scale_factor": 0.05}, {"scale_factor": [-0.1, 0.2]}),
    "scale_factor_distributions": (
        {"scale_factor": U(-0.05, 0.05)},
        {"scale_factor": (N(0.0, 0.02, low=-0.5, high=0.5), 0.0)},
    ),
    "bandwidth": _same(bandwidth=5.0, noise=0.1),
    "bandwidth_fast_sampler": _same(bandwidth=40.0, noise_density=0.01, update_period=0.005),
    "bandwidth_distributions": ({"bandwidth": U(1.0, 10.0), "noise": 0.05}, {"bandwidth": (2.0, 0.0)}),
    "update_period": _same(update_period=0.05, update_phase=0.01),
    "update_period_random_phase": _same(update_period=0.05, noise=0.1),
    "update_period_distributions": _same(update_period=U(0.03, 0.07), update_phase=U(0.0, 0.02), noise=0.1),
    "dropout": _same(dropout=0.3, noise=0.1),
    "dropout_distribution": _same(dropout=U(0.0, 0.5), update_period=0.04, update_phase=0.0),
    "dropout_burst": _same(dropout=0.3, dropout_burst=3.0, noise=0.05),
    "dropout_burst_distributions": _same(dropout=U(0.1, 0.3), dropout_burst=U(1.5, 4.0), update_period=0.04),
    "all_fixed": (
        dict(
            delay=0.06,
            jitter=0.02,
            history_length=3,
            padding_type="zero",
            noise=[0.01, 0.02, 0.0],
            bias=[0.1, -0.1, 0.0],
            random_walk=0.01,
            resolution=0.01,
            scale_factor=0.02,
            bias_instability=0.05,
            bias_correlation_time=1.0,
            bandwidth=8.0,
            update_period=0.03,
            update_phase=0.005,
            dropout=0.2,
            dropout_burst=2.0,
            max_delay=0.12,
        ),
        dict(
            delay=0.02,
            noise_density=0.003,
            random_walk_density=0.01,
            resolution=[0.05, 0.0],
            nan_policy="hold",
        ),
    ),
    "all_distributions": _same(
        delay=U(0.0, 0.06),
        jitter=U(0.0, 0.02),
        history_length=2,
        noise_density=LU(0.001, 0.01),
        bias=N(0.0, 0.1),
        random_walk_density=U(0.0, 0.02),
        resolution=C([0.0, 0.01]),
        scale_factor=U(-0.03, 0.03),
        bias_instability=U(0.0, 0.05),
        bias_correlation_time=U(0.5, 2.0),
        bandwidth=U(2.0, 8.0),
        update_period=U(0.02, 0.05),
        update_phase=U(0.0, 0.01),
        dropout=U(0.0, 0.2),
        dropout_burst=U(1.0, 3.0),
    ),
}


def option_scenario(
    option_set: str, executor: str, per_env: bool, as_torch: bool, compile: bool = False
) -> Callable:
    kw_a, kw_b = OPTION_SETS[option_set]

    def scenario(rec: Any, ctx: Any) -> None:
        mgr = manager(executor, per_env, _state_sensors(kw_a, kw_b), compile=compile)
        feed = Feed(
            {"x": 3, "y": 4}, seed=len(option_set), as_torch=as_torch, nan=option_set.startswith("nan")
        )
        start(rec, mgr, feed)
        drive(rec, mgr, feed, range(1, STEPS + 1))
        finish(rec, mgr)

    return scenario


def batch_scenario(b: int, option_set: str, executor: str, per_env: bool) -> Callable:
    """One option set at another batch size (1 env; many, where ``"auto"`` picks its executor)."""
    kw_a, kw_b = OPTION_SETS[option_set]

    def scenario(rec: Any, ctx: Any) -> None:
        mgr = manager(executor, per_env, _state_sensors(kw_a, kw_b), b=b)
        feed = Feed({"x": 3, "y": 4}, seed=b, b=b)
        start(rec, mgr, feed)
        last = STEPS if b < 1000 else 11  # large batches: the first three resets only (time)
        drive(rec, mgr, feed, range(1, last + 1), schedule=schedule(b))
        finish(rec, mgr)

    return scenario


BATCHES = (
    (1, "all_fixed", "auto", False),
    (1, "all_distributions", "auto", True),
    (1, "jitter", "torch", False),
    (64, "all_distributions", "auto", False),
    (64, "all_fixed", "torch", True),
    (3000, "all_fixed", "auto", False),
    (3000, "all_distributions", "torch", False),
    (50000, "jitter_uniform", "auto", False),
)


def scenarios() -> dict[str, Callable]:
    out = {}
    # the fused kernel (torch.compile; the first build of each takes seconds: the test runs them as slow)
    for option_set, per_env in (
        ("all_fixed", False),
        ("all_distributions", False),
        ("bandwidth_fast_sampler", True),
    ):
        name = f"compile/{option_set}/{'per_env_rng' if per_env else 'one_rng'}"
        out[name] = option_scenario(option_set, "auto", per_env, as_torch=False, compile=True)
    for b, option_set, executor, per_env in BATCHES:
        name = f"batch/B{b}/{option_set}/{executor}/{'per_env_rng' if per_env else 'one_rng'}"
        out[name] = batch_scenario(b, option_set, executor, per_env)
    for i, option_set in enumerate(OPTION_SETS):
        for executor in ("numpy", "torch"):
            for per_env in (False, True):
                name = f"opt/{option_set}/{executor}/{'per_env_rng' if per_env else 'one_rng'}"
                out[name] = option_scenario(option_set, executor, per_env, as_torch=i % 2 == 1)
    return out
