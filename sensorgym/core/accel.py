"""Optional acceleration of the manager step: CUDA-graph capture of the whole step (and where the
``torch.compile`` kernel lives).

**Compiled kernel** (``SensorManager(..., compile=True)``): the default hardware imperfections of a
class (random walk, noise, bias, resolution: up to eight elementwise passes over ``(B, cols)``) become
one fused kernel: :func:`sensorgym.core.terms.run_plan` over the class's plan of terms, the function the
eager step runs too, wrapped by ``torch.compile`` at build (:mod:`sensorgym.core.error_model`). The
numbers are the same as the eager step, bit for bit.
A class whose intermediate dtype is float16 or bfloat16 keeps the eager kernel: inductor computes those
in float32 and rounds once, where the eager operations round after each step.

**CUDA graphs** (:meth:`SensorManager.capture_cuda_graph`): the step has no host-device sync and no
data-dependent Python branch, but it does index rings by the host clock (``t % depth``). One graph per
clock phase, ``L = lcm(ring depths)`` graphs, covers every step: replay ``k`` is the step at
``t % L == k``. State and reset mask are copied into static input buffers, then the graph of the
current phase is replayed and the host clock advanced. Requirements: CUDA device, custom hooks free of
host syncs, no ``nan_policy="raise"``, no ``per_env_rng``. It uses the manager's public methods only.

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

from .rows import env_mask

if TYPE_CHECKING:
    from .protocols import ManagerHandle as SensorManager

__all__ = ["CapturedStep", "ring_depths"]


def ring_depths(manager: SensorManager) -> list[int]:
    """Depths of every ring a step of ``manager`` indexes by the clock."""
    classes = dict.fromkeys(type(s) for s in manager.sensors)
    return [d for cls in classes for d in manager.storage(cls).ring_depths()]


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
        if not manager.is_built:
            raise RuntimeError(
                "capture_cuda_graph() before the manager was built. Fix: call mgr.reset(state) first."
            )
        if any(s.options.nan_policy == "raise" for s in manager.sensors):
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
        self.period = math.lcm(1, *ring_depths(manager))
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
            if register is not None and mgr.random.generator.device.type == "cuda":
                register(mgr.random.generator)
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
            mask = env_mask(reset_mask, self.manager.num_envs, self.manager.device, "reset_mask")
            self.static_mask.copy_(mask, non_blocking=True)
        mgr = self.manager
        graph = self.graphs[(mgr.clock.t - self.t0) % self.period]  # captured at this clock phase
        mgr.clock.tick()
        graph.replay()  # it advances the episode steps and zeroes those of reset envs on the device
