"""``sensorgym fit LOG --channels ...``: from a real sensor's log to a config that reproduces it.

The work is :func:`sensorgym.fit` (``sensorgym/fitting``); this module is its command line: the flags,
the progress bar, what is printed (each channel's fitted options, the files written, and last the
closed-loop lines), and the check that ``fitted_config.toml`` (``--into``) loads as a config.

Example:
    >>> parser = build_fit_parser()
    >>> args = parser.parse_args(["log.csv", "--channels", "gx", "gy", "--names", "gyro"])
    >>> args.channels, args.names, args.out
    (['gx', 'gy'], ['gyro'], None)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from .options import Argument, add_arguments, shared

__all__ = ["ARGUMENTS", "DESCRIPTION", "EPILOG", "HELP", "NAME", "build_fit_parser", "run"]

_LONG = 50_000  # simulated steps from which progress is shown

NAME = "fit"
HELP = "fit a sensor's noise, drift, rate, losses and delay to its log; write a config that reproduces it"

DESCRIPTION = (
    "Fit a sensor's error model to a log of it: the sample interval, lost samples and their bursts from the "
    "time stamps; noise density, bandwidth, random walk, bias instability and resolution from the Allan "
    "deviation of a static stretch (found, or --static); the delay from a --reference signal. Writes "
    "fitted.toml (one [sensors.NAME] table per channel name), fit_report.md, allan.png and timing.png, "
    "simulates the fitted options through SensorManager and prints, last, whether the simulated sensor's "
    "Allan deviation lies inside the log's 95% band. With --into CONFIG it also writes fitted_config.toml: "
    "CONFIG with the fitted options in its sensor tables, ready for inspect/train/ablate --config. With "
    "--residuals FILE it also writes the static window's residuals, which a sensor's replay option replays."
)
EPILOG = (
    "channels are named as the log names them: a CSV column, an NPZ array (column i of a 2-D array: "
    "name[i]), a ULog topic.field (sensor_combined.gyro_rad[0]), a bag or MCAP topic.field.path "
    "(/imu/data.angular_velocity.x). ULog, ROS bags and MCAP need the ulog, rosbag and mcap extras. A "
    ".txt or .tsv table is read as CSV (said in a line); times are in seconds unless --time-unit or the "
    "time column's name says otherwise.\n\n"
    "examples:\n"
    '  sensorgym fit imu.csv --channels "Gyroscope X (deg/s)" "Gyroscope Y (deg/s)" --names gyro\n'
    "  sensorgym fit flight.ulg --channels sensor_combined.gyro_rad[0] --static 0:5\n"
    "  sensorgym fit imu.csv --channels gx gy --names angle --into examples/configs/train.toml\n"
    '  sensorgym fit imu.csv --channels gx gy gz --residuals rest.npz   # then replay = "rest.npz"\n'
    "  sensorgym train --config sensorgym_outputs/fit/fitted_config.toml"
)


ARGUMENTS: tuple[Argument, ...] = (
    (("log",), dict(help="the log: .csv (or .txt, .tsv), .npz, .ulg, .bag, .mcap, or a ROS 2 bag directory")),
    (("--channels",), dict(nargs="+", required=True, metavar="NAME", help="the channels to fit")),
    (
        ("--names",),
        dict(
            nargs="+",
            metavar="NAME",
            help="the config table of each channel (one per channel, or one for all; default: the channel's "
            "name with characters other than letters, digits and _ replaced by _); channels given one name "
            "are its components in channel order; TABLE.FIELD writes an IMU's per-field options",
        ),
    ),
    (("--time",), dict(metavar="COLUMN", help="the time column of a CSV or NPZ (default: the first)")),
    (
        ("--time-unit",),
        dict(
            choices=("s", "ms", "us", "ns"),
            help="the time column's unit (default: what its name says, t_ms, time [us], ..., else seconds; a "
            "column whose numbers step by 0.5 or more is refused until this says its unit)",
        ),
    ),
    (
        ("--static",),
        dict(
            metavar="START:END",
            help="the static window, seconds from the channel's first time stamp (default: the longest "
            "stretch without motion)",
        ),
    ),
    (
        ("--reference",),
        dict(
            metavar="NAME",
            help="a channel of the same log measuring the same quantity without delay (a command, motion "
            "capture): the delay is fitted by cross-correlation",
        ),
    ),
    (
        ("--into",),
        dict(
            metavar="CONFIG",
            help="a config whose [sensors.NAME] tables take the fitted options: written as "
            "fitted_config.toml",
        ),
    ),
    (
        ("--residuals",),
        dict(
            metavar="FILE",
            help="also write FILE (.npz): per channel the static window's samples less its mean, with the "
            "sample interval and the channel names: the recording a sensor's replay option replays",
        ),
    ),
    shared("out", help="output folder (default: sensorgym_outputs/fit)"),
    (("--envs",), dict(type=int, default=64, help="simulated envs for the closed-loop check (default 64)")),
    shared("seed", default=0, help="seed of the simulation (default 0)"),
    shared("no_progress", help="no progress bar"),
)


def build_fit_parser() -> argparse.ArgumentParser:
    """A stand-alone parser with the ``fit`` flags (for tests and docs)."""
    parser = argparse.ArgumentParser(prog="sensorgym fit", description=DESCRIPTION, epilog=EPILOG)
    add_arguments(parser, ARGUMENTS)
    return parser


def _progress(enabled: bool) -> tuple[Any, Any]:
    """A ``progress(done, total)`` callback and its closer: on a terminal a tqdm bar (when tqdm is there);
    elsewhere (a log file, a pipe, a batch job: a bar's redraws would fill it with control codes) one
    plain line per tenth of the simulation, as ``train`` prints; nothing for a short log."""
    if not enabled:
        return None, lambda: None
    state: dict[str, Any] = {}
    tty = sys.stderr.isatty()
    tqdm = None
    if tty:
        try:
            from tqdm import tqdm
        except ImportError:
            return None, lambda: None

    def update(done: int, total: int) -> None:
        if total < _LONG:  # short logs finish before a bar would help
            return
        if tqdm is not None:
            if "bar" not in state:
                state["bar"] = tqdm(
                    total=total, desc="simulating the fitted config", unit="step", file=sys.stderr
                )
            state["bar"].update(done - state["bar"].n)
            return
        start = state.setdefault("start", time.perf_counter())
        tenth = done * 10 // max(total, 1)
        if tenth > state.get("tenth", 0):
            state["tenth"] = tenth
            seconds = time.perf_counter() - start
            print(
                f"  simulated {done:,} of {total:,} steps ({100 * done // max(total, 1)}%), {seconds:.0f} s",
                flush=True,
            )

    return update, lambda: state["bar"].close() if "bar" in state else None


def _summary(result: Any) -> list[str]:
    from ...fitting.report import fmt_value

    lines = [f"warning: {w}" for w in result.warnings]
    for f in result.channels:
        t = f.timing
        found = [
            f"{term} {fmt_value(e.value, e.se)}" for term, e in f.noise.estimates.items() if e.identified
        ]
        if f.resolution[0] is not None:
            found.append(f"resolution {fmt_value(*f.resolution)}")
        if f.delay is not None and f.delay.delay is not None:
            found.append(f"delay {fmt_value(f.delay.delay, f.delay.se)} s")
        table, _, field = f.name.partition(".")
        where = f"[sensors.{table}] {field}_*" if field else f"[sensors.{table}]"
        lines.append(
            f"{f.channel.name} -> {where}: T_s {t.sample_interval:.6g} s, dropout {t.dropout:.3g}"
            + (f" (bursts of {t.burst:.3g})" if t.burst is not None else "")
            + (f", {t.invalid} values not numbers" if t.invalid else "")
            + f"; static {f.window[0]:.4g}-{f.window[1]:.4g} s; "
            + ("; ".join(found) if found else "no noise term identifiable")
        )
    return lines


def _check_config(raw: Any) -> None:
    """``fit``'s check of a config mapping: it must load as ``train`` loads it (a one-line error)."""
    from ...fitting.errors import FitError
    from ..config import ConfigError, parse_config

    try:
        parse_config(raw)
    except ConfigError as e:
        problem, _, fix = str(e).partition(" Fix: ")
        raise FitError(
            f"--into: the config with the fitted options would not load: {problem}", fix or "check it"
        ) from None


def run(args: argparse.Namespace) -> int:
    """Run ``sensorgym fit`` (exit code 0; a log or flag it cannot use is a one-line error, code 2)."""
    from ...fitting.errors import MissingExtra, require
    from ..config import UserError, load_config

    try:
        require("allantools", "fit", "sensorgym fit")
        require("scipy", "fit", "sensorgym fit")
        require("matplotlib", "plot", "sensorgym fit (allan.png, timing.png)")
        from ...fitting.api import fit

        out = Path(args.out) if args.out else Path("sensorgym_outputs") / "fit"
        if args.envs < 1:
            raise UserError(f"--envs {args.envs}: must be >= 1. Fix: pass e.g. --envs 64.")
        progress, close = _progress(not args.no_progress)
        try:
            result = fit(
                args.log,
                args.channels,
                names=args.names,
                time=args.time,
                time_unit=args.time_unit,
                static=args.static,
                reference=args.reference,
                into=args.into,
                out=out,
                residuals=args.residuals,
                envs=args.envs,
                seed=args.seed,
                progress=progress,
                check_config=_check_config,
            )
        finally:
            close()
    except MissingExtra as e:
        raise UserError(str(e)) from None
    for line in _summary(result):
        print(line)
    written = ", ".join(str(p) for p in result.files.values())
    print(f"wrote {written}")
    config = result.files.get("fitted_config.toml")
    if config is not None:
        load_config(config)  # checked before it was written; a last look as train will read it
        for change in result.into_changes:
            print(f"  {change}")
        print(f"{args.into} with the fitted options: sensorgym train --config {config}")
    for line in result.lines:
        print(line)
    return 0
