"""Writing a custom sensor: a wheel odometer with encoder ticks, slip and a speed-dependent lag.

A ``SimpleSensor`` subclass only describes physics: the raw value, what goes through the sensor's
response, and the projection to what the robot reads. Delay, jitter, noise, ground truth, history,
resets and per-episode randomization come from the manager. Run:

    python examples/custom_sensor.py
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import sensorgym as sg


@dataclass(frozen=True, kw_only=True)
class OdometerOptions(sg.SimpleSensorOptions):
    key: str = "wheel_speed"  # state entry: wheel angular speed (rad/s), shape (B,)
    wheel_radius: float = 0.05  # metres
    slip: float = 0.0  # fraction of the distance lost to wheel slip (a physics imperfection)
    ticks_per_metre: float = 1000.0  # the encoder's counts


class OdometerSensor(sg.SimpleSensor):
    """Distance travelled since the episode start, in encoder ticks (int32)."""

    options_cls = OdometerOptions
    return_format = (1,)
    cache_dtype = torch.int32
    intermediate_dtype = torch.float32  # metres, before the encoder counts them

    @classmethod
    def _update_raw_data(cls, state, md, raw):
        # raw = distance covered in this control step (m); the odometer integrates it below
        for s in md.sensors:
            speed = torch.as_tensor(state[s.options.key], dtype=torch.float32).reshape(-1, 1)
            raw[:, s.cache_slice] = speed * s.options.wheel_radius * md.dt

    @classmethod
    def _apply_physics_imperfections(cls, md, data, timeline):
        for s in md.sensors:  # the wheel slips: part of the motion never reaches the encoder
            data[:, s.cache_slice] *= 1.0 - s.options.slip

    @classmethod
    def _apply_transform(cls, md, data, timeline, *, is_measured):
        # integrate: total distance = previous total + this step's distance (the timeline keeps totals)
        data.add_(timeline.at(1))
        if md.reset_mask is not None:  # a new episode starts counting from zero
            data.masked_fill_(md.reset_mask[:, None], 0.0)

    @classmethod
    def _post_process(cls, md, data, timeline, *, is_measured):
        ticks = torch.tensor([[s.options.ticks_per_metre for s in md.sensors]], device=md.device)
        out = timeline.at(0)
        out.copy_(torch.floor(data * ticks))
        return out


def main() -> None:
    mgr = sg.SensorManager(num_envs=2, dt=0.1, seed=0)
    odo = mgr.add_sensor(OdometerOptions(slip=0.1, delay=0.2, noise=0.001), name="odometer")
    mgr.reset({"wheel_speed": torch.zeros(2)})
    for _ in range(20):
        mgr.step({"wheel_speed": torch.tensor([10.0, 20.0])})  # rad/s: 0.05 m/step and 0.1 m/step
    print("measured ticks (2 steps old, slipping, noisy):", odo.read()[:, 0].tolist())
    print("true ticks                                  :", odo.read_ground_truth()[:, 0].tolist())
    mgr.reset({"wheel_speed": torch.zeros(2)}, envs_idx=[1])
    print("after resetting env 1                       :", odo.read_ground_truth()[:, 0].tolist())


if __name__ == "__main__":
    main()
