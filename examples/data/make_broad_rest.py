"""Cut the rest phases of three BROAD trials into the small logs the transfer study fits and replays
(examples/configs/transfer.toml, docs/transfer_study.md).

    python examples/data/make_broad_rest.py ../shared/data/broad   # broad_02/07/10_rest.npz

Each log: ``t`` (s, from the trial's 285.714 Hz sampling rate, from 0), ``gyr_x``, ``gyr_y``, ``gyr_z``
(rad/s) and ``acc_x``, ``acc_y``, ``acc_z`` (m/s^2), float64 as in the HDF5 file, of the trial's longest
stretch with its ``movement`` flag false (trial 02: its first rest phase, samples 0-11448; trial 07: its
last, samples 41190-52517; trial 10: its first, samples 0-10514). BROAD: D. Laidig, M. Caruso,
A. Cereatti, T. Seel, Data 6(7), 2021, CC BY 4.0.
"""

from __future__ import annotations

import sys
from pathlib import Path

import h5py
import numpy as np

TRIALS = {
    "02": "02_undisturbed_slow_rotation_B",
    "07": "07_undisturbed_fast_rotation_B",
    "10": "10_undisturbed_slow_translation_A",
}


def longest_rest(movement: np.ndarray) -> tuple[int, int]:
    """``(start, stop)`` of the longest run of samples without movement."""
    edges = np.diff(np.r_[0, (~movement).astype(int), 0])
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    i = int(np.argmax(stops - starts))
    return int(starts[i]), int(stops[i])


def main(folder: str) -> None:
    out = Path(__file__).resolve().parent
    for short, name in TRIALS.items():
        with h5py.File(Path(folder) / f"{name}.hdf5") as h:
            start, stop = longest_rest(np.asarray(h["movement"]).astype(bool))
            gyr, acc = np.asarray(h["imu_gyr"])[start:stop], np.asarray(h["imu_acc"])[start:stop]
            rate = float(h.attrs["sampling_rate"])
        cols = {f"gyr_{a}": gyr[:, i] for i, a in enumerate("xyz")} | {
            f"acc_{a}": acc[:, i] for i, a in enumerate("xyz")
        }
        np.savez_compressed(out / f"broad_{short}_rest.npz", t=np.arange(stop - start) / rate, **cols)
        print(f"broad_{short}_rest.npz: {name} samples {start}-{stop - 1} ({(stop - start) / rate:.1f} s)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/broad")
