"""The outputs of ``AttitudeSensor`` (:mod:`sensorgym.sensors.mujoco.attitude`), computed from orientations
into the return buffer: :class:`Outputs` (op by op on the class's executor: the reference route, on CUDA or
without numba) and :class:`CompiledFill` (the compiled kernels of
:mod:`~sensorgym.sensors.mujoco.attitude_kernel`, the same bits). Buffers are allocated once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["ORIENTATION", "OUTPUTS", "CompiledFill", "Outputs"]

#: the outputs an AttitudeSensor can read, with their widths
OUTPUTS = {"projected_gravity": 3, "quaternion": 4, "roll_pitch": 2, "bias": 3, "ang_vel": 3}
#: the outputs that carry the orientation (what ``orientation_noise`` perturbs)
ORIENTATION = ("projected_gravity", "quaternion", "roll_pitch")


_FULL = ("projected_gravity", "quaternion", "roll_pitch", "bias", "ang_vel")
_OFFSETS = {name: sum(OUTPUTS[o] for o in _FULL[: _FULL.index(name)]) for name in _FULL}
_FULL_WIDTH = sum(OUTPUTS.values())


class CompiledFill:
    """The compiled outputs (:mod:`~sensorgym.sensors.mujoco.attitude_kernel`): the kernels, the plan of
    output blocks ``(output, sensor, first column)``, what makes their calls' tables (:meth:`table`), and
    where roll/pitch's arguments (``ang``: the table's first 3 rows) and angles (``angles``: its next 2)
    go."""

    def __init__(self, md: Any, table: torch.Tensor) -> None:
        from .attitude_kernel import entry, fill, scatter, truth_outputs

        self.fill, self.truth, self.scatter, self.entry = fill, truth_outputs, scatter, entry
        self.n = len(md.sensors)
        plan, col = [], 0
        for j, s in enumerate(md.sensors):
            for o in s.options.outputs:
                plan.append((_FULL.index(o), j, col))
                col += OUTPUTS[o]
        self.plan = np.array(plan, dtype=np.int64).reshape(-1, 3)
        self.view(table)

    def view(self, table: torch.Tensor) -> None:
        """Where in ``table`` (the outputs' ``(15, B n)`` rows) roll/pitch's arguments and angles go; again
        by the table's owner after a copy (a numpy view copied along would be an array of its own)."""
        self.ang, self.angles = table.numpy()[:3], table[3:5]
        self.angles_host = table.numpy()[3:5]

    def table(self, data: torch.Tensor, out: np.ndarray, bias: np.ndarray, *estimator: Any) -> Any:
        """A kernel's :class:`~sensorgym.sensors.mujoco.attitude_kernel.Table` for the branch buffer
        ``data`` ``(B, 9 n)`` (read as a flat view from its first element to its last, with the distance
        between its rows: it may be a column block of a wider buffer), the slot ``out`` and the bias rows
        ``bias``; ``estimator``: the estimator's storage, constants, take mask and whether it applies. None
        where a buffer is not what the kernels view (then the op route runs)."""
        from .attitude_kernel import Table

        b, width = data.shape
        w = data.stride(0)
        x = data.as_strided(((b - 1) * w + width,), (1,)).numpy()
        try:
            return Table(x, w, self.plan, self.n, out, self.ang, bias, *estimator)
        except ValueError:  # e.g. a subclass's float64 buffers: the op route runs them
            return None


class Outputs:
    """Every output of a class's sensors, computed into one ``(15, B n)`` table of rows (projected gravity
    3, quaternion 4, roll/pitch 2, bias 3, angular velocity 3; only the rows some sensor reads) and
    gathered into the return buffer ``(B, return cols)`` in one op; buffers allocated once."""

    def __init__(self, md: Any, ops: Any) -> None:
        b, n = md.num_envs, len(md.sensors)
        self.ops, self.array = ops, md.array
        self.numpy = md.binding.name == "numpy"  # the executor whose atan2, asin and take run
        wanted = {o for s in md.sensors for o in s.options.outputs}
        self.wanted = [name for name in _FULL if name in wanted]
        self.angles = "roll_pitch" in wanted  # the compiled route finishes them (finish_angles)
        self.true_bias = "bias" in wanted  # the ground truth sums the gyroscope's bias error each step
        self.table = torch.zeros(_FULL_WIDTH, b * n, dtype=torch.float32, device=md.device)
        self.scratch = torch.zeros(4, b * n, dtype=torch.float32, device=md.device)
        cols = []
        for j, s in enumerate(md.sensors):
            for o in s.options.outputs:
                cols += [(_OFFSETS[o] + k) * b * n + j for k in range(OUTPUTS[o])]
        flat = torch.tensor(cols, dtype=torch.long).view(1, -1) + n * torch.arange(b).view(-1, 1)
        self.index = flat.reshape(-1).to(md.device)
        # orientation_noise: one standard deviation per return column (0 off the orientation outputs)
        std = [s.options.orientation_noise * (o in ORIENTATION) for s in md.sensors for o in s.options.outputs
               for _ in range(OUTPUTS[o])]  # fmt: skip
        self.noise_std = torch.tensor(std, dtype=torch.float32, device=md.device).expand(b, -1)
        self.noise = torch.zeros(b, len(cols), dtype=torch.float32, device=md.device) if any(std) else None
        # laid out as the true bias rows are ((3, B n), a column stride of 3): one compiled kernel serves both
        self.zero_bias = torch.zeros(b * n, 3, dtype=torch.float32, device=md.device).T
        #: the compiled route (attitude_kernel) on CPU memory where numba is there; else the ops below
        self.compiled = CompiledFill(md, self.table) if _kernel(md.device) is not None else None
        self._views: dict[tuple, tuple] = {}
        self._host: dict[tuple, tuple] = {}  # per (q, bias, data, out): their host arrays (see fill)

    def __getstate__(self) -> dict:
        """A copy makes its own views (those cached here view the original's memory)."""
        return {**self.__dict__, "_views": {}, "_host": {}}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.compiled is not None:
            self.compiled.view(self.table)

    def _view(self, t: torch.Tensor, host: bool) -> Any:
        """``t`` as a numpy array (``host``: for the kernel) or an array of the executor; made once per
        tensor (the tensors passed are the state's and the buffers' own views, which persist)."""
        key = (id(t), host)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = (t.numpy() if host else self.array(t), t)
        return view[0]

    def finish_angles(self, out: np.ndarray) -> None:
        """After the compiled fill into ``out`` (a numpy view of the slot), where a sensor reads roll/pitch:
        their ``atan2`` and ``asin`` by the executor's own functions on the arguments the kernel left,
        placed in their columns."""
        c, view = self.compiled, self._view
        a, angles = view(self.table, False), view(c.angles, False)
        _atan2(self.numpy, a[0], a[1], angles[0])
        _asin(self.numpy, a[2], angles[1])
        c.scatter(c.angles_host, c.plan, c.n, out)

    def _compiled_call(
        self, q: torch.Tensor, bias: torch.Tensor, data: torch.Tensor, out: torch.Tensor
    ) -> Any:
        """``(q, table, out)`` as the compiled fill reads them, or None where the op route runs (a slot or
        orientation rows not float32 in C order: the kernel views them from their addresses)."""
        if not (out.is_contiguous() and q.is_contiguous()) or q.dtype != torch.float32:
            return None
        out_np = self._view(out, True)
        table = self.compiled.table(data, out_np, self._view(bias, True))
        return None if table is None else (self._view(q, True), table, out_np)

    def _gyro_rows(self, data: torch.Tensor) -> torch.Tensor:
        """The gyroscope samples of ``data`` ``(B, 9 n)`` as a ``(B n, 3)`` view (made once per buffer)."""
        rows = self._views.get(("gyro", id(data)))
        if rows is None:
            b, n = data.shape[0], data.shape[1] // 9
            rows = self._views[("gyro", id(data))] = (data.view(b, n, 9)[..., 3:6].reshape(b * n, 3), data)
        return rows[0]

    def fill(
        self, q: torch.Tensor, bias: torch.Tensor, data: torch.Tensor, out: torch.Tensor
    ) -> torch.Tensor:
        """The outputs from the orientations ``q`` ``(4, B n)``, biases ``(3, B n)`` and the branch's samples
        ``data`` ``(B, 9 n)`` (views of the state and the working buffers) into ``out`` ``(B, return
        columns)`` (the ring's slot: nothing to copy after); returns ``out``."""
        view = self._view
        if self.compiled is not None:
            # this call's host arrays and table, made once per combination (a branch's q, bias and samples
            # are fixed; out is one of its ring's slots); None where the slot is not one block of memory
            key = (id(q), id(bias), id(data), id(out))
            host = self._host.get(key, False)
            if host is False:
                host = self._host[key] = self._compiled_call(q, bias, data, out)
            if host is not None:
                q_np, table, out_np = host
                self.compiled.fill(q_np, table.table)
                if self.angles:
                    self.finish_angles(out_np)
                return out
        gyr = self._gyro_rows(data)
        q, bias, gyr = view(q, False), view(bias, False), view(gyr, False).T
        ops, t, sc = self.ops, view(self.table, False), view(self.scratch, False)
        for name in self.wanted:
            at = _OFFSETS[name]
            if name == "projected_gravity":  # R(q)^T [0, 0, -1]
                ops.mul(q[0], q[2], sc[0])
                ops.mul(q[1], q[3], sc[1])
                ops.sub(sc[0], sc[1], t[at])
                ops.mul(t[at], 2.0, t[at])
                ops.mul(q[2], q[3], sc[0])
                ops.mul(q[0], q[1], sc[1])
                ops.add(sc[0], sc[1], t[at + 1])
                ops.mul(t[at + 1], -2.0, t[at + 1])
                ops.mul(q, q, sc)
                ops.add(sc[1], sc[2], t[at + 2])
                ops.sub(t[at + 2], sc[0], t[at + 2])
                ops.sub(t[at + 2], sc[3], t[at + 2])
            elif name == "quaternion":
                ops.copyto(t[at : at + 4], q)
            elif name == "roll_pitch":
                ops.mul(q[0], q[1], sc[0])
                ops.mul(q[2], q[3], sc[1])
                ops.add(sc[0], sc[1], sc[0])
                ops.mul(sc[0], 2.0, sc[0])  # 2 (q0 q1 + q2 q3)
                ops.mul(q[1], q[1], sc[1])
                ops.mul(q[2], q[2], sc[2])
                ops.add(sc[1], sc[2], sc[1])
                ops.mul(sc[1], -2.0, sc[1])
                ops.add(sc[1], 1.0, sc[1])  # 1 - 2 (q1^2 + q2^2)
                _atan2(self.numpy, sc[0], sc[1], t[at])
                ops.mul(q[0], q[2], sc[0])
                ops.mul(q[1], q[3], sc[1])
                ops.sub(sc[0], sc[1], sc[0])
                ops.mul(sc[0], 2.0, sc[0])
                ops.clip(sc[0], -1.0, 1.0, sc[0])
                _asin(self.numpy, sc[0], t[at + 1])
            elif name == "bias":
                ops.copyto(t[at : at + 3], bias)
            else:
                ops.copyto(t[at : at + 3], gyr)
        if out.dtype != torch.float32 or not out.is_contiguous():  # a subclass's dtype, or a strided slot:
            out.copy_(self.table.view(-1)[self.index].view(out.shape))  # a gather that allocates (rare)
        elif self.numpy:
            np.take(t.reshape(-1), view(self.index, False), out=view(out, False).reshape(-1))
        else:
            torch.index_select(self.table.view(-1), 0, self.index, out=out.view(-1))
        return out


def _atan2(numpy: bool, y: Any, x: Any, out: Any) -> None:
    if numpy:
        np.arctan2(y, x, out=out)
    else:
        torch.atan2(y, x, out=out)


def _asin(numpy: bool, x: Any, out: Any) -> None:
    if numpy:
        np.arcsin(x, out=out)
    else:
        torch.asin(x, out=out)


def _kernel(device: torch.device) -> Any:
    """Whether the compiled fill can run: CPU memory, numba importable and compiling (``NUMBA_DISABLE_JIT``
    runs njit functions as Python, where the kernels' intrinsics cannot run), kernels on
    (else None)."""
    from ...estimators import dispatch

    if torch.device(device).type != "cpu" or not dispatch.enabled or not dispatch.kernels_available():
        return None
    from numba.core import config

    return None if config.DISABLE_JIT else True
