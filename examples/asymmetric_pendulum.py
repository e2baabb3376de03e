"""Asymmetric-critic PPO on Pendulum-v1 through a delayed, noisy angle sensor.

The actor sees [cos θ, sin θ] through a sensor (one step of delay, per-episode randomized noise, history
of 3 reads) and never θ̇; the critic also sees the ground truth and the full state. Run:

    python examples/asymmetric_pendulum.py                  # 100k steps, a few minutes
    python examples/asymmetric_pendulum.py --timesteps 2048 # a quick smoke run
"""

from __future__ import annotations

import argparse

import sensorgym as sg
from sensorgym.app.cli import exit_if_missing

SENSORS = {
    "angle": sg.StateSensorOptions(
        key="obs", index=[0, 1], delay=0.05, noise=sg.LogUniform(0.01, 0.1), history_length=3
    ),
}


def main(argv: list[str] | None = None) -> dict:
    exit_if_missing("examples/asymmetric_pendulum.py", ["stable_baselines3"])  # one line, not a traceback
    from sensorgym.app.config import AlgorithmConfig, Config, EnvConfig
    from sensorgym.app.training import train_ppo

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--timesteps", type=int, default=100_000)
    p.add_argument("--critic", choices=["symmetric", "asymmetric"], default="asymmetric")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    small = args.timesteps < 10_000
    # a config built in Python (a TOML file gives the same, see examples/configs/)
    cfg = Config(
        sensors=SENSORS,
        env=EnvConfig(id="Pendulum-v1"),
        algorithm=AlgorithmConfig(
            timesteps=args.timesteps,
            seed=args.seed,
            eval_episodes=2 if small else 10,
            kwargs={"n_steps": 256, "batch_size": 256, "n_epochs": 2} if small else {},
        ),
    )
    result = train_ppo(cfg, critic=args.critic)
    print(
        f"{args.critic} critic, {result['timesteps']} steps: evaluation return "
        f"{result['eval_return_mean']:.1f} ± {result['eval_return_std']:.1f}"
    )
    return result


if __name__ == "__main__":
    main()
