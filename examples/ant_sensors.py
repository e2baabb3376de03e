"""The Ant seen the way a real quadruped sees itself: IMU, foot contact switches and joint encoders.

``sensorgym/AntSensors-v0`` gives the policy only those measured readings (delayed, noisy, quantized) and
the critic their ground truth plus the full simulator state. This script trains PPO with an asymmetric
critic for a few steps on a batch of Ant envs and prints what the sensors report. Run:

    python examples/ant_sensors.py --timesteps 4096
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

from sensorgym.app.cli import exit_if_missing


def main(argv: list[str] | None = None) -> None:
    # the extras this example needs: one line naming the pip command when one is missing, not a traceback
    exit_if_missing("examples/ant_sensors.py", ["stable_baselines3", "mujoco"])
    from stable_baselines3 import PPO

    import sensorgym.envs  # noqa: F401 - registers sensorgym/AntSensors-v0
    from sensorgym.integrations.sb3 import AsymmetricActorCriticPolicy, SB3VecEnv

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--timesteps", type=int, default=50_000)
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--vectorization", choices=["sync", "async"], default="sync")
    args = p.parse_args(argv)

    envs = gym.make_vec(
        "sensorgym/AntSensors-v0",
        num_envs=args.num_envs,
        vectorization=args.vectorization,
        autoreset_mode="SameStep",
        seed=0,
    )
    obs, _ = envs.reset(seed=0)
    print(
        f"policy observation {obs['policy'].shape}: IMU (9) + 4 foot switches + 8 encoders; "
        f"critic {obs['critic'].shape}: their ground truth + the 105-value Ant state"
    )
    for _ in range(40):
        obs, *_ = envs.step(np.zeros((args.num_envs, 8), np.float32))
    imu, feet = envs.sensors["imu"], [envs.sensors[f"foot_{i}"] for i in range(4)]
    print("IMU accelerometer (measured, env 0):", np.round(imu.read().lin_acc[0].numpy(), 2))
    print("IMU accelerometer (ground truth)   :", np.round(imu.read_ground_truth().lin_acc[0].numpy(), 2))
    print("feet touching (measured)           :", [bool(f.read()[0]) for f in feet])

    n_steps = max(16, min(512, args.timesteps // args.num_envs))
    model = PPO(AsymmetricActorCriticPolicy, SB3VecEnv(envs), n_steps=n_steps, batch_size=n_steps, seed=0)
    model.learn(args.timesteps)
    print(f"trained {model.num_timesteps} steps")
    envs.close()


if __name__ == "__main__":
    main()
