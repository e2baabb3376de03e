"""Which env rows a capture touches: masks from user input, and the copies that undo a capture for the rows
it must not change (a partial reset, or a step that fails half-way).

Example:
    >>> import torch
    >>> from sensorgym.core.rows import Rollback, env_mask
    >>> x = torch.tensor([[1.0], [2.0], [3.0]])
    >>> rollback = Rollback()
    >>> rollback.save([x])
    >>> x.fill_(0.0)  # a capture writes every row ...
    tensor([[0.],
            [0.],
            [0.]])
    >>> rollback.restore([x], keep_new=env_mask([1], 3, torch.device("cpu")))  # ... env 1 keeps it
    >>> x.flatten().tolist()
    [1.0, 0.0, 3.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["Rollback", "env_mask", "folded_seed", "known_empty"]


def known_empty(envs: Any) -> bool:
    """True when ``envs`` (a mask or indices) selects no env and saying so costs no device sync.

    Masks on the host are checked; a mask on an accelerator is passed on untouched, so the step stays
    free of host-device synchronisation (the masked work then simply selects nothing).
    """
    if envs is None:
        return True
    if torch.is_tensor(envs):
        if envs.device.type != "cpu":
            return False
        return not bool(envs.any()) if envs.dtype == torch.bool else envs.numel() == 0
    arr = np.asarray(envs)
    return not np.count_nonzero(arr) if arr.dtype == bool else arr.size == 0


def env_mask(envs_idx: Any, num_envs: int, device: torch.device, what: str = "envs_idx") -> torch.Tensor:
    """``(B,)`` bool mask on ``device`` from a bool mask, a 0/1 done vector or env indices; a
    ``ValueError``/``TypeError`` naming ``what``, the value and the fix for anything else.

    How integers are read, so that no input is silently misread:

    * ``what="reset_mask"`` (a step's autoreset mask, by nature a done vector): an integer vector of shape
      ``(B,)`` holding only 0 and 1 with a repeated value can only be a done vector (rsl_rl and Isaac Lab
      hand over ``dones`` as integers): a mask; one that reads both ways (only possible with 1 or 2 envs:
      ``[0]``, ``[0, 1]``, ``[1, 0]``) is refused: pass a bool mask;
    * any other integers (and every integer ``envs_idx``: env indices, as ``reset`` and the setters
      document) are env indices; an index given twice is refused (so a done vector passed as indices is
      refused with the fix, not misread).

    A bool mask on an accelerator is passed on untouched (no device sync); integers are checked on the
    host.
    """
    b = num_envs
    if torch.is_tensor(envs_idx):
        t = envs_idx
    else:
        arr = np.asarray(envs_idx)
        if arr.dtype == object or not (
            arr.dtype == bool or np.issubdtype(arr.dtype, np.integer) or arr.size == 0
        ):
            raise TypeError(
                f"{what}={envs_idx!r}: expected a bool mask of shape ({b},) or env indices. Fix: "
                "pass e.g. np.array([True, False, ...]) or [0, 3] (a float done vector: dones.astype(bool))."
            )
        t = torch.from_numpy(arr.astype(np.int64) if arr.size == 0 else arr)
    if t.dtype == torch.bool:
        if t.shape != (b,):
            raise ValueError(
                f"{what}: bool mask has shape {tuple(t.shape)} but num_envs={b}. Fix: pass a mask "
                f"of shape ({b},)."
            )
        return t if t.device == device else t.to(device)  # runs at every autoreset: no needless call
    if t.dtype.is_floating_point or t.dtype.is_complex:
        raise TypeError(
            f"{what}={_shown(t)}: env indices must be integers, got dtype {t.dtype}. Fix: pass a bool "
            "mask (a float done vector: dones.bool()) or integer env indices."
        )
    values = t.detach().reshape(-1).to("cpu", torch.long)
    if what == "reset_mask" and values.numel() == b and bool(((values == 0) | (values == 1)).all()):
        if int(torch.unique(values).numel()) < b:  # a repeated 0/1: only a done vector reads so
            return (t.reshape(-1) != 0).to(device)
        raise ValueError(
            f"{what}={_shown(t)} is ambiguous with num_envs={b}: as env indices it selects envs "
            f"{values.tolist()}, as a 0/1 done vector envs {torch.nonzero(values).flatten().tolist()}. "
            f"Fix: pass a bool mask of shape ({b},), e.g. np.array({(values != 0).tolist()}) for the done "
            "vector (dones.bool())."
        )
    if values.numel() and (int(values.min()) < 0 or int(values.max()) >= b):
        raise ValueError(
            f"{what}: env indices {values.tolist()} out of range for num_envs={b}. Fix: use indices in "
            f"[0, {b - 1}], or a bool mask of shape ({b},)."
        )
    if int(torch.unique(values).numel()) < values.numel():
        repeated = sorted({v for v in values.tolist() if values.tolist().count(v) > 1})
        raise ValueError(
            f"{what}={_shown(t)}: env index(es) {repeated} given more than once. Fix: give each env once, "
            f"or pass a bool mask of shape ({b},) (a 0/1 done vector: dones.bool())."
        )
    mask = torch.zeros(b, dtype=torch.bool, device=device)
    mask[values.to(device)] = True
    return mask


def _shown(t: torch.Tensor) -> str:
    """A short form of an index/mask argument for an error message."""
    flat = t.detach().reshape(-1).cpu()
    return str(flat[:16].tolist())[:-1] + (", ...]" if flat.numel() > 16 else "]")


def folded_seed(seeds: list[int], rows: list[int], generator_state: torch.Tensor) -> int:
    """The new seed of a generator shared by every env when ``reset(seed=...)`` resets only ``rows``.

    Gymnasium seeds only the masked sub-envs. One generator cannot be reseeded for some envs alone, and
    reseeding it whole would replay the same numbers for the envs that go on (a constant seed in a loop
    of partial resets repeats their noise). So the seed is folded into the stream instead: the new seed
    is derived from the given seeds, the envs reset and the generator's current state. Deterministic
    (same seeds, same calls: same numbers), and the seed still matters, but nothing replays.

    Example:
        >>> import torch
        >>> g = torch.Generator().manual_seed(0)
        >>> a = folded_seed([7], [1], g.get_state())
        >>> a == folded_seed([7], [1], torch.Generator().manual_seed(0).get_state())  # deterministic
        True
        >>> _ = torch.rand(1, generator=g)  # the stream moved on: the same call gives another seed
        >>> a == folded_seed([7], [1], g.get_state())
        False
    """
    state = generator_state.detach().cpu().contiguous().view(torch.uint8).numpy()
    words = np.frombuffer(state.tobytes() + bytes(-len(state) % 4), dtype=np.uint32)
    entropy = [int(s) % (1 << 64) for s in seeds] + [len(seeds), *rows, len(rows), *words.tolist()]
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0] >> np.uint64(1))


class Rollback:
    """Copies of the rows a capture writes, to undo it: for the envs a reset does not touch, or
    everything when a step fails half-way (``nan_policy="raise"``). The copies are reused from call to
    call (allocated again only when the set of tensors changes)."""

    def __init__(self) -> None:
        self.saved: list[Any] = []
        self.arrays: list[np.ndarray] | None = None  # numpy views of the tensors saved (numpy executor)
        #: whether every step saves (a sensor raises on non-finite values: a failed step is undone)
        self.every_step = False

    def save(self, tensors: list[torch.Tensor], arrays: list[np.ndarray] | None = None) -> None:
        """Copy ``tensors``; ``arrays`` (numpy views of them, on the numpy executor): copy those instead,
        with numpy (a torch op per tensor costs several times more, inside an env loop)."""
        self.arrays = arrays
        sources = tensors if arrays is None else arrays
        if len(self.saved) != len(sources) or any(
            type(a) is not type(b) or a.shape != b.shape or a.dtype != b.dtype
            for a, b in zip(self.saved, sources, strict=True)
        ):
            empty = torch.empty_like if arrays is None else np.empty_like
            self.saved = [empty(t) for t in sources]
        for dst, src in zip(self.saved, sources, strict=True):
            if arrays is None:
                dst.copy_(src)
            else:
                np.copyto(dst, src)

    def restore(self, tensors: list[torch.Tensor], keep_new: torch.Tensor) -> None:
        """Put the saved values back into ``tensors`` except in the env rows ``keep_new``."""
        if self.arrays is not None:  # saved through numpy views: put the rows back the same way
            rows = ~keep_new.numpy()
            for cur, old in zip(self.arrays, self.saved, strict=True):
                cur[rows] = old[rows]
            return
        for cur, old in zip(tensors, self.saved, strict=True):
            rows = keep_new.view(-1, *([1] * (cur.dim() - 1)))
            torch.where(rows, cur, old, out=cur)
