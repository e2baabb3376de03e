"""rsl_rl with an asymmetric critic on the batched torch pendulum.

The sensor observation's ``"policy"`` and ``"critic"`` become rsl_rl observation groups;
``OBS_GROUPS`` points the actor at ``["policy"]`` and the critic at ``["policy", "critic"]``. The algorithm
is ``TerminalValuePPO``: rsl_rl's PPO, except that a time-out is bootstrapped from the episode's terminal
state (rsl_rl's own uses the value before the last step). Run:

    python examples/rsl_rl_pendulum.py --iterations 50
"""

from __future__ import annotations

import argparse

import sensorgym as sg
from sensorgym.app.cli import exit_if_missing


def main(argv: list[str] | None = None) -> None:
    exit_if_missing("examples/rsl_rl_pendulum.py", ["rsl_rl"])  # one line, not a traceback
    from rsl_rl.runners import OnPolicyRunner

    from sensorgym.envs import BatchedPendulumEnv
    from sensorgym.integrations.rsl_rl import OBS_GROUPS, RslRlVecEnv
    from sensorgym.wrappers import SensorObservation

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--device", default="cpu")
    args = p.parse_args(argv)

    venv = SensorObservation(
        BatchedPendulumEnv(args.num_envs, device=args.device, autoreset_mode="SameStep"),
        {
            "angle": sg.StateSensorOptions(
                key="obs", index=[0, 1], delay=0.05, noise=sg.LogUniform(0.01, 0.1), history_length=3
            )
        },
        seed=0,
    )
    env = RslRlVecEnv(venv, seed=0)
    cfg = {
        "num_steps_per_env": 24,
        "save_interval": 10_000,
        "obs_groups": dict(OBS_GROUPS),
        "algorithm": {
            "class_name": "sensorgym.integrations.rsl_rl:TerminalValuePPO",
            "num_learning_epochs": 5,
            "num_mini_batches": 4,
            "gamma": 0.95,
        },
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": [64, 64],
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0},
        },
        "critic": {"class_name": "MLPModel", "hidden_dims": [64, 64]},
    }
    runner = OnPolicyRunner(env, cfg, log_dir=None, device=args.device)
    print(
        "actor input:",
        runner.alg.actor.mlp[0].in_features,
        "critic input:",
        runner.alg.critic.mlp[0].in_features,
    )
    runner.learn(args.iterations)
    print(f"done: {args.iterations} iterations x {cfg['num_steps_per_env']} steps x {args.num_envs} envs")


if __name__ == "__main__":
    main()
