"""What the subcommands share when they run: the default output folder, the check for optional packages
(with the exact pip command), the config (a file, or the embedded default) and its check against the env
before any work, and how progress and a stop are reported. Standard library at the top: each heavy
import is inside the function that needs it.

Example:
    >>> install_fix(["tqdm", "stable_baselines3"])
    'pip install "sensorgym[plot,sb3]"'
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_OUT",
    "EXTRAS",
    "bars",
    "check_env",
    "install_fix",
    "installed",
    "load",
    "log",
    "one_line",
    "require",
    "stopped",
]

#: where the commands write without --out
DEFAULT_OUT = Path("sensorgym_outputs")

#: optional modules -> the sensorgym extra that installs them (None: not in an extra, named by pip)
EXTRAS: dict[str, str | None] = {
    "stable_baselines3": "sb3",
    "matplotlib": "plot",
    "tqdm": "plot",
    "rich": "plot",
    "tensorboard": "plot",
    "scipy": "plot",  # the statistics of inspect's verdicts and ablate's summary
    "mujoco": "mujoco",
    "imageio": "mujoco",
    "ray": "ray",
    "rsl_rl": "rl",
    "skrl": "rl",
    "rl_games": "rl",
    "yaml": None,
}
# a module whose distribution has another name; pkg_resources left setuptools in 82.0 (an older package,
# e.g. ray before 2.10, still imports it)
_PIP_NAMES = {"yaml": "pyyaml", "pkg_resources": '"setuptools<82"'}


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def install_fix(modules: Sequence[str]) -> str:
    """The exact pip command that installs ``modules`` (through sensorgym's extras where they are in one).

    Example:
        >>> install_fix(["tqdm", "stable_baselines3"])
        'pip install "sensorgym[plot,sb3]"'
        >>> install_fix(["yaml"])
        'pip install pyyaml'
        >>> install_fix(["pkg_resources"])
        'pip install "setuptools<82"'
    """
    extras = sorted({e for m in modules if (e := EXTRAS.get(m.split(".")[0]))})
    others = sorted({_PIP_NAMES.get(m, m) for m in modules if not EXTRAS.get(m.split(".")[0])})
    parts = ([f'"sensorgym[{",".join(extras)}]"'] if extras else []) + others
    return "pip install " + " ".join(parts)


def require(command: str, modules: Sequence[str]) -> None:
    """Raise one :class:`~sensorgym.app.config.UserError` naming every missing module and the pip command."""
    from ..config import UserError

    missing = [m for m in modules if not installed(m)]
    if missing:
        raise UserError(
            f"needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not installed. "
            f"Fix: {install_fix(missing)}"
        )


def load(path: str | None, default: str) -> tuple[Any, str]:
    """The config at ``path`` (or the embedded default) and how to name it in messages."""
    from ..config import load_config

    if path is not None:
        return load_config(path), path
    with resources.as_file(resources.files("sensorgym.app.configs") / f"{default}.toml") as p:
        return load_config(p), f"the embedded default {default}.toml (examples/configs/{default}.toml)"


def check_env(cfg: Any, source: str, sweep: bool = False, training: bool = False) -> None:
    """Refuse, with one line naming ``source``, an unknown env id, a PPO argument PPO would reject or a
    sensor that does not fit the env (with ``sweep``: in any sweep cell; with ``training``: envs a run
    cannot checkpoint)."""
    from ..config import ConfigError, check_env_ids

    check_env_ids(cfg, source)
    if training and cfg.env.vectorization == "async":
        raise ConfigError(
            f"{source}: config env.vectorization = 'async': a training run checkpoints its envs so that it "
            "can resume exactly, and the sub-envs of an AsyncVectorEnv live in other processes. Fix: write "
            'vectorization = "sync".'
        )
    if cfg.algorithm.kwargs and installed("stable_baselines3"):
        from ..ppo_settings import check_ppo_kwargs

        check_ppo_kwargs(cfg.algorithm.kwargs, cfg.env.n_envs, source)
    _preflight(cfg, source, sweep)


def _preflight(cfg: Any, source: str, sweep: bool) -> None:
    """Build one env of the config (and of each sweep cell) with its sensors and reset it, so that a sensor
    that does not fit the env (a key it lacks, an index out of range) is one line naming ``source`` here,
    not a traceback later (or a failed run in a worker process)."""
    from ..config import ConfigError, apply_overrides
    from ..sensor_env import config_env_kwargs, make_sensor_env

    cells = [{}, *(cfg.sweep.cells() if sweep else [])]
    for cell in cells:
        c = apply_overrides(cfg, cell) if cell else cfg
        where = f"{source}: " + (
            f"with {', '.join(f'{k} = {v!r}' for k, v in cell.items())}: " if cell else ""
        )
        _check_dt(c, where)
        try:
            env = make_sensor_env(
                c.env.id, c.sensors, n_envs=1, seed=None, autoreset_mode="NextStep", **config_env_kwargs(c)
            )
            try:
                env.reset(seed=0)
            finally:
                env.close()
        except TypeError as e:
            if "unexpected keyword argument" not in str(e):
                raise  # not a config mistake: an internal bug keeps its traceback
            raise ConfigError(
                f"{where}config env.kwargs = {c.env.kwargs!r}: {one_line(e).split(' was raised')[0]}. Fix: "
                "use the keyword arguments of the env's constructor (or of gymnasium.make, e.g. "
                "max_episode_steps)."
            ) from None
        except FileNotFoundError as e:  # a file an env kwarg names (a MuJoCo model's xml_file)
            raise ConfigError(_missing_env_file(where, c.env.kwargs, e)) from None
        except OSError as e:
            if "does not exist" not in str(e):  # Gymnasium's MujocoEnv says so for a missing xml_file
                raise
            raise ConfigError(_missing_env_file(where, c.env.kwargs, e)) from None
        except (ValueError, KeyError, IndexError) as e:
            text = one_line(e)
            if "cannot infer the control step" in text:  # the wrapper's fix names its Python keyword
                text = text.split(" Fix:")[0] + " Fix: add dt = <seconds per step> to [env], e.g. dt = 0.02."
            fix = (
                ""
                if "Fix:" in text
                else (
                    " Fix: check the sensors' key, index and shape against the env's observation "
                    "(`sensorgym inspect --config ...` shows the channels)."
                )
            )
            raise ConfigError(f"{where}{text.rstrip('.')}.{fix}") from None


def _missing_env_file(where: str, kwargs: Any, e: OSError) -> str:
    """One line for an env whose constructor found no file it was given (relative paths are the env's
    business: Gymnasium's MuJoCo envs read a path starting with '.' or '/' from the working directory)."""
    import os

    return (
        f"{where}config env.kwargs = {kwargs!r}: the env could not open a file it was given ({one_line(e)}; "
        f"working directory {os.getcwd()}). Fix: run from the folder a relative path is relative to, or "
        "give an absolute path."
    )


def _check_dt(cfg: Any, where: str) -> None:
    """Refuse an ``[env] dt`` that contradicts the env's own control step: every delay, period and latency
    in seconds is converted to steps with it, so a wrong one shifts them all (``dt = 0.02`` for Pendulum,
    whose step is 0.05 s, made a 0.1 s delay 5 steps = 0.25 s, and ``inspect`` said "ok")."""
    from ..config import ConfigError
    from ..control_step import own_control_step

    if cfg.env.dt is None:
        return
    own = own_control_step(cfg.env.id, cfg.env.kwargs)
    if own is None or math.isclose(own, float(cfg.env.dt), rel_tol=1e-6):
        return
    kwargs = f" (with its kwargs {cfg.env.kwargs})" if cfg.env.kwargs else ""
    steps = round(0.1 / float(cfg.env.dt))
    raise ConfigError(
        f"{where}config env.dt = {cfg.env.dt!r}: {cfg.env.id} gives its own control step, {own:g} s{kwargs}; "
        f"every delay, period and latency would be converted with the wrong one (a delay of 0.1 s would be "
        f"{steps} steps = {steps * own:g} s). Fix: remove dt from [env]; it is only for an env that does not "
        "give its control step."
    )


def bars(args: argparse.Namespace) -> bool:
    """Progress bars only on a terminal: elsewhere (a log file, a pipe, a batch job) their redraws fill
    the log with control codes (~21 KB a minute), so the commands print plain lines instead."""
    return not args.no_progress and sys.stderr.isatty()


def log(line: str) -> None:
    print(line, flush=True)  # flushed: a log read while the command runs (tail -f, a batch job) shows it


def stopped() -> str:
    from ..signals import signal_name

    return "interrupted" if signal_name() == "Ctrl-C" else "stopped by SIGTERM"


def one_line(message: Any) -> str:
    """``message`` on one line: its whitespace runs (newlines too) as single spaces."""
    return " ".join(str(message).split())
