"""The error-model options (docs/error_model.md) are config keys like every sensor option: values,
per-component lists and distributions, sweepable by their dotted path, and a mistake is one line naming
the key, the value and the fix."""

from __future__ import annotations

import pytest

import sensorgym as sg
from sensorgym.app.config import ConfigError, apply_overrides, load_config

CONFIG = """
[env]
id = "Pendulum-v1"

[sensors.angle]
type = "StateSensorOptions"
key = "obs"
index = [0, 1]
update_period = 0.01
noise_density = [0.002, 0.002]
random_walk_density = 1e-4
bias_instability = { dist = "Uniform", low = 0.0, high = 0.01 }
bias_correlation_time = 50.0
scale_factor = { dist = "Normal", mean = 0.0, std = 0.01, low = -0.05, high = 0.05 }
bandwidth = 20.0
dropout = 0.01
dropout_burst = 4.0

[sweep]
seeds = [0]
grid = { "sensors.angle.noise_density" = [0.001, 0.01], "sensors.angle.dropout_burst" = [2.0, 8.0] }
"""


def _load(text: str, tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_config(path)


def test_every_error_model_option_is_a_config_key(tmp_path):
    cfg = _load(CONFIG, tmp_path)
    o = cfg.sensors["angle"]
    assert o.noise_density == (0.002, 0.002)
    assert o.random_walk_density == 1e-4
    assert o.bias_instability == sg.Uniform(0.0, 0.01)
    assert o.scale_factor == sg.Normal(0.0, 0.01, low=-0.05, high=0.05)
    assert (o.bandwidth, o.dropout, o.dropout_burst, o.update_period) == (20.0, 0.01, 4.0, 0.01)


def test_error_model_options_are_sweepable_by_their_dotted_path(tmp_path):
    cfg = _load(CONFIG, tmp_path)
    cells = cfg.sweep.cells()
    assert len(cells) == 4
    for cell in cells:
        o = apply_overrides(cfg, cell).sensors["angle"]
        assert o.noise_density == cell["sensors.angle.noise_density"]
        assert o.dropout_burst == cell["sensors.angle.dropout_burst"]


@pytest.mark.parametrize(
    ("line", "pattern"),
    [
        ("noise = 0.1", r"sensors\.angle: .*noise=0\.1 and noise_density are both non-zero.*Fix:"),
        ("dropout = 0.9", r"dropout_burst=4\.0 is invalid.*Fix: lower dropout to at most"),
        ("bias_correlation_time = 0.0", r"bias_correlation_time=0\.0 is invalid.*Fix:"),
        ("bandwith = 20.0", r"sensors\.angle\.bandwith: unknown key\. Fix: did you mean 'bandwidth'\?"),
    ],
)
def test_a_mistake_is_one_line_naming_the_key_and_the_fix(line, pattern, tmp_path):
    key = line.split(" = ")[0]
    lines = [x for x in CONFIG.split("[sweep]")[0].splitlines() if not x.startswith(f"{key} =")]
    text = "\n".join(lines).replace('key = "obs"', f'key = "obs"\n{line}')
    with pytest.raises(ConfigError, match=pattern) as caught:
        _load(text, tmp_path)
    assert "\n" not in str(caught.value)
