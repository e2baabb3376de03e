"""One command for the performance table: the standard sensor suite (benchmarks/suite.py) at every batch
size, on CPU and on CUDA when present, against the alternatives, measured in the same run.

Per device and B it times one step of
  * sensorgym eager: ``SensorManager.step`` on the 12-sensor suite;
  * sensorgym fast path: ``compile=True`` (fused imperfection kernel) on CPU, the CUDA-graph captured
    step on CUDA;
  * baseline: the same suite as 12 Isaac-Lab-style observation terms (benchmarks/suite.py);
  * Gymnasium composition (CPU, B <= 1024): per sub-env ``TransformObservation`` (drift, noise, bias,
    quantization, contact threshold) -> ``DelayObservation(2)`` -> ``FrameStackObservation(4)`` over a
    SyncVectorEnv whose sub-envs just return the suite's state; reported as the time the wrappers add to
    the bare vector env, next to what ``SensorObservation`` with the suite adds to the same env;
  * the copy roofline: one ``copy_`` of the bytes the pipeline must write per step;
  * the floor: the roofline copy plus the random numbers the suite needs per step (one normal per column
    with noise and one per column with random walk, two uniforms per env for each jittered sensor),
    drawn by the same generator type the manager uses;
  * the sampler options of SPEC 2.8 (benchmarks/bench_sampler.py, B <= 4096): the suite as is, with the
    default values given explicitly, and with multi-rate sampling and dropout, as ratios to the suite;
  * on CPU, `sensorgym fit` on a 1-hour, 200 Hz, six-channel log (benchmarks/bench_fit.py: under 30 s,
    against reading the log in the same run; the script exits 1 when a target is missed);
and reports µs per step, µs per env-step, steps/s, ratios and memory (sensor state bytes; CUDA peak).
It writes ``<out>/performance_<device>.md`` (the tables), ``<out>/scaling_<device>.png`` (cost vs B) and
``<out>/results_<device>.json``, and prints the tables.

Usage:
    python benchmarks/run_all.py                       # CPU (+ CUDA when available), all sizes
    python benchmarks/run_all.py --sizes 1 64 --min-time 0.1 --out /tmp/bench   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_sampler
from bench_manager import bytes_written_per_step, sync, time_it
from suite import DT, ENC_DIM, HISTORY, N_CONTACT, N_ENC, N_IMU, PerSensorBaseline, build_suite, make_state

import sensorgym as sg
from sensorgym.wrappers import SensorObservation

SIZES = [1, 16, 64, 256, 1024, 4096, 16384]
GYM_MAX_B = 1024
STATE_DIM = 3 * N_IMU + N_CONTACT + ENC_DIM * N_ENC


# -- memory -------------------------------------------------------------------------------------------
def tensor_bytes(obj, seen=None) -> int:
    """Bytes of the tensor storages reachable from ``obj`` (each storage once)."""
    seen = set() if seen is None else seen
    if torch.is_tensor(obj):
        st = obj.untyped_storage()
        key = (st.data_ptr(), st.nbytes())
        if key in seen:
            return 0
        seen.add(key)
        return st.nbytes()
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v, seen) for v in obj)
    if isinstance(obj, dict):
        return sum(tensor_bytes(v, seen) for v in obj.values())
    if hasattr(obj, "__dict__") and type(obj).__module__ in ("suite", "__main__"):
        return sum(tensor_bytes(v, seen) for v in vars(obj).values())
    return 0


# -- Gymnasium composition -------------------------------------------------------------------------------
class SuiteStateEnv(gym.Env):
    """A sub-env that only returns the suite's raw state (64 floats): isolates the sensor layer's cost."""

    metadata = {"render_modes": []}  # noqa: RUF012 - gymnasium convention
    dt = DT

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (STATE_DIM,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self._obs = np.random.default_rng(0).normal(size=STATE_DIM).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs.copy(), {}

    def step(self, action):
        return self._obs.copy(), 0.0, False, False, {}


def _imperfect(env: gym.Env) -> gym.Env:
    rng = np.random.default_rng(0)
    drift = np.zeros(3 * N_IMU, np.float32)
    imu, contact = slice(0, 3 * N_IMU), slice(3 * N_IMU, 3 * N_IMU + N_CONTACT)
    enc = slice(3 * N_IMU + N_CONTACT, STATE_DIM)

    def f(o):
        o = o.copy()
        drift[:] += rng.normal(0.0, 0.001, drift.shape)
        o[imu] = np.round((o[imu] + drift + rng.normal(0.0, 0.01, drift.shape) + 0.02) / 0.001) * 0.001
        o[contact] = o[contact] > 0.5
        o[enc] = np.round(o[enc] / 0.01) * 0.01
        return o.astype(np.float32)

    return gym.wrappers.TransformObservation(env, f, env.observation_space)


def gym_composition(env: gym.Env) -> gym.Env:
    return gym.wrappers.FrameStackObservation(
        gym.wrappers.DelayObservation(_imperfect(env), delay=2), stack_size=HISTORY
    )


def _suite_sensors() -> dict:
    imu = dict(delay=0.04, jitter=0.02, noise=0.01, bias=0.02, random_walk=0.001, resolution=0.001)
    sensors = {
        f"imu{i}": sg.StateSensorOptions(
            key="obs", index=[3 * i, 3 * i + 1, 3 * i + 2], history_length=HISTORY, **imu
        )
        for i in range(N_IMU)
    }
    base = 3 * N_IMU
    sensors["contact"] = sg.StateSensorOptions(
        key="obs", index=list(range(base, base + N_CONTACT)), delay=0.02
    )
    base += N_CONTACT
    for i in range(N_ENC):
        idx = list(range(base + ENC_DIM * i, base + ENC_DIM * (i + 1)))
        sensors[f"enc{i}"] = sg.StateSensorOptions(key="obs", index=idx, resolution=0.01)
    return sensors


def wrapper_overheads(b: int, steps: int) -> tuple[float, float, float, float]:
    """(bare, sensorgym, gymnasium, sensorgym with the torch executor) seconds per vector step, best of
    interleaved rounds."""
    envs = {
        "bare": gym.vector.SyncVectorEnv([SuiteStateEnv] * b),
        "sensorgym": SensorObservation(
            gym.vector.SyncVectorEnv([SuiteStateEnv] * b), _suite_sensors(), seed=0
        ),
        "sensorgym-torch": _forced_torch(b),
        "gymnasium": gym.vector.SyncVectorEnv([lambda: gym_composition(SuiteStateEnv())] * b),
    }
    actions = np.zeros((b, 1), np.float32)
    best = dict.fromkeys(envs, float("inf"))
    for env in envs.values():
        env.reset(seed=0)
        for _ in range(5):
            env.step(actions)
    for _ in range(3):
        for kind, env in envs.items():
            start = time.perf_counter()
            for _ in range(steps):
                env.step(actions)
            best[kind] = min(best[kind], (time.perf_counter() - start) / steps)
    for env in envs.values():
        env.close()
    return best["bare"], best["sensorgym"], best["gymnasium"], best["sensorgym-torch"]


def _forced_torch(b: int) -> SensorObservation:
    """The wrapper with the torch executor forced (``executor="auto"`` picks numpy for small CPU batches)."""
    envs = gym.vector.SyncVectorEnv([SuiteStateEnv] * b)
    return SensorObservation(envs, _suite_sensors(), seed=0, executor="torch")


# -- the floor: random numbers the suite needs + the roofline copy ---------------------------------------
def random_numbers_needed(mgr: sg.SensorManager) -> tuple[int, int]:
    """(normals, uniforms) one step of ``mgr`` must draw at the least, from the sensors' options."""
    normals = uniforms = 0
    for s in mgr.sensors:
        cols = s.cache_slice.stop - s.cache_slice.start
        opts = s.options
        for name in ("noise", "random_walk"):
            value = getattr(opts, name, 0.0)
            if isinstance(value, sg.Distribution) or np.any(np.asarray(value, dtype=object) != 0):
                normals += cols * mgr.num_envs
        if isinstance(opts.jitter, sg.Distribution) or opts.jitter != 0:
            uniforms += 2 * mgr.num_envs  # j ~ U[0, jitter) and u ~ U[0, 1) per env
    return normals, uniforms


def floor_step(mgr: sg.SensorManager, src: torch.Tensor, dst: torch.Tensor, device: torch.device):
    """A step of the floor: the draws of :func:`random_numbers_needed` plus the roofline copy."""
    normals, uniforms = random_numbers_needed(mgr)
    gen = torch.Generator(device=device).manual_seed(0)
    n_buf = torch.empty(max(normals, 1), device=device)
    u_buf = torch.empty(max(uniforms, 1), device=device)

    def step() -> None:
        n_buf.normal_(generator=gen)
        u_buf.uniform_(generator=gen)
        dst.copy_(src)

    return step


# -- the run ---------------------------------------------------------------------------------------------
def fast_path(b: int, device: torch.device, state: dict):
    """(step callable, label) of the fast path on this device."""
    if device.type == "cuda":
        mgr = build_suite(b, device)
        mgr.reset(state)
        step = mgr.capture_cuda_graph(state)
        return (lambda: step(state)), "captured (CUDA graph)", mgr
    mgr = build_suite(b, device, compile=True)
    mgr.reset(state)
    return (lambda: mgr.step(state)), "compiled (torch.compile)", mgr


def run_size(b: int, device: torch.device, min_time: float) -> dict:
    state = make_state(b, device)
    mgr = build_suite(b, device)
    mgr.reset(state)
    torch_mgr = build_suite(b, device, executor="torch")  # the same suite, the torch executor forced
    torch_mgr.reset(state)
    base = PerSensorBaseline(b, device)
    base.step(state)
    fast, fast_label, fast_mgr = fast_path(b, device, state)
    nbytes = bytes_written_per_step(mgr)
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    row = dict(B=b, fast_label=fast_label, executor=mgr.executor_used)
    for key, fn in (
        ("eager", lambda: mgr.step(state)),
        ("eager_torch", lambda: torch_mgr.step(state)),
        ("fast", fast),
        ("baseline", lambda: base.step(state)),
        ("roofline", lambda: dst.copy_(src)),
        ("floor", floor_step(mgr, src, dst, device)),
    ):
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            before = torch.cuda.memory_allocated(device)
        row[key] = time_it(fn, device, min_time)
        if device.type == "cuda":
            row[f"{key}_peak_bytes"] = torch.cuda.max_memory_allocated(device) - before
    row["roofline_bytes"] = nbytes
    row["state_bytes"] = sg.memory_report(mgr).total
    row["baseline_bytes"] = tensor_bytes(base)
    del fast_mgr
    if device.type == "cpu" and b <= GYM_MAX_B:
        steps = max(10, min(200, 20_000 // b))
        bare, with_sg, with_gym, with_sg_torch = wrapper_overheads(b, steps)
        row["wrap_sg"], row["wrap_gym"] = with_sg - bare, with_gym - bare
        row["wrap_sg_torch"] = with_sg_torch - bare
    return row


def us(x: float) -> str:
    return f"{x * 1e6:,.1f}" if x < 1e-2 else f"{x * 1e6:,.0f}"


def tables(rows: list[dict], device: torch.device) -> str:
    fast_label = rows[0]["fast_label"]
    out = [
        f"### {device.type.upper()}: step time of the standard suite\n",
        "| B | eager executor (auto) | eager µs/step | torch executor µs/step | torch / auto | "
        f"eager steps/s | eager µs/env-step | {fast_label} µs/step | "
        "baseline µs/step | speed-up vs baseline (eager / fast) | roofline µs | eager / roofline | "
        "fast / roofline | floor µs | eager / floor | fast / floor |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['B']} | {r['executor']} | {us(r['eager'])} | {us(r['eager_torch'])} | "
            f"{r['eager_torch'] / r['eager']:.2f}x | {1 / r['eager']:,.0f} | "
            f"{r['eager'] * 1e6 / r['B']:.3f} | "
            f"{us(r['fast'])} | {us(r['baseline'])} | {r['baseline'] / r['eager']:.1f}x / "
            f"{r['baseline'] / r['fast']:.1f}x | {us(r['roofline'])} | {r['eager'] / r['roofline']:.1f}x | "
            f"{r['fast'] / r['roofline']:.1f}x | {us(r['floor'])} | {r['eager'] / r['floor']:.1f}x | "
            f"{r['fast'] / r['floor']:.1f}x |"
        )
    wrap = [r for r in rows if "wrap_gym" in r]
    if wrap:
        out += [
            "\n### Wrapper level: what the sensor layer adds to a SyncVectorEnv step\n",
            "| B | SensorObservation adds µs | the same, torch executor forced, adds µs | Gymnasium wrapper "
            "composition adds µs | ratio (Gymnasium / SensorObservation) |",
            "|---:|---:|---:|---:|---:|",
        ]
        for r in wrap:
            ratio = r["wrap_gym"] / r["wrap_sg"]
            out.append(
                f"| {r['B']} | {us(r['wrap_sg'])} | {us(r['wrap_sg_torch'])} | {us(r['wrap_gym'])} | "
                f"{ratio:.1f}x |"
            )
    out += [
        "\n### Memory\n",
        "| B | sensorgym state bytes/env | baseline bytes/env |"
        + (" eager peak MiB | fast peak MiB | baseline peak MiB |" if device.type == "cuda" else ""),
        "|---:|---:|---:|" + ("---:|---:|---:|" if device.type == "cuda" else ""),
    ]
    for r in rows:
        line = f"| {r['B']} | {r['state_bytes'] / r['B']:,.0f} | {r['baseline_bytes'] / r['B']:,.0f} |"
        if device.type == "cuda":
            line += "".join(f" {r[f'{k}_peak_bytes'] / 2**20:,.1f} |" for k in ("eager", "fast", "baseline"))
        out.append(line)
    return "\n".join(out)


def machine(device: torch.device) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    text = (
        f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"Python {platform.python_version()}, {platform.system()}"
    )
    if device.type == "cuda":
        text += f", GPU {torch.cuda.get_device_name(device)}"
    return text


def plot(rows: list[dict], device: torch.device, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    b = [r["B"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    series = [
        ("eager", "sensorgym eager"),
        ("fast", f"sensorgym {rows[0]['fast_label']}"),
        ("baseline", "per-sensor baseline"),
        ("roofline", "copy roofline"),
    ]
    for key, label in series:
        axes[0].loglog(b, [r[key] * 1e6 for r in rows], "o-", label=label)
        axes[1].loglog(b, [r[key] * 1e6 / r["B"] for r in rows], "o-", label=label)
    wrap = [r for r in rows if "wrap_gym" in r]
    if wrap:
        wb = [r["B"] for r in wrap]
        axes[0].loglog(wb, [r["wrap_gym"] * 1e6 for r in wrap], "s--", label="Gymnasium wrappers (added)")
        axes[0].loglog(wb, [r["wrap_sg"] * 1e6 for r in wrap], "s--", label="SensorObservation (added)")
    axes[0].set(xlabel="envs B", ylabel="µs per step", title=f"standard suite, {device.type}")
    axes[1].set(
        xlabel="envs B", ylabel="µs per env-step", title="cost per env: fixed overhead ends where flat"
    )
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def ant_memory() -> str:
    import sensorgym.envs  # noqa: F401 - registers the envs

    envs = gym.make_vec("sensorgym/AntSensors-v0", num_envs=8)  # a SensorObservation over 8 Ants
    envs.reset(seed=0)
    report = sg.memory_report(envs.manager)
    envs.close()
    return f"Ant reference env (IMU + 4 contacts + 8 encoders): {report}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    p.add_argument("--devices", nargs="+", default=None, help="default: cpu, plus cuda when available")
    p.add_argument("--min-time", type=float, default=0.5, help="seconds of timing per measurement")
    p.add_argument("--out", default="benchmarks/results", help="folder for the .md, .png and .json")
    p.add_argument("--no-sampler", action="store_true", help="skip the sampler-options table")
    p.add_argument("--no-fit", action="store_true", help="skip `sensorgym fit` on a 1-hour log (bench_fit)")
    args = p.parse_args()
    devices = args.devices or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    failed = False
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in devices:
        device = torch.device(name)
        rows = []
        for b in args.sizes:
            rows.append(run_size(b, device, args.min_time))
            sync(device)
            print(f"  {name} B={b}: eager {us(rows[-1]['eager'])} µs", file=sys.stderr, flush=True)
        text = f"Machine: {machine(device)}\n\n{tables(rows, device)}\n"
        sampler_sizes = [b for b in args.sizes if b <= 4096]
        if not args.no_sampler and sampler_sizes:
            sampler_rows = bench_sampler.run(sampler_sizes, device, args.min_time / 2)
            text += f"\n### {bench_sampler.table(sampler_rows, device)}\n"
        if name == "cpu":
            text += f"\n{ant_memory()}\n"
            if not args.no_fit:  # `sensorgym fit` on a 1-hour 200 Hz six-channel log (target: under 30 s)
                import bench_fit  # needs the fit extra (scipy, allantools)

                code, table = bench_fit.run()
                text += f"\n### sensorgym fit, 1 h at 200 Hz, 6 channels\n\n{table}\n"
                failed = failed or code != 0
        print(text)
        (out / f"performance_{name}.md").write_text(text)
        (out / f"results_{name}.json").write_text(json.dumps(rows, indent=1))
        plot(rows, device, out / f"scaling_{name}.png")
        print(f"wrote {out}/performance_{name}.md, scaling_{name}.png, results_{name}.json")
    if failed:
        print("a benchmark missed its target (see above)")
        sys.exit(1)


if __name__ == "__main__":
    main()
