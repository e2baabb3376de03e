"""Benchmark of ``SensorManager.step`` on the standard suite (see benchmarks/suite.py).

For each batch size B it measures, in the same run:
  * sensorgym: ``mgr.step(state)`` for the 12-sensor suite;
  * baseline: the same suite as 12 independent Isaac-Lab-style observation terms;
  * roofline: one ``copy_`` of as many bytes as the pipeline must write per step;
and prints steps/s, microseconds per step, the speed-up over the baseline and the ratio to the roofline,
plus the RNG floor (drawing just the random numbers the suite needs, which any implementation pays) and
the number of tensor allocations per steady-state step (counted with the torch profiler's memory events).

Usage:
    python benchmarks/bench_manager.py                 # CPU, B in {1, 64, 1024, 4096, 16384}
    python benchmarks/bench_manager.py --device cuda   # when a GPU is present
    python benchmarks/bench_manager.py --sizes 1 64 --min-time 0.2
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from suite import PerSensorBaseline, build_suite, make_state


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_it(fn, device: torch.device, min_time: float) -> float:
    """Seconds per call: warm up, then repeat until ``min_time`` has passed; best of 3 rounds."""
    for _ in range(5):
        fn()
    sync(device)
    best = float("inf")
    for _ in range(3):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            if n % 10 == 0:
                sync(device)
                if time.perf_counter() - start > min_time / 3:
                    break
        best = min(best, (time.perf_counter() - start) / n)
    return best


def bytes_written_per_step(mgr) -> int:
    """Bytes the pipeline must write each step: timeline slots (GT + measured), working buffer,
    return-ring slots, caches and history slots of every class."""
    total = 0
    for st in (mgr.storage(cls) for cls in dict.fromkeys(type(s) for s in mgr.sensors)):
        b = mgr.num_envs
        icols = st.columns.stop - st.columns.start
        isize = st.group.dtype.itemsize
        total += 3 * b * icols * isize  # GT + measured timeline slot, working buffer
        cache = st.measured.cache  # (B, return columns) of the class's return dtype
        rsize = cache.element_size() * b * cache.shape[1]
        for ring in (st.gt.ring, st.measured.ring, st.measured.history):
            if ring is not None:
                total += rsize
        if not st.gt.is_alias:
            total += rsize
        if not st.measured.is_alias:
            total += rsize
    return total


def count_allocations(mgr, state, steps: int = 20) -> float:
    """Tensor allocations per step in steady state, from the profiler's memory events."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(5):
        mgr.step(state)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(steps):
            mgr.step(state)
    allocs = [e for e in prof.events() if e.name == "[memory]" and e.cpu_memory_usage > 0]
    return len(allocs) / steps


def run(sizes, device: torch.device, min_time: float) -> list[dict]:
    rows = []
    for b in sizes:
        state = make_state(b, device)
        mgr = build_suite(b, device)
        mgr.reset(state)
        base = PerSensorBaseline(b, device)
        base.step(state)
        nbytes = bytes_written_per_step(mgr)
        src = torch.empty(nbytes, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        t_sg = time_it(lambda m=mgr, s=state: m.step(s), device, min_time)
        t_base = time_it(lambda m=base, s=state: m.step(s), device, min_time)
        t_copy = time_it(lambda d=dst, s=src: d.copy_(s), device, min_time)
        normals = torch.empty(2, b, 3 * 4, device=device)  # noise + random walk of the IMU class
        uniforms = torch.empty(2, b, 4, device=device)  # jitter of the IMU class
        gen = torch.Generator(device=device)

        def draw(n=normals, u=uniforms, g=gen):
            n.normal_(generator=g)
            u.uniform_(generator=g)

        t_rng = time_it(draw, device, min_time)
        allocs = count_allocations(mgr, state) if device.type == "cpu" else float("nan")
        rows.append(dict(B=b, sg=t_sg, base=t_base, copy=t_copy, bytes=nbytes, allocs=allocs, rng=t_rng))
    return rows


def table(rows, device: torch.device) -> str:
    head = (
        "| B | sensorgym steps/s | sensorgym µs/step | baseline µs/step | speed-up vs baseline | "
        "roofline µs (bytes) | sensorgym / roofline | RNG floor µs | allocs/step |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r['B']} | {1 / r['sg']:,.0f} | {r['sg'] * 1e6:,.1f} | {r['base'] * 1e6:,.1f} | "
            f"{r['base'] / r['sg']:.1f}x | {r['copy'] * 1e6:,.1f} ({r['bytes']:,}) | "
            f"{r['sg'] / r['copy']:.1f}x | {r['rng'] * 1e6:,.1f} | {r['allocs']:.1f} |"
        )
    machine = (
        f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {device}"
    )
    if device.type == "cuda":
        machine += f" ({torch.cuda.get_device_name()})"
    return f"Standard suite, {machine}\n\n" + "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 1024, 4096, 16384])
    p.add_argument("--min-time", type=float, default=0.6, help="seconds of timing per measurement")
    args = p.parse_args()
    device = torch.device(args.device)
    print(table(run(args.sizes, device, args.min_time), device))


if __name__ == "__main__":
    main()
