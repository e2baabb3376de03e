"""The default hardware-imperfection kernel of :class:`~sensorgym.SimpleSensor`.

Order (SPEC 2.5): random walk, noise, bias, resolution. It runs on the per-step working buffer, a copy of
the measured timeline slot, so imperfections are frozen into the snapshot captured this step and never
compound through a recurrent ``_apply_transform``. The standard-normal draws (``md.noise_draw``,
``md.random_walk_draw``) were made by the manager for the whole dtype buffer in one call.

Example:
    >>> import torch
    >>> from sensorgym.core.imperfections import quantize_
    >>> x = torch.tensor([[0.25, 0.75, 1.25]])
    >>> r = torch.tensor([[0.5, 0.5, 0.0]])
    >>> quantize_(x, torch.where(r > 0, r, 1.0), r > 0, torch.empty_like(x)).tolist()
    [[0.0, 1.0, 1.25]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .metadata import SensorMetadata

__all__ = ["apply_default_hardware_imperfections", "quantize_"]


def quantize_(
    data: torch.Tensor, safe_step: torch.Tensor, active: torch.Tensor, scratch: torch.Tensor
) -> torch.Tensor:
    """``data = round(data / r) * r`` (half to even) where ``active``; in place, no allocation."""
    torch.div(data, safe_step, out=scratch)
    scratch.round_()
    scratch.mul_(safe_step)
    return torch.where(active, scratch, data, out=data)


def apply_default_hardware_imperfections(md: SensorMetadata, data: torch.Tensor) -> None:
    """Random walk, noise, bias and resolution on ``data`` ``(B, icols)`` in place."""
    if md.compiled:
        from .accel import fused_imperfections

        fused_imperfections(md, data)
        return
    # Products are rounded before the add (no fused multiply-add as in addcmul): the numbers are then the
    # same on every CPU and GPU, with or without FMA units, and in the compiled kernel (sensorgym.core.accel).
    if md.has_random_walk:
        walk = md.random_walk_state
        walk.add_(torch.mul(md.random_walk_draw, md.random_walk, out=md.scratch))
        if md.reset_mask is not None:
            # the snapshot captured at a reset shows zero drift
            walk.masked_fill_(md.reset_mask[:, None], 0.0)
        data.add_(walk)
    if md.has_noise:
        data.add_(torch.mul(md.noise_draw, md.noise, out=md.scratch))
    if md.has_bias:
        data.add_(md.bias)
    if md.resolution_all_active:
        data.div_(md.resolution).round_().mul_(md.resolution)
    elif md.has_resolution:
        quantize_(data, md.resolution_step, md.resolution_active, md.scratch)
