"""Optional acceleration of the manager step: a ``torch.compile``-fused hardware-imperfection kernel and
CUDA-graph capture of the whole step.

**Compiled kernel** (``SensorManager(..., compile=True)``): the default hardware imperfections of a
class (random walk, noise, bias, resolution: up to eight elementwise passes over ``(B, cols)``) become
one fused kernel. The numbers are the same as the eager step, bit for bit (the standard-normal draws
are still made by the manager; the kernel only does the arithmetic, in the same order).

**CUDA graphs** (:meth:`SensorManager.capture_cuda_graph`): the step has no host-device sync and no
data-dependent Python branch, but it does index rings by the host clock (``t % depth``). One graph per
clock phase, ``L = lcm(ring depths)`` graphs, covers every step: replay ``k`` is the step at
``t % L == k``. State and reset mask are copied into static input buffers, then the graph of the
current phase is replayed and the host clock advanced. Requirements: CUDA device, custom hooks free of
host syncs, no ``nan_policy="raise"``, no ``per_env_rng``.

Example (compiled kernel; CPU works too, the first step compiles):
    >>> import torch, sensorgym as sg
    >>> mgr = sg.SensorManager(num_envs=4, dt=0.02, seed=0, compile=True)
    >>> _ = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(3,), noise=0.1, resolution=0.01))
    >>> mgr.reset({"x": torch.zeros(4, 3)})  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from .manager import SensorManager
    from .metadata import SensorMetadata

__all__ = ["CapturedStep", "fused_imperfections"]


def _imperfections(
    data: torch.Tensor,
    walk: torch.Tensor | None,
    walk_draw: torch.Tensor | None,
    walk_std: torch.Tensor | None,
    reset_rows: torch.Tensor | None,
    noise_draw: torch.Tensor | None,
    noise_std: torch.Tensor | None,
    bias: torch.Tensor | None,
    res_step: torch.Tensor | None,
    res_active: torch.Tensor | None,
) -> None:
    """The default imperfections out of place, written back once (same op order as the eager kernel)."""
    x = data
    if walk is not None:
        w = walk + walk_draw * walk_std
        if reset_rows is not None:
            w = w.masked_fill(reset_rows[:, None], 0.0)
        walk.copy_(w)
        x = x + w
    if noise_draw is not None:
        x = x + noise_draw * noise_std
    if bias is not None:
        x = x + bias
    if res_step is not None:
        q = (x / res_step).round() * res_step
        x = q if res_active is None else torch.where(res_active, q, x)
    data.copy_(x)


_compiled: Any = None


def fused_imperfections(md: SensorMetadata, data: torch.Tensor) -> None:
    """The compiled form of :func:`sensorgym.core.imperfections.apply_default_hardware_imperfections`."""
    global _compiled
    if _compiled is None:
        import torch._dynamo

        # one graph per combination of present imperfections and reset/no-reset, per class shape
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        _compiled = torch.compile(_imperfections, dynamic=False, fullgraph=True)
    rw, noise = md.has_random_walk, md.has_noise
    if md.resolution_all_active:
        res_step, res_active = md.resolution, None
    elif md.has_resolution:
        res_step, res_active = md.resolution_step, md.resolution_active
    else:
        res_step = res_active = None
    _compiled(
        data,
        md.random_walk_state if rw else None,
        md.random_walk_draw if rw else None,
        md.random_walk if rw else None,
        md.reset_mask if rw else None,
        md.noise_draw if noise else None,
        md.noise if noise else None,
        md.bias if md.has_bias else None,
        res_step,
        res_active,
    )


# -- CUDA graphs -----------------------------------------------------------------------------------------
def _ring_depths(manager: SensorManager) -> list[int]:
    depths = []
    for group in manager._groups.values():
        if group.gt_timeline is not None:
            depths.append(group.gt_timeline.depth)
    for st in manager._stores.values():
        for ring in (st.gt_ring, st.m_ring, st.hist):
            if ring is not None:
                depths.append(ring.depth)
        if st.sampler is not None and st.sampler.sample_ring is not None:
            depths.append(st.sampler.sample_ring.depth)
    return depths


class CapturedStep:
    """``step(state, reset_mask=None)`` of a manager, replayed from CUDA graphs (see the module docstring).

    Built by :meth:`SensorManager.capture_cuda_graph`; equal to the eager step bit for bit.

    Example (needs CUDA):
        >>> import torch, sensorgym as sg
        >>> mgr = sg.SensorManager(num_envs=4096, dt=0.02, device="cuda", seed=0)  # doctest: +SKIP
        >>> opts = sg.StateSensorOptions(key="x", shape=(3,), noise=0.1, delay=0.04)
        >>> _ = mgr.add_sensor(opts)  # doctest: +SKIP
        >>> state = {"x": torch.zeros(4096, 3, device="cuda")}  # doctest: +SKIP
        >>> mgr.reset(state)  # doctest: +SKIP
        >>> step = mgr.capture_cuda_graph(state)  # doctest: +SKIP
        >>> step(state)  # doctest: +SKIP
    """

    def __init__(self, manager: SensorManager, state: Mapping[str, torch.Tensor]) -> None:
        if manager.device.type != "cuda" or not torch.cuda.is_available():
            raise RuntimeError(
                f"capture_cuda_graph: the manager is on {manager.device}; CUDA graphs need a CUDA device. "
                "Fix: SensorManager(..., device='cuda'), or use compile=True on CPU."
            )
        manager._require_built("capture_cuda_graph()")
        if manager._any_raise:
            raise ValueError(
                "capture_cuda_graph: nan_policy='raise' checks values on the host every step, which a graph "
                "cannot do. Fix: use nan_policy='hold' or 'propagate' for captured steps."
            )
        from .rng import PerEnvRandom

        if isinstance(manager.random, PerEnvRandom):
            raise ValueError(
                "capture_cuda_graph: per_env_rng=True loops over envs on the host. Fix: per_env_rng=False."
            )
        self.manager = manager
        self.static_state: dict[str, torch.Tensor] = {}
        for key, value in state.items():
            if not torch.is_tensor(value) or value.device != manager.device:
                where = f" on {value.device}" if torch.is_tensor(value) else ""
                raise TypeError(
                    f"capture_cuda_graph: state[{key!r}] must be a tensor on {manager.device}, got "
                    f"{type(value).__name__}{where}. Fix: move the state to the manager's device."
                )
            self.static_state[key] = value.clone()
        self.static_mask = torch.zeros(manager.num_envs, dtype=torch.bool, device=manager.device)
        self.period = math.lcm(1, *_ring_depths(manager))
        self.graphs: list[torch.cuda.CUDAGraph] = []
        self._capture()

    def _capture(self) -> None:
        mgr = self.manager
        saved = mgr.state_dict()
        stream = torch.cuda.Stream(device=mgr.device)
        stream.wait_stream(torch.cuda.current_stream(mgr.device))
        with torch.cuda.stream(stream):  # warm-up outside capture (lazy inits, compiled kernels)
            for _ in range(3):
                mgr.step(self.static_state, reset_mask=self.static_mask)
        torch.cuda.current_stream(mgr.device).wait_stream(stream)
        mgr.load_state_dict(saved)
        self.t0 = t0 = mgr.clock.t
        pool = None
        for _ in range(self.period):
            graph = torch.cuda.CUDAGraph()
            register = getattr(graph, "register_generator_state", None)
            if register is not None and mgr.generator.device.type == "cuda":
                register(mgr.generator)
            with torch.cuda.graph(graph, pool=pool):
                mgr.step(self.static_state, reset_mask=self.static_mask)  # ticks the host clock
            pool = graph.pool()
            self.graphs.append(graph)
        mgr.clock.t = t0  # capture records work without running it: only the host clock moved

    def __call__(self, state: Mapping[str, Any], reset_mask: torch.Tensor | None = None) -> None:
        """One step: the same as ``manager.step(state, reset_mask)``, replayed."""
        for key, buf in self.static_state.items():
            buf.copy_(state[key], non_blocking=True)
        if reset_mask is None:
            self.static_mask.zero_()
        else:
            self.static_mask.copy_(self.manager._to_mask(reset_mask, "reset_mask"), non_blocking=True)
        mgr = self.manager
        graph = self.graphs[(mgr.clock.t - self.t0) % self.period]  # captured at this clock phase
        mgr.clock.tick()
        graph.replay()
        # the graph wrote the clock value of its capture: the episode start of a reset env is now
        mgr.episode_start.masked_fill_(self.static_mask, mgr.clock.t)
