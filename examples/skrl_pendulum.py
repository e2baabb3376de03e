"""skrl PPO whose critic reads the privileged ``states``.

``SkrlWrapper`` exposes ``observation_space`` = the measured readings (``"policy"``) and ``state_space`` /
``state()`` = the critic input, by default the measured readings + the privileged part (``"policy"`` +
``"critic"``: ground truth + env state), which skrl's trainers hand to the agent as ``states``. The agent is
``SensorPPO``: skrl's PPO, except that a time-out is bootstrapped from the episode's terminal state (skrl's
own PPO uses the next episode's first state there). Run:

    python examples/skrl_pendulum.py --timesteps 2000
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

import sensorgym as sg
from sensorgym.app.cli import exit_if_missing
from sensorgym.envs import BatchedPendulumEnv
from sensorgym.wrappers import SensorObservation

# one line, not a traceback, without skrl: checked before skrl is imported (the models below subclass it)
exit_if_missing("examples/skrl_pendulum.py", ["skrl"])

from skrl.agents.torch.ppo import PPO_CFG  # noqa: E402
from skrl.memories.torch import RandomMemory  # noqa: E402
from skrl.models.torch import DeterministicMixin, GaussianMixin, Model  # noqa: E402
from skrl.trainers.torch import SequentialTrainer  # noqa: E402

from sensorgym.integrations.skrl import SensorPPO, SkrlWrapper  # noqa: E402


class Policy(GaussianMixin, Model):
    def __init__(self, env: SkrlWrapper) -> None:
        Model.__init__(
            self,
            observation_space=env.observation_space,
            state_space=env.state_space,
            action_space=env.action_space,
            device=env.device,
        )
        GaussianMixin.__init__(self)
        self.net = nn.Sequential(
            nn.Linear(self.num_observations, 64), nn.Tanh(), nn.Linear(64, self.num_actions)
        )
        self.log_std = nn.Parameter(torch.zeros(self.num_actions))

    def compute(self, inputs, role=""):
        return self.net(inputs["observations"]), {"log_std": self.log_std}


class Value(DeterministicMixin, Model):
    """The critic: skrl's ``states``, which are already the measured readings + the privileged part
    (``SkrlWrapper``'s ``critic_input`` default), so it reads nothing else."""

    def __init__(self, env: SkrlWrapper) -> None:
        Model.__init__(
            self,
            observation_space=env.observation_space,
            state_space=env.state_space,
            action_space=env.action_space,
            device=env.device,
        )
        DeterministicMixin.__init__(self)
        self.net = nn.Sequential(nn.Linear(self.num_states, 64), nn.Tanh(), nn.Linear(64, 1))

    def compute(self, inputs, role=""):
        return self.net(inputs["states"]), {}


def main(argv: list[str] | None = None) -> SensorPPO:
    """Train, print the actor's and the critic's input sizes, and return the agent."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--timesteps", type=int, default=20_000)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument(
        "--out",
        default="sensorgym_outputs/skrl_pendulum",
        help="skrl's experiment folder (logs, checkpoints)",
    )
    args = p.parse_args(argv)
    env = SkrlWrapper(
        SensorObservation(
            BatchedPendulumEnv(args.num_envs, autoreset_mode="SameStep"),
            {
                "angle": sg.StateSensorOptions(
                    key="obs", index=[0, 1], delay=0.05, noise=0.05, history_length=3
                )
            },
            seed=0,
        ),
        seed=0,  # the env's first reset (skrl's trainer passes no seed)
    )
    models = {"policy": Policy(env), "value": Value(env)}
    cfg = PPO_CFG(rollouts=32, learning_epochs=4, mini_batches=4, discount_factor=0.95)
    cfg.experiment.directory = args.out  # skrl's default is ./runs in the working directory
    agent = SensorPPO(
        models=models,
        memory=RandomMemory(memory_size=32, num_envs=env.num_envs, device=env.device),
        observation_space=env.observation_space,
        state_space=env.state_space,
        action_space=env.action_space,
        device=env.device,
        cfg=cfg,
    )
    trainer = SequentialTrainer(
        env=env,
        agents=agent,
        cfg={
            "timesteps": args.timesteps,
            "headless": True,
            "disable_progressbar": True,
            "close_environment_at_exit": False,
        },
    )
    trainer.train()
    measured = env.observation_space.shape[0]
    print(
        f"trained {args.timesteps} steps; actor input = {models['policy'].net[0].in_features} values, "
        f"critic input = {models['value'].net[0].in_features} values (skrl's states: measured readings "
        f"{measured} + privileged {env.state_space.shape[0] - measured})"
    )
    return agent


if __name__ == "__main__":
    main()
