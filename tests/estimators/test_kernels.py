"""The compiled kernels (sensorgym/estimators/kernels.py) against the recorded op tape they transcribe: the
same bits, step after step, for both filters, 6 and 9 axes, both earth fields, float32 and float64, the
numpy and the torch (CPU) executor, B = 1, 7 and 4096, with per-env gains and sample intervals, samples
reading zero and masked envs; which route a step takes; and what the kernel costs against the tape."""

from __future__ import annotations

import copy
import os
import pickle
import re
import subprocess
import sys
import timeit

import numpy as np
import pytest
import torch

pytest.importorskip("numba")

from sensorgym.estimators import Madgwick, Mahony, dispatch, kernels, use_kernels

FILTERS = [
    Madgwick(beta=0.3, rate=200.0),
    Madgwick(beta=0.3, rate=200.0, earth_field="c_code"),
    Mahony(kp=1.5, ki=0.4, rate=200.0),
]
UINT = {torch.float32: np.uint32, torch.float64: np.uint64}


@pytest.fixture(autouse=True)
def _kernels_restored():
    previous = use_kernels(True)
    yield
    use_kernels(previous)


def _steps(seed: int, batch: int, n: int) -> list[tuple[np.ndarray, ...]]:
    """``n`` steps of moving, noisy samples (rad/s, m/s², µT) with some reading exactly zero (whole
    accelerometer or magnetometer samples of some envs) and a random mask each."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        gyr = rng.normal(0.0, 1.0, (batch, 3))
        acc = rng.normal(0.0, 2.0, (batch, 3)) + np.array([0.0, 0.0, 9.81])
        mag = rng.normal(0.0, 5.0, (batch, 3)) + np.array([18.0, 0.0, -45.0])
        acc[rng.random(batch) < 0.15] = 0.0
        mag[rng.random(batch) < 0.15] = 0.0
        out.append((gyr, acc, mag, rng.random(batch) < 0.7))
    return out


def _state(filt, batch: int, dtype: torch.dtype, executor: str, seed: int):
    """A state with a random start, random per-env gains (some zero) and sample intervals, and for
    Mahony a random bias estimate."""
    rng = np.random.default_rng(seed)
    state = filt.new_state(batch, dtype=dtype, executor=executor)
    q0 = rng.normal(size=(batch, 4))
    filt.initialize(state, q0=q0 / np.linalg.norm(q0, axis=1, keepdims=True))
    for gain in filt.gain_names:
        values = rng.uniform(0.0, 3.0, batch) * (rng.random(batch) < 0.9)
        state.tensors[gain].copy_(torch.tensor(values))
    state.tensors["dt"].copy_(torch.tensor(1.0 / rng.uniform(50.0, 1000.0, batch)))
    if "bias" in state.tensors:
        state.tensors["bias"].copy_(torch.tensor(rng.normal(0.0, 0.05, (3, batch))))
    return state


def _trace(filt, batch, dtype, executor, axes, masked, kernels_on, steps):
    """The persistent rows and the (normalized in place) sample rows after every step, as raw bits."""
    use_kernels(kernels_on)
    state = _state(filt, batch, dtype, executor, seed=batch)
    conv = torch.from_numpy if executor == "torch" else (lambda x: x)
    bits = []
    for gyr, acc, mag, mask in steps:
        filt.update(
            state,
            conv(gyr.astype(np.float64)),
            conv(acc),
            conv(mag) if axes == 9 else None,
            conv(mask) if masked else None,
        )
        rows = [state.tensors[k] for k in state.persistent] + [state.tensors["a"], state.tensors["m"]]
        bits.append([r.numpy().copy().view(UINT[dtype]) for r in rows])
    route = state.kernels.get((filt, axes == 9))
    assert (route is not None) == kernels_on, "the step did not take the route asked for"
    return bits


@pytest.mark.parametrize("batch", [1, 7, 4096])
@pytest.mark.parametrize("executor", ["numpy", "torch"])
def test_the_kernel_gives_the_tapes_bits(batch, executor):
    """Every variant, step after step: the quaternion, the bias estimate, the gains and dt, and the sample
    rows the step normalized in place, equal bit for bit (+0 and -0 told apart)."""
    n = 6 if batch == 4096 else 25
    steps = _steps(100 + batch, batch, n)
    for filt in FILTERS:
        for dtype in (torch.float32, torch.float64):
            for axes in (6, 9):
                for masked in (False, True):
                    args = (filt, batch, dtype, executor, axes, masked)
                    fast, tape = _trace(*args, True, steps), _trace(*args, False, steps)
                    for i, (f_rows, t_rows) in enumerate(zip(fast, tape, strict=True)):
                        for f_row, t_row in zip(f_rows, t_rows, strict=True):
                            assert np.array_equal(f_row, t_row), (filt, dtype, axes, masked, i)


@pytest.mark.parametrize("filt", FILTERS[::2], ids=repr)
def test_run_is_the_same_either_way(filt):
    """``run`` over a batch of logs (each step through the kernel) returns the tape's bits."""
    rng = np.random.default_rng(7)
    gyr, acc, mag = rng.normal(size=(3, 5, 60, 3)) * np.array([1.0, 3.0, 20.0])[:, None, None, None]
    acc[:, ::9] = 0.0
    for x in (np.float32, np.float64):
        args = [a.astype(x) for a in (gyr, acc, mag)]
        for log in (args, [torch.from_numpy(a) for a in args]):
            fast = filt.run(*log)
            use_kernels(False)
            tape = filt.run(*log)
            use_kernels(True)
            assert np.array_equal(np.asarray(fast), np.asarray(tape))


def test_the_mask_may_come_in_any_form():
    """A numpy or torch bool mask is read where it lies; an integer one, or a strided view, is copied
    first: the same bits as the tape for each."""
    f = Mahony(kp=1.0, ki=0.5, rate=100.0)
    steps = _steps(8, 6, 1)
    gyr, acc, mag, mask = steps[0]
    forms = [mask, torch.from_numpy(mask), mask.astype(int), np.stack([mask, mask], 1)[:, 0]]
    results = []
    for kernels_on in (True, False):
        use_kernels(kernels_on)
        for form in forms:
            state = _state(f, 6, torch.float64, "numpy", seed=1)
            f.update(state, gyr, acc, mag, form)
            results.append(np.concatenate([state.tensors["q"].numpy(), state.tensors["bias"].numpy()]))
    assert all(np.array_equal(r, results[-1]) for r in results)
    held = _state(f, 6, torch.float64, "numpy", seed=1).tensors["q"].numpy()
    assert np.array_equal(results[0][:4, ~mask], held[:, ~mask]) and not np.array_equal(results[0][:4], held)


def test_which_route_a_step_takes(monkeypatch):
    """The kernel for the built-ins on a CPU state; the tape for a subclass with its own step, for a
    state laid out otherwise, without numba, and when switched off."""
    filt = Madgwick(beta=0.1, rate=100.0)
    zeros = np.zeros((2, 3))

    def route(f, **kw):
        state = f.new_state(2, executor=kw.pop("executor", "numpy"))
        f.initialize(state, q0=[1.0, 0, 0, 0])
        f.update(state, zeros, zeros + np.array([0.0, 0.0, 9.8]))
        return state.kernels.get((f, False)), state.plans

    kernel, plans = route(filt)
    assert kernel[0] is kernels.madgwick6 and not plans
    assert route(Mahony(kp=1.0, ki=0.0, rate=100.0))[0][0] is kernels.mahony6
    assert route(filt, executor="torch")[0][0] is kernels.madgwick6

    class Slower(Madgwick):
        def _step(self, state, magnetometer):
            super()._step(state, magnetometer)

    class WithCounter(Mahony):  # a row of its own shifts Mahony's layout
        state_rows = {"count": 1, **Mahony.state_rows}  # noqa: RUF012

    for other in (Slower(beta=0.1, rate=100.0), WithCounter(kp=1.0, ki=0.0, rate=100.0)):
        kernel, plans = route(other)
        assert kernel is None and plans
    use_kernels(False)
    kernel, plans = route(filt)
    assert kernel is None and plans
    use_kernels(True)
    monkeypatch.setattr(dispatch, "_available", False)
    assert route(filt)[0] is None


def test_the_switch():
    assert use_kernels(False) is True and use_kernels(True) is False
    values = ("0", " Off", "false", "no", "1", "")
    assert [dispatch.switched_on(v) for v in values] == [False] * 4 + [True] * 2
    code = "import sensorgym.estimators.dispatch as d; assert d.enabled is False"
    env = {**os.environ, "SENSORGYM_ESTIMATOR_KERNELS": "0"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def test_numba_loads_at_the_first_step_not_at_import():
    code = (
        "import sys, numpy as np\n"
        "import sensorgym.estimators as e\n"
        "assert 'numba' not in sys.modules\n"
        "f = e.Mahony(kp=1.0, ki=0.0, rate=100.0)\n"
        "f.run(np.zeros((2, 3)), np.tile([0.0, 0.0, 9.8], (2, 1)))\n"
        "assert 'numba' in sys.modules\n"
    )
    env = {**os.environ, "SENSORGYM_ESTIMATOR_KERNELS": "1"}  # whatever this run's setting
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def test_the_compiled_code_has_no_fused_multiply_add():
    """numba without fastmath leaves ``a*b + c`` as two roundings (an FMA would round once and change
    the bits); the bit tests above would catch it, this says why. Compiled afresh (numba shows no code
    it loaded from its cache)."""
    fresh = __import__("numba").njit(error_model="numpy")(kernels.madgwick9.py_func)
    state = Madgwick(beta=0.1, rate=100.0).new_state(16, executor="numpy")
    host = state.host
    fresh(host.storage, kernels.consts_for(np.float64), host.mask, False)
    asm = fresh.inspect_asm(fresh.signatures[0])
    assert re.search(r"\bdiv|sqrt", asm, re.I)  # the text is the kernel's machine code
    assert not re.search(r"\bv?fn?m(add|sub)\w*|\bfml[as]\b", asm, re.I)


def test_the_kernel_is_much_cheaper_than_the_tape():
    """One step at B = 1: the tape is 40 to 120 numpy calls (about 1 µs each), the kernel one call; the
    kernel costs under a fifth of it (measured about a fiftieth), in the same process."""
    f = Madgwick(beta=0.1, rate=100.0)
    state = f.new_state(1, executor="numpy")
    state.arrays.a.v[:] = [[0.1], [0.2], [9.8]]
    times = {}
    for on in (True, False):
        use_kernels(on)
        f.step(state, True)
        times[on] = min(timeit.repeat(lambda: f.step(state, True), number=200, repeat=5))
    assert times[True] < times[False] / 5, times


@pytest.mark.parametrize("executor", ["numpy", "torch"])
def test_a_copied_state_steps_on_its_own_memory(executor):
    """A deep copy or a pickled copy of a state mid-run continues exactly as the original, on its own
    memory: the original does not move when the copy steps (its numpy views and bound kernel are made
    anew, not copied as arrays of the original's memory)."""
    f = Mahony(kp=1.0, ki=0.5, rate=100.0)
    steps = _steps(9, 5, 20)
    state = _state(f, 5, torch.float32, executor, seed=3)
    conv = torch.from_numpy if executor == "torch" else (lambda x: x)
    for gyr, acc, mag, _ in steps[:10]:
        f.update(state, conv(gyr), conv(acc), conv(mag))
    copies = [copy.deepcopy(state), pickle.loads(pickle.dumps(state))]
    frozen = state.state_dict()
    for c in copies:
        for gyr, acc, mag, mask in steps[10:]:
            f.update(c, conv(gyr), conv(acc), conv(mag), conv(mask))
        for name, saved in frozen.items():
            assert torch.equal(state.tensors[name], saved), name
    for gyr, acc, mag, mask in steps[10:]:
        f.update(state, conv(gyr), conv(acc), conv(mag), conv(mask))
    for c in copies:
        for name in state.persistent:
            assert torch.equal(c.tensors[name], state.tensors[name]), name
