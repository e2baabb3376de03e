"""The attitude estimate's inclination error on Gymnasium's Ant under random torques (docs/estimators.md,
"In the pipeline"): per control rate (the estimator sees one IMU sample per control step) and per gain.

    python benchmarks/attitude_errors.py            # both tables (about 15 min on 2 cores)
    python benchmarks/attitude_errors.py --quick    # 2 envs, 200 steps: a smoke run

The IMU is the PX4 log's fit (tests/data/px4_sensor_combined.ulg: gyro 1.9e-4 to 2.3e-4 rad/s/sqrt(Hz),
accelerometer 1.7e-3 m/s^2/sqrt(Hz)), the estimator starts on the truth (2 degrees off), no integral term.
Each row: RMSE and 99th percentile of the inclination error (degrees) over every env and step.
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import torch

import sensorgym as sg
from sensorgym.wrappers import make_sensor_vec

IMU = sg.AttitudeOptions(
    body="torso",
    estimator="mahony",
    estimator_kp=1.0,
    estimator_ki=0.0,
    estimator_init="truth",
    estimator_init_error=2.0,
    gyro_noise_density=(1.90e-4, 1.96e-4, 2.28e-4),
    acc_noise_density=(1.76e-3, 1.71e-3, 1.71e-3),
    gyro_bias=sg.Normal(0.0, 0.01),
)


def inclination_errors(options: sg.AttitudeOptions, frame_skip: int, envs: int, seconds: float) -> np.ndarray:
    """Degrees, every env and control step, under uniform random torques (seeded)."""
    env = make_sensor_vec("Ant-v5", envs, {"imu": options}, seed=0, env_kwargs={"frame_skip": frame_skip})
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    errs = []
    for _ in range(round(seconds / (0.01 * frame_skip))):
        env.step(rng.uniform(-1, 1, (envs, 8)).astype(np.float32))
        est, true = env.sensors["imu"].read(), env.sensors["imu"].read_ground_truth()
        errs.append(torch.rad2deg(torch.acos((est * true).sum(-1).clamp(-1, 1))).numpy())
    env.close()
    return np.concatenate(errs)


def row(label: str, errs: np.ndarray) -> str:
    return f"| {label} | {np.sqrt(np.mean(errs**2)):.2f} | {np.percentile(errs, 99):.1f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    envs, seconds = (2, 4.0) if args.quick else (8, 20.0)
    print("| control step (frame_skip), Mahony kp | inclination RMSE (deg) | 99th percentile (deg) |")
    print("|---|---|---|")
    for frame_skip in (5, 2, 1):
        for kp in (0.0, 1.0):
            o = dataclasses.replace(IMU, estimator_kp=kp)
            print(
                row(
                    f"{0.01 * frame_skip:g} s ({frame_skip}), kp {kp:g}",
                    inclination_errors(o, frame_skip, envs, seconds),
                ),
                flush=True,
            )
    print("\n| estimator, gain (50 Hz) | inclination RMSE (deg) | 99th percentile (deg) |")
    print("|---|---|---|")
    for kind, gain, values in (
        ("mahony", "kp", (0.1, 0.3, 1.0, 3.0)),
        ("madgwick", "beta", (0.01, 0.03, 0.1, 0.3)),
    ):
        for v in values:
            o = dataclasses.replace(IMU, estimator=kind, **{f"estimator_{gain}": v})
            print(row(f"{kind}, {gain} {v:g}", inclination_errors(o, 2, envs, seconds)), flush=True)


if __name__ == "__main__":
    main()
