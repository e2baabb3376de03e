"""A slow reference of the sensor pipeline, written from SPEC 2.3-2.5, 2.8 and 5.1 one env and one sensor at
a time.

It keeps, per env and sensor, the whole episode as Python lists (snapshots ``S``, ground truth ``G``,
reads ``R``, and the step of the sample behind each snapshot) instead of rings, and computes the sampler's
due rule and hold (SPEC 2.8, in Python floats), delay, jitter, monotone reads, padding, history and the
age of a read by indexing those lists. Randomness is not re-implemented: after every manager call the
harness hands the reference the standard-normal and uniform draws and the per-env option values the
manager used in that call ("feed both the same draws"), so outputs must agree exactly.
"""

from __future__ import annotations

import math

import numpy as np
import torch

import sensorgym as sg
from sensorgym.sensors.state import StateSensor

from ..helpers import ByteSensor, FilterSensor, ThresholdSensor


class _Track:
    """One env x one sensor over one episode."""

    def __init__(self) -> None:
        self.S: list[torch.Tensor] = []  # measured return-space snapshots of this episode
        self.G: list[torch.Tensor] = []  # GT return-space snapshots
        self.R: list[torch.Tensor] = []  # what read() returned at each step
        self.capture_index: int | None = None
        self.gt_tl = self.m_tl = None  # previous post-transform values (timeline slot 1)
        self.walk: torch.Tensor | None = None
        self.held: torch.Tensor | None = None  # the last sample's snapshot (SPEC 2.8)
        self.sample_step = 0  # episode step of the last sample
        self.T: list[int] = []  # per snapshot: the episode step of the sample it shows
        self.age = 0.0  # of the current read, seconds
        self.markov: torch.Tensor | None = None  # SPEC 5.1 Gauss-Markov bias g
        self.lowpass: torch.Tensor | None = None  # SPEC 5.1 filter state y
        self.lost_prev = False  # SPEC 5.1 loss chain: was the previous due sample lost?


class ReferenceManager:
    def __init__(self, mgr) -> None:
        self.mgr = mgr
        self.B = mgr.num_envs
        self.dt = mgr.dt
        self.tracks = {(b, s.name): _Track() for b in range(self.B) for s in mgr.sensors}

    # -- per-call entry points -------------------------------------------------------------------------
    def reset(self, state, mask: np.ndarray) -> None:
        for b in np.flatnonzero(mask):
            for s in self.mgr.sensors:
                self.tracks[(b, s.name)] = _Track()
                self._capture(b, s, state, reset=True)

    def step(self, state, reset_mask: np.ndarray | None = None) -> None:
        for b in range(self.B):
            is_reset = reset_mask is not None and bool(reset_mask[b])
            for s in self.mgr.sensors:
                if is_reset:
                    self.tracks[(b, s.name)] = _Track()
                self._capture(b, s, state, reset=is_reset)

    # -- draws and per-env values used by the manager in the call that just ran ------------------------
    def _draws(self, s, b):
        st = s._storage
        n = s.cache_slice.stop - s.cache_slice.start
        zn = torch.zeros(n)
        zr = torch.zeros(n)
        zg = torch.zeros(n)
        model = st.md.imperfections
        if st.group.draws is not None and model.needs_draws:
            zn, zr = model.draws(0)[b, s.cache_slice].clone(), model.draws(1)[b, s.cache_slice].clone()
            if model.draws(2) is not None:
                zg = model.draws(2)[b, s.cache_slice].clone()
        u = None
        if st.max_shift and st.params.times.has_jitter:
            draw = st.measured.delay_line.jitter_draw
            u = (float(draw[0, b, s.index]), float(draw[1, b, s.index]))
        return zn, zr, zg, u

    @staticmethod
    def _sampler(s, b):
        """(period, phase, dropout, dropout draw, burst) the manager used for env ``b`` (None: no
        sampler)."""
        sp = s._storage.sampler
        if sp is None:
            return None
        j = s.index
        rates = sp.rates
        u = float(sp.losses.u[b, j]) if sp.has_dropout else 1.0
        burst = float(rates.burst[b, j]) if sp.has_burst else 0.0
        return float(rates.period[b, j]), float(rates.phase[b, j]), float(rates.dropout[b, j]), u, burst

    def _params(self, s, b):
        md = s._storage.md
        sl = s.cache_slice
        p = {}
        fields = ("noise", "bias", "random_walk", "resolution", *md.params.components.model_fields)
        for name in fields:
            values = md.params.components.values
            p[name] = values[name][b, sl].clone() if md.params.has_component_params() else None
        p["delay"] = float(md.params.times.delay_seconds[b, s.index])
        p["jitter"] = float(md.params.times.jitter_seconds[b, s.index])
        # SPEC 5.1: T_s is update_period when it is given (> 0), else dt
        sampler = self._sampler(s, b)
        period = sampler[0] if sampler is not None else s.options.update_period
        if isinstance(period, sg.Distribution):  # no sampler: no option of this sensor depends on T_s
            period = 0.0
        p["T_s"] = float(period) if float(period) > 0 else self.dt
        return p

    def _model(self, p, tr, w, zn, zr, zg, reset: bool, due: bool):
        """SPEC 5.1 on the working value ``w`` (float32), in the SPEC's order: scale factor, drift (random
        walk, Gauss-Markov bias), white noise through the low-pass filter; coefficients from the SPEC's
        formulas in float64, each rounded once to float32."""
        f32, dt, t_s = torch.float32, self.dt, p["T_s"]

        def coef(x) -> torch.Tensor:
            return torch.as_tensor(x, dtype=torch.float64).to(f32)

        zero = torch.zeros_like(w)
        noise = p["noise"].double()
        sigma = noise + p.get("noise_density", zero).double() / math.sqrt(t_s)
        if "scale_factor" in p:
            w = w * (1.0 + p["scale_factor"])
        walk_std = p["random_walk"].double() + p.get("random_walk_density", zero).double() * math.sqrt(dt)
        tr.walk.add_(zr * coef(walk_std))
        if reset:
            tr.walk.zero_()
        w = w + tr.walk
        if "bias_instability" in p:
            sg_, tau = p["bias_instability"].double(), p["bias_correlation_time"].double()
            phi = torch.where(tau > 0, torch.exp(-dt / torch.where(tau > 0, tau, 1.0)), 0.0)
            if reset:
                tr.markov = zg * coef(sg_)
            else:
                tr.markov = tr.markov * coef(phi) + zg * coef(sg_ * torch.sqrt(1 - phi**2))
            w = w + tr.markov
        if "bandwidth" not in p:
            return w + zn * coef(sigma)
        f_c = p["bandwidth"].double()
        out = w + zn * coef(sigma)  # components without a filter
        a = torch.exp(-2 * math.pi * f_c * t_s)
        m = max(dt / t_s, 1.0)
        eps = sigma * (1 - a) * torch.sqrt((1 - a ** (2 * m)) / (1 - a**2))
        start = sigma * torch.sqrt((1 - a) / (1 + a))
        if reset:
            y = w + zn * coef(start)
        else:
            y = (tr.lowpass * coef(a**m) + w * coef(1 - a**m)) + zn * coef(eps)
        if reset or due:  # lost due samples advance the filter too
            tr.lowpass = torch.where(f_c > 0, y, 0.0)
        return torch.where(f_c > 0, y, out)

    # -- the pipeline ----------------------------------------------------------------------------------
    def _raw(self, s, state, b) -> torch.Tensor:
        o = s.options
        x = torch.as_tensor(np.asarray(state[o.key]) if not torch.is_tensor(state[o.key]) else state[o.key])[
            b
        ]
        if isinstance(s, StateSensor):
            if o.index is not None:
                x = x[..., list(o.index)]
            return x.reshape(-1).to(torch.float32).clone()
        return x[: o.width].to(torch.float32).clone()

    def _capture(self, b: int, s, state, reset: bool) -> None:
        tr = self.tracks[(b, s.name)]
        o = s.options
        p = self._params(s, b)
        zn, zr, zg, u = self._draws(s, b)
        x = self._raw(s, state, b)
        gt, m = x.clone(), x.clone()
        if isinstance(s, FilterSensor) and o.physics_offset:
            m += o.physics_offset
        if reset:  # older timeline slots hold slot 0 before the transform: steady state
            tr.gt_tl, tr.m_tl = gt.clone(), m.clone()
            tr.walk = torch.zeros_like(x)
        if isinstance(s, FilterSensor) and o.alpha:
            gt += o.alpha * tr.gt_tl
            m += o.alpha * tr.m_tl
        tr.gt_tl, tr.m_tl = gt.clone(), m.clone()
        w = m.clone()
        k = len(tr.S)  # steps since the reset
        due = reset or self._due(self._sampler(s, b), k)
        if p["noise"] is not None:
            # hardware imperfections: random walk, noise, bias, resolution
            if p.keys() & {"noise_density", "random_walk_density", "bias_instability", "scale_factor",
                           "bandwidth"}:  # fmt: skip
                w = self._model(p, tr, w, zn, zr, zg, reset, due)
            else:
                tr.walk.add_(zr * p["random_walk"])
                if reset:
                    tr.walk.zero_()
                w.add_(tr.walk)
                w.add_(zn * p["noise"])
            w.add_(p["bias"])
            r = p["resolution"]
            q = torch.round(w / torch.where(r > 0, r, 1.0)) * torch.where(r > 0, r, 1.0)
            w = torch.where(r > 0, q, w)
        snapshot = self._project(s, w)
        if reset:
            tr.lost_prev = False  # the reset sample is kept: the loss chain restarts
        if reset or (due and not self._lost(self._sampler(s, b), tr)):
            tr.held, tr.sample_step = snapshot, k
        tr.S.append(tr.held.clone())
        tr.T.append(tr.sample_step)
        tr.G.append(self._project(s, gt))
        # delay + jitter: read the snapshot captured `shift` steps ago, never older than the last read
        d_steps = round(p["delay"] / self.dt)
        j_steps = min(p["jitter"], p["delay"]) / self.dt
        extra = 0
        if u is not None:
            extra = min(math.floor(j_steps * u[0] + u[1]), max(0, math.ceil(j_steps - 1e-9)))
        c = k - (d_steps + extra)
        if not reset and tr.capture_index is not None:
            c = max(c, tr.capture_index)
        tr.capture_index = c
        tr.R.append(self._padded(tr.S, c, o.padding_type))
        # age: steps since the sample behind the read (padding shows the reset sample, step 0)
        tr.age = float(np.float32((k - (tr.T[c] if c >= 0 else 0)) * self.dt))

    def _due(self, sampler, t: int) -> bool:
        """SPEC 2.8: is step ``t >= 1`` due?"""
        if sampler is None:
            return True
        period, phase = sampler[0], sampler[1]
        if period <= self.dt:
            return True
        now = math.floor((t * self.dt - phase) / period + 1e-9)
        before = math.floor(((t - 1) * self.dt - phase) / period + 1e-9)
        return now > before

    @staticmethod
    def _lost(sampler, tr: _Track) -> bool:
        """SPEC 2.8/5.1: is this due sample lost? Independent (``u < p``) or, with a burst length ``L``,
        the chain: ``u < 1 - 1/L`` after a lost due sample, ``u < p / (L (1 - p))`` after a kept one."""
        if sampler is None:
            return False
        _, _, p, u, burst = sampler
        if burst >= 1.0:
            threshold = 1.0 - 1.0 / burst if tr.lost_prev else p / (burst * (1.0 - p))
            tr.lost_prev = u < threshold
            return tr.lost_prev
        return u < p

    @staticmethod
    def _project(s, w: torch.Tensor) -> torch.Tensor:
        if isinstance(s, ThresholdSensor):
            return w > s.options.threshold
        if isinstance(s, ByteSensor):
            return w.clamp(0, 255).round().to(torch.uint8)
        return w

    @staticmethod
    def _padded(seq: list[torch.Tensor], i: int, padding: str) -> torch.Tensor:
        if i >= 0:
            return seq[i]
        return seq[0] if padding == "reset" else torch.zeros_like(seq[0])

    # -- reads -----------------------------------------------------------------------------------------
    def read_age(self, s) -> np.ndarray:
        return np.array([self.tracks[(b, s.name)].age for b in range(self.B)], np.float32)

    def read(self, s, ground_truth: bool = False, history_length: int | None = None) -> np.ndarray:
        n = s.options.history_length if history_length is None else history_length
        rows = []
        for b in range(self.B):
            tr = self.tracks[(b, s.name)]
            seq = tr.G if ground_truth else tr.R
            k = len(seq) - 1
            if n == 0:
                rows.append(seq[k].numpy())
            else:
                rows.append(
                    np.stack([self._padded(seq, k - i, s.options.padding_type).numpy() for i in range(n)])
                )
        return np.stack(rows)
