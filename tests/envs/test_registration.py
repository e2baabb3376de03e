"""``import sensorgym`` alone registers the reference envs (issue 11.13: it needed ``import sensorgym.envs``
first)."""

from __future__ import annotations

import subprocess
import sys


def test_import_sensorgym_registers_the_env_ids_in_a_fresh_interpreter():
    code = (
        "import gymnasium as gym, sensorgym, sys\n"
        "ids = sorted(i for i in gym.registry if i.startswith('sensorgym/'))\n"
        "env = gym.make_vec('sensorgym/BatchedPendulum-v0', 2, vectorization_mode='vector_entry_point')\n"
        "assert env.num_envs == 2\n"
        "assert 'mujoco' not in sys.modules  # registering must not import MuJoCo\n"
        "print(' '.join(ids))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert {"sensorgym/BatchedPendulum-v0", "sensorgym/AntSensors-v0", "sensorgym/Thermal-v0"} <= set(out)
