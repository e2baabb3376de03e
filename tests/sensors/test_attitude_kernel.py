"""``AttitudeSensor``'s compiled outputs (sensors/mujoco/attitude_kernel.py) against the op-by-op route
they mirror: the same bits, for every output, the measured and the true branch, both executors, with lost
samples, several sensors per class and the estimator off."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.estimators import dispatch, use_kernels
from sensorgym.sensors.mujoco.attitude import truth_key

pytestmark = pytest.mark.skipif(not dispatch.kernels_available(), reason="needs numba (the fast extra)")

ALL = ("projected_gravity", "quaternion", "roll_pitch", "bias", "ang_vel")


# the configurations the kernels branch on: several sensors and outputs (the general loops, masked by the
# sampler), one sensor reading one 3- or 4-vector (the loops with constant strides), the 9-axis update
# with Madgwick's C-code earth field, and a class whose samples are a column block of a wider buffer (an
# IMUSensor shares the float32 buffer: rows 9 n elements apart no more)
CONFIGS = {
    "two_sensors_all_outputs": [
        dict(estimator_kp=2.0, estimator_ki=0.2, gyro_bias=0.05, gyro_noise=0.02, outputs=ALL,
             update_period=0.02, dropout=0.2),
        dict(outputs=("ang_vel", "roll_pitch"), estimator_init="truth", estimator_init_error=4.0),
    ],
    "one_sensor_gravity": [dict(gyro_noise=0.02, acc_noise=0.1)],
    "one_sensor_quaternion": [dict(outputs=("quaternion",), dropout=0.3)],
    "nine_axis": [dict(estimator_magnetometer=True, estimator_earth_field="c_code", mag_noise=0.05,
                       outputs=("projected_gravity", "roll_pitch", "bias"), gyro_bias=0.02)],
    "beside_an_imu": [dict(outputs=("projected_gravity", "ang_vel"))],
}  # fmt: skip


def _run(executor, kernels, estimator, config="two_sensors_all_outputs", n=120, b=5):
    previous = use_kernels(kernels)
    try:
        mgr = sg.SensorManager(num_envs=b, dt=0.01, seed=0, executor=executor)
        if config == "beside_an_imu":
            mgr.add_sensor(sg.IMUOptions(body="torso", acc_noise=0.1))
        sensors = [
            mgr.add_sensor(sg.AttitudeOptions(body="torso", estimator=estimator, **opts))
            for opts in CONFIGS[config]
        ]
        rng = np.random.default_rng(0)
        q = torch.from_numpy(rng.normal(size=(n, b, 4))).float()
        q = q / q.norm(dim=-1, keepdim=True)
        x = torch.from_numpy(
            rng.normal(size=(n, b, 9)) + np.array([0, 0, 9.81, 0, 0, 0, 0.2, 0, -0.4])
        ).float()
        resets = rng.random((n, b)) < 0.05
        out = []
        for k in range(n):
            state = {}
            for s in mgr.sensors:
                state[s.state_key] = x[k].numpy()  # as the sub-envs hand them: float32 numpy arrays
                if isinstance(s.options, sg.AttitudeOptions):
                    state[truth_key(s.options)] = q[k].numpy()
            mgr.reset(state) if k == 0 else mgr.step(state, reset_mask=torch.from_numpy(resets[k]))
            for s in sensors:
                for r in (s.read(), s.read_ground_truth()):
                    out += [t.clone() for t in (r if isinstance(r, tuple) else (r,))]
        return out
    finally:
        use_kernels(previous)


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("executor", ["numpy", "torch"])
@pytest.mark.parametrize("estimator", ["mahony", "madgwick", "none"])
def test_the_compiled_outputs_are_the_op_routes_bit_for_bit(executor, estimator, config):
    compiled, ops = _run(executor, True, estimator, config), _run(executor, False, estimator, config)
    assert len(compiled) == len(ops)
    for a, b in zip(compiled, ops, strict=True):
        assert torch.equal(a, b)


def test_the_common_case_runs_one_compiled_call_per_branch():
    """One sensor reading the projected gravity: the measured branch is the fused update (no op route),
    and both branches write their return caches directly (``projection_depth`` 1: no copy stage)."""
    mgr = sg.SensorManager(num_envs=3, dt=0.01, seed=0)
    s = mgr.add_sensor(sg.AttitudeOptions(body="torso", estimator="mahony"))
    state = {s.state_key: np.tile(np.float32([0, 0, 9.81, 0, 0, 0, 0, 0, 0]), (3, 1)),
             truth_key(s.options): np.tile(np.float32([1, 0, 0, 0]), (3, 1))}  # fmt: skip
    mgr.reset(state)
    mgr.step(state)
    st = mgr.storage(type(s))
    est = st.md.constants["attitude"]
    assert est.fused is not None and est.fused.__name__ == "mahony6_outputs"
    kernels = {k.__name__ for k, *_ in est._calls.values()}  # per (branch buffer, slot) bound once
    assert kernels == {"mahony6_outputs", "truth_outputs"}
    assert st.stage_names() == ["ProjectIntoRing", "ProjectIntoRing"]
    assert est.truth.now is state[truth_key(s.options)]  # the state's array, read where it lies


def test_an_imu_without_an_estimator_runs_no_estimator_code():
    """Issue 35's "nothing when off": a manager with an ``IMUSensor`` (no estimator) builds and steps on
    both executors without loading the estimators or numba, and its capture is the IMU's own copy stage
    (no projection)."""
    code = (
        "import sys, numpy as np, sensorgym as sg\n"
        "for executor in ('numpy', 'torch'):\n"
        "    mgr = sg.SensorManager(num_envs=4, dt=0.01, seed=0, executor=executor)\n"
        "    s = mgr.add_sensor(sg.IMUOptions(body='torso', gyro_noise=0.01, update_period=0.02))\n"
        "    state = {s.state_key: np.ones((4, 9), np.float32)}\n"
        "    mgr.reset(state)\n"
        "    for _ in range(5): mgr.step(state)\n"
        "    assert 'ProjectIntoRing' not in mgr.storage(sg.IMUSensor).stage_names()\n"
        "assert 'sensorgym.estimators' not in sys.modules and 'numba' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _truth_forms(q: np.ndarray) -> dict:
    """The same true orientations ``(B, 4)`` (float32 values) in every form a state may hand them."""
    read_only = q.copy()
    read_only.flags.writeable = False
    wide = np.zeros((q.shape[0], 8), dtype=np.float32)
    wide[:, ::2] = q
    return {
        "float32": q,  # read where it lies (the compiled call's own type)
        "pickled": pickle.loads(pickle.dumps(q)),  # as from a worker process: an equal dtype, not numpy's own
        "float64": q.astype(np.float64),
        "tensor": torch.from_numpy(q.copy()),
        "read_only": read_only,
        "strided": wide[:, ::2],  # not C order
        "big_endian": q.astype(">f4"),
        "list": q.tolist(),
    }


@pytest.mark.parametrize("executor", ["numpy", "torch"])
def test_the_true_orientation_reads_the_same_in_every_form_a_state_hands_it(executor):
    """The compiled calls take the truth's array as it lies only where it is the type they were compiled
    for (float32, C order, aligned, writeable: they do not check it); any other form is copied first, and
    every form gives the same bits, measured and true."""
    b, n = 3, 25
    rng = np.random.default_rng(1)
    q = rng.normal(size=(n, b, 4))
    q = (q / np.linalg.norm(q, axis=-1, keepdims=True)).astype(np.float32)
    x = (rng.normal(size=(n, b, 9)) + np.array([0, 0, 9.81, 0, 0, 0, 0, 0, 0])).astype(np.float32)
    reads = {}
    for form in _truth_forms(q[0]):
        mgr = sg.SensorManager(num_envs=b, dt=0.01, seed=0, executor=executor)
        s = mgr.add_sensor(sg.AttitudeOptions(body="torso", outputs=("projected_gravity", "quaternion")))
        est = None
        out = []
        for k in range(n):
            state = {s.state_key: x[k], truth_key(s.options): _truth_forms(q[k])[form]}
            mgr.reset(state) if k == 0 else mgr.step(state)
            est = mgr.storage(type(s)).md.constants["attitude"]
            direct = est.truth.now is state[truth_key(s.options)]
            assert direct == (form in ("float32", "pickled")), form
            out += [t.clone() for r in (s.read(), s.read_ground_truth()) for t in r]
        reads[form] = out
    for form, out in reads.items():
        assert all(torch.equal(a, c) for a, c in zip(out, reads["float32"], strict=True)), form


@pytest.mark.parametrize("bad", ["missing", "shape"])
def test_a_missing_or_misshapen_true_orientation_is_refused_naming_the_key_and_the_fix(bad):
    mgr = sg.SensorManager(num_envs=2, dt=0.01, seed=0)
    s = mgr.add_sensor(sg.AttitudeOptions(body="torso"))
    good = {s.state_key: np.tile(np.float32([0, 0, 9.81, 0, 0, 0, 0, 0, 0]), (2, 1)),
            truth_key(s.options): np.tile(np.float32([1, 0, 0, 0]), (2, 1))}  # fmt: skip
    mgr.reset(good)
    state = dict(good)
    if bad == "missing":
        del state[truth_key(s.options)]
    else:
        state[truth_key(s.options)] = np.zeros((2, 3), np.float32)
    before = [t.clone() for t in (s.read(), s.read_ground_truth())]
    with pytest.raises(ValueError) as err:
        mgr.step(state)
    message = str(err.value)
    assert truth_key(s.options) in message and "(2, 4)" in message and "Fix:" in message
    assert "\n" not in message
    # nothing was written: the readings are the last step's
    assert all(torch.equal(a, c) for a, c in zip(before, (s.read(), s.read_ground_truth()), strict=True))
    mgr.step(good)  # and the manager steps on


def test_a_kernel_table_refuses_a_buffer_it_cannot_view_from_its_address():
    from sensorgym.sensors.mujoco.attitude_kernel import Table

    x, plan = np.zeros(9, np.float32), np.zeros((1, 3), np.int64)
    ang, bias = np.zeros((3, 1), np.float32), np.zeros((3, 1), np.float32)
    Table(x, 9, plan, 1, np.zeros((1, 3), np.float32), ang, bias)  # fits
    for out in (np.zeros((1, 6), np.float32)[:, ::2], np.zeros((1, 3), np.float64)):
        with pytest.raises(ValueError, match="another dtype, shape or layout"):
            Table(x, 9, plan, 1, out, ang, bias)


def test_with_numba_compiling_nothing_the_op_route_runs():
    """``NUMBA_DISABLE_JIT=1`` runs njit functions as Python, where the kernels' intrinsics (the views
    from addresses, the vector-width mark) cannot run: the sensor then takes the op route (and reads what
    it reads compiled)."""
    code = (
        "import numpy as np, sensorgym as sg\n"
        "from sensorgym.sensors.mujoco.attitude import truth_key\n"
        "mgr = sg.SensorManager(num_envs=2, dt=0.01, seed=0)\n"
        "s = mgr.add_sensor(sg.AttitudeOptions(body='torso', estimator='mahony', gyro_noise=0.01))\n"
        "state = {s.state_key: np.tile(np.float32([0.5, 0, 9.8, 0.1, 0, 0, 0, 0, 0]), (2, 1)),\n"
        "         truth_key(s.options): np.tile(np.float32([1, 0, 0, 0]), (2, 1))}\n"
        "mgr.reset(state)\n"
        "for _ in range(5):\n"
        "    mgr.step(state)\n"
        "print(mgr.storage(type(s)).md.constants['attitude'].outputs.compiled is None, s.read().tolist())\n"
    )
    runs = {}
    for jit in ("0", "1"):
        env = {**__import__("os").environ, "NUMBA_DISABLE_JIT": jit}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        runs[jit] = done.stdout.strip()
    assert runs["1"].startswith("True") and runs["0"].startswith("False")
    assert runs["1"].split(" ", 1)[1] == runs["0"].split(" ", 1)[1]  # the same readings


_COMPILED = """
import json, re, sys
import numpy as np, llvmlite.binding as ll, sensorgym as sg
from numba.core.registry import CPUDispatcher
from sensorgym.estimators import kernels as E
from sensorgym.sensors.mujoco import attitude_kernel as K
from sensorgym.sensors.mujoco.attitude import truth_key
ALL = ("projected_gravity", "quaternion", "roll_pitch", "bias", "ang_vel")
for estimator, magnetometer in [(e, m) for e in ("madgwick", "mahony") for m in (False, True)]:
    mgr = sg.SensorManager(num_envs=3, dt=0.01, seed=0)
    s = mgr.add_sensor(sg.AttitudeOptions(body="torso", estimator=estimator, outputs=ALL,
                                          estimator_magnetometer=magnetometer, mag_noise=0.05))
    state = {s.state_key: np.tile(np.float32([0.5, 0, 9.8, 0.1, 0, 0, 0.3, 0, 0.4]), (3, 1)),
             truth_key(s.options): np.tile(np.float32([1, 0, 0, 0]), (3, 1))}
    mgr.reset(state)
    for _ in range(3):
        mgr.step(state)
b = 2  # the fill on its own (the outputs after an estimator of one's own), as the sensor calls it
q, ang, bias, out = (np.zeros(shape, np.float32) for shape in ((4, b), (3, b), (3, b), (b, 4)))
K.fill(q, K.Table(np.zeros(9 * b, np.float32), 9, np.array([[1, 0, 0]]), 1, out, ang, bias).table)
found = {}
for module in (E, K):
    for name, f in vars(module).items():
        if not isinstance(f, CPUDispatcher) or not f.overloads:
            continue
        for sig, ir in f.inspect_llvm().items():
            lines = ir.splitlines()
            head = next(l for l in lines if l.startswith("define") and f"{len(name)}{name}B" in l
                        and "cpython" not in l and "cfunc" not in l)
            group = re.search(r"#(\\d+)", head.split(")")[-1])  # the function's attribute group, if any
            attributes = [l for l in lines if group and l.startswith(f"attributes #{group.group(1)} ")]
            marked = any('"min-legal-vector-width"="256"' in l for l in attributes)
            found[f"{name}{sig}"] = [marked, "zmm" in f.inspect_asm(sig)]
print(json.dumps({"avx512": bool(ll.get_host_cpu_features().get("avx512f")), "found": found}))
"""


def test_the_compiled_kernels_keep_to_256_bit_vectors(tmp_path):
    """Every compiled kernel keeps ``vectors_256``'s mark once LLVM has inlined its helpers into it (LLVM
    drops the mark from a function when it inlines a callee without it) and, on a CPU with AVX-512, its
    machine code uses no 512-bit (zmm) register. Compiled afresh in a subprocess (numba shows no code it
    loaded from its cache): every kernel that the four built-in forms (Madgwick and Mahony, 6- and 9-axis)
    with every output run, and the fill on its own."""
    env = {**__import__("os").environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _COMPILED], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    report = __import__("json").loads(done.stdout.strip().splitlines()[-1])
    names = {key.split("(")[0] for key in report["found"]}
    forms = ("madgwick6", "madgwick9", "mahony6", "mahony9")
    assert {*forms, *(f"{f}_outputs" for f in forms), "truth_outputs", "fill", "scatter"} <= names
    assert {key for key, (marked, _) in report["found"].items() if not marked} == set()
    if report["avx512"]:
        assert {key for key, (_, zmm) in report["found"].items() if zmm} == set()


def test_the_compiled_fill_refuses_orientations_it_would_misread():
    """``fill`` and ``truth_outputs`` view their orientations' memory as flat float32 in C order: any
    other dtype or layout is a typing error when they compile, not values read wrongly."""
    from numba.core.errors import TypingError

    from sensorgym.sensors.mujoco.attitude_kernel import Table, fill, truth_outputs

    x, plan = np.zeros(9 * 2, np.float32), np.array([[1, 0, 0]], np.int64)  # the quaternion block
    out, ang, bias = np.zeros((2, 4), np.float32), np.zeros((3, 2), np.float32), np.zeros((3, 2), np.float32)
    table = Table(x, 9, plan, 1, out, ang, bias).table
    q = np.arange(8, dtype=np.float32).reshape(4, 2)
    fill(q, table)
    assert np.array_equal(out, q.T)
    truth_outputs(np.ascontiguousarray(q.T[::-1]), table)
    assert np.array_equal(out, q.T[::-1])
    for bad in (q.astype(np.float64), np.asfortranarray(q), np.zeros((4, 4), np.float32)[:, ::2]):
        with pytest.raises(TypingError):
            fill(bad, table)
        with pytest.raises(TypingError):
            truth_outputs(bad, table)


def test_a_true_orientation_that_requires_grad_builds_no_graph_and_the_manager_copies():
    """A differentiable simulator's state (tensors that require grad): the class's copy of the truth
    stays a plain buffer (the state check runs outside the capture's no-grad mode), so nothing chains the
    steps' graphs and ``copy.deepcopy`` of the manager works; the readings are the plain tensors'."""
    import copy

    reads = []
    for grad in (False, True):
        mgr = sg.SensorManager(num_envs=2, dt=0.01, seed=0, executor="torch")
        s = mgr.add_sensor(sg.AttitudeOptions(body="torso"))
        x = torch.tensor([[0.5, 0, 9.8, 0.1, 0, 0, 0, 0, 0]] * 2)
        q = torch.tensor([[0.9, 0.1, 0.2, 0.3]] * 2, requires_grad=grad)
        state = {s.state_key: x, truth_key(s.options): q * 1.0}
        mgr.reset(state)
        for _ in range(3):
            mgr.step(state)
        quat = mgr.storage(type(s)).md.constants["attitude"].truth.quat
        assert quat.grad_fn is None and not quat.requires_grad
        twin = copy.deepcopy(mgr)
        twin.step({k: v.detach() for k, v in state.items()})
        reads.append([t.clone() for t in (s.read(), s.read_ground_truth())])
    assert all(torch.equal(a, b) for a, b in zip(*reads, strict=True))


@pytest.mark.parametrize("executor", ["numpy", "torch"])
def test_a_subclass_with_float64_readings_takes_the_op_route_and_reads_the_same_values(executor):
    """The compiled calls view float32 buffers only: a subclass whose cache dtype is float64 runs the op
    route (it used to compile a float64 variant), and reads the float32 sensor's values."""
    from dataclasses import dataclass

    from sensorgym.sensors.mujoco.attitude import AttitudeSensor

    @dataclass(frozen=True, kw_only=True)
    class WideOptions(sg.AttitudeOptions):
        pass

    class Wide(AttitudeSensor):
        options_cls = WideOptions

        @classmethod
        def _get_cache_dtype(cls) -> torch.dtype:
            return torch.float64

    reads = []
    for options in (sg.AttitudeOptions, WideOptions):
        o = options(body="torso", estimator="mahony", outputs=("projected_gravity", "quaternion"))
        mgr = sg.SensorManager(num_envs=2, dt=0.01, seed=0, executor=executor)
        s = mgr.add_sensor(o)
        state = {s.state_key: np.tile(np.float32([0.5, 0, 9.8, 0.1, 0, 0, 0, 0, 0]), (2, 1)),
                 truth_key(o): np.tile(np.float32([0.9, 0.1, 0.2, 0.3]), (2, 1))}  # fmt: skip
        mgr.reset(state)
        for _ in range(4):
            mgr.step(state)
        reads.append([t.double() for r in (s.read(), s.read_ground_truth()) for t in r])
        assert reads[-1] and s.read()[0].dtype == (torch.float64 if options is WideOptions else torch.float32)
    assert all(torch.equal(a, b) for a, b in zip(*reads, strict=True))
