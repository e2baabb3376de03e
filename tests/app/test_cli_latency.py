"""Issue 15 in configs and on the command line: the sampler options (``update_period``, ``update_phase``,
``dropout``), the reading's age (``[policy] age``, ``[critic] age``) and action latency (``[latency]``)
load, validate with one-line errors, sweep, and reach every command (train, eval, ablate, inspect)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from sensorgym.app.cli import main
from sensorgym.app.config import ConfigError, LatencyConfig, apply_overrides, load_config, parse_config
from sensorgym.app.training import evaluate_saved, make_sensor_env, make_training_env
from sensorgym.wrappers import ActionLatency

from .common import TINY_PPO
from .test_train_resume import _run

ROOT = Path(__file__).resolve().parents[2]

CONFIG = f"""
[env]
id = "Pendulum-v1"
n_envs = 2
[sensors.angle]
type = "StateSensorOptions"
key = "obs"
index = [0, 1]
noise = 0.01
update_period = 0.1
dropout = {{ dist = "Uniform", low = 0.0, high = 0.2 }}
[sensors.vel]
type = "StateSensorOptions"
key = "obs"
index = [2]
update_period = 0.15
update_phase = 0.05
[policy]
age = ["angle"]
[critic]
age = ["angle", "vel"]
[latency]
delay = 0.1
jitter = {{ dist = "Uniform", low = 0.0, high = 0.05 }}
initial_action = [0.5]
critic_in_flight = true
critic_latency = true
[algorithm]
timesteps = 128
eval_episodes = 1
{TINY_PPO}
"""

SENSORS = {"a": {"type": "StateSensorOptions", "key": "obs", "index": [0, 1]}}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# -- loading and validation ---------------------------------------------------------------------------------
def test_sampler_options_latency_and_ages_load():
    cfg = load_config(write(Path("c.toml"), CONFIG))
    angle, vel = cfg.sensors["angle"], cfg.sensors["vel"]
    assert angle.update_period == 0.1 and type(angle.dropout).__name__ == "Uniform"
    assert angle.update_phase is None and vel.update_phase == 0.05
    assert cfg.policy_age == ["angle"] and cfg.critic_age == ["angle", "vel"]
    lat = cfg.latency
    assert lat.delay == 0.1 and type(lat.jitter).__name__ == "Uniform"
    assert lat.initial_action == [0.5] and lat.critic_in_flight and lat.critic_latency
    assert parse_config({"sensors": SENSORS}).latency is None  # no table: no latency wrapper


def test_sweep_keys_reach_sampler_options_and_latency():
    cfg = parse_config(
        {
            "sensors": SENSORS,
            "latency": {"delay": 0.05},
            "sweep": {
                "grid": {
                    "sensors.a.update_period": [0.0, 0.1],
                    "sensors.a.dropout": [0.0, 0.05],
                    "latency.delay": [0.0, 0.1],
                    "latency.jitter": [0.0],
                }
            },
        }
    )
    cells = cfg.sweep.cells()
    assert len(cells) == 8
    c = apply_overrides(cfg, cells[-1])
    assert (c.sensors["a"].update_period, c.sensors["a"].dropout, c.latency.delay) == (0.1, 0.05, 0.1)
    # a sweep may add latency to a config without a [latency] table, with a distribution
    c = apply_overrides(
        parse_config({"sensors": SENSORS}), {"latency.delay": {"dist": "Choice", "values": [0.0, 0.1]}}
    )
    assert type(c.latency.delay).__name__ == "Choice" and c.latency.jitter == 0.0


@pytest.mark.parametrize(
    ("extra", "pattern"),
    [
        ({"latency": {"delay": -0.1}}, r"config latency\.delay: .*delay=-0\.1.*Fix: "),
        ({"latency": {"delay": "fast"}}, r"config latency\.delay: .*'fast'.*Fix: "),
        ({"latency": {"delay": 0.02, "jitter": 0.05}}, r"config latency\.jitter = 0\.05: .*<= delay.*Fix: "),
        (
            {"latency": {"delay": {"dist": "Normal", "mean": 0.02, "std": 0.01, "low": 0.0}}},
            r"config latency\.delay: .*bounded.*Fix: ",
        ),
        ({"latency": {"dely": 0.02}}, r"config latency\.dely: unknown key\. Fix: did you mean 'delay'"),
        ({"latency": {"initial_action": "last"}}, r"config latency\.initial_action = 'last'.*Fix: "),
        ({"latency": {"critic_in_flight": "yes"}}, r"config latency\.critic_in_flight = 'yes'.*Fix: "),
        ({"latency": 0.02}, r"config latency = 0\.02: expected a table.*Fix: "),
        ({"policy": {"age": ["b"]}}, r"config policy\.age = \['b'\]: unknown sensors.*Fix: "),
        ({"critic": {"age": "a"}}, r"config critic\.age = 'a': expected a list.*Fix: "),
        (
            {"sensors": {"a": {**SENSORS["a"], "dropout": 1.0}}},
            r"config sensors\.a: .*dropout=1\.0.*Fix: ",
        ),
        (
            {"sensors": {"a": {**SENSORS["a"], "update_period": -1}}},
            r"config sensors\.a: .*update_period=-1.*Fix: ",
        ),
        (
            {"sensors": {"a": {**SENSORS["a"], "update_phase": {"dist": "Uniform", "low": -1, "high": 0}}}},
            r"config sensors\.a: .*update_phase.*Fix: ",
        ),
        (
            {"sweep": {"grid": {"sensors.a.dropout": [0.0, 1.5]}}},
            r"sweep cell \{sensors\.a\.dropout = 1\.5\}: config sensors\.a: .*dropout=1\.5.*Fix: ",
        ),
        (
            {"latency": {"delay": 0.05, "jitter": 0.05}, "sweep": {"grid": {"latency.delay": [0.0]}}},
            r"sweep cell \{latency\.delay = 0\.0\}: config latency\.jitter.*Fix: ",
        ),
        ({"sweep": {"grid": {"latenzy.delay": [0.0]}}}, r"must start with .*latency.*Fix: "),
        (
            {"sensors": {"action_in_flight": SENSORS["a"]}, "latency": {"delay": 0.05}},
            r"config sensors\.action_in_flight.*reserved.*Fix: rename",
        ),
    ],
)
def test_errors_are_one_line_with_key_value_and_fix(extra, pattern):
    with pytest.raises(ConfigError, match=pattern) as info:
        parse_config({"sensors": SENSORS, **extra})
    assert "\n" not in str(info.value)


def test_cli_names_the_file_and_the_key(tmp_path, capsys):
    bad = write(tmp_path / "bad.toml", CONFIG.replace("delay = 0.1\n", "delay = -0.1\n"))
    assert main(["train", "--config", str(bad), "--out", "run", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"sensorgym train: {bad}: config latency.delay") and "Fix:" in err
    assert len(err.splitlines()) == 1
    # an initial action of the wrong shape is only known once the env is built: still one line
    bad = write(
        tmp_path / "bad2.toml", CONFIG.replace("initial_action = [0.5]", "initial_action = [0.5, 1.0]")
    )
    assert main(["inspect", "--config", str(bad), "--out", "i.png", "--steps", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert str(bad) in err and "initial_action" in err and "Fix:" in err and len(err.splitlines()) == 1


# -- the env a config builds --------------------------------------------------------------------------------
def test_training_env_applies_the_latency_ages_and_critic_inputs():
    cfg = load_config(write(Path("c.toml"), CONFIG))
    env = make_sensor_env(
        cfg.env.id,
        cfg.sensors,
        n_envs=2,
        seed=0,
        latency=cfg.latency,
        policy=cfg.policy,
        critic=cfg.critic.sensors,
        policy_age=cfg.policy_age,
        critic_age=cfg.critic_age,
    )
    lat = env.env
    assert isinstance(lat, ActionLatency) and lat.config.max_shift == 3  # dt 0.05: 2 steps + 1 of jitter
    obs, info = env.reset(seed=0)
    # policy: angle (2) + vel (1) + angle's age (1); critic: GT angle (2), vel (1), in flight (3), latency
    # (2), then the ages (2) and the env's observation (3)
    assert obs["policy"].shape == (2, 4) and obs["critic"].shape == (2, 2 + 1 + 3 + 2 + 2 + 3)
    applied = []
    for t in range(6):
        obs, *_, info = env.step(np.full((2, 1), float(t), np.float32))
        applied.append(info["action_applied"][:, 0].copy())
    applied = np.array(applied)
    assert (applied[:2] == 0.5).all()  # the configured initial action until the first delayed one
    assert set(np.unique(applied[2:])) <= {0.0, 1.0, 2.0, 3.0}  # 2..3 steps late
    ages = env.sensors["angle"].read_age()
    assert (np.asarray(ages) >= 0).all() and np.allclose(obs["policy"][:, 3], np.asarray(ages))
    env.close()

    # the SB3 env of training and evaluation wraps the same chain; without [latency] there is none
    sb3 = make_training_env(cfg.env.id, cfg.sensors, n_envs=2, latency=LatencyConfig(delay=0.05))
    assert isinstance(sb3.venv.env, ActionLatency)
    sb3.close()
    plain = make_training_env(cfg.env.id, cfg.sensors, n_envs=2)
    assert not isinstance(plain.venv.env, ActionLatency)
    plain.close()


def test_zero_delay_has_no_in_flight_critic_input():
    cfg = parse_config({"sensors": SENSORS, "latency": {"delay": 0.0}})
    env = make_sensor_env(cfg.env.id, cfg.sensors, n_envs=1, latency=cfg.latency)
    obs, _ = env.reset(seed=0)
    assert obs["critic"].shape == (1, 2 + 3) and list(env.sensors) == ["a"]
    env.close()


# -- the commands --------------------------------------------------------------------------------------------
def test_train_eval_and_inspect_apply_the_latency(tmp_path, capsys):
    cfg = write(tmp_path / "c.toml", CONFIG)
    assert main(["train", "--config", str(cfg), "--out", "run", "--no-progress"]) == 0
    saved = json.loads(Path("run/config.json").read_text())
    assert saved["latency"]["delay"] == 0.1 and saved["policy"]["age"] == ["angle"]
    trained = json.loads(Path("run/result.json").read_text())["eval_return_mean"]
    assert evaluate_saved("run")["eval_return_mean"] == pytest.approx(trained, abs=1e-9)
    # evaluated under another latency (and no in-flight critic input): the actor's input is unchanged
    other = write(
        tmp_path / "o.toml",
        CONFIG.replace("delay = 0.1\n", "delay = 0.2\n").replace(
            "critic_in_flight = true", "critic_in_flight = false"
        ),
    )
    shifted = evaluate_saved("run", load_config(other))["eval_return_mean"]
    assert np.isfinite(shifted) and shifted != trained
    capsys.readouterr()
    assert main(["eval", "run", "--config", str(other)]) == 0
    assert f"{shifted:.1f}" in capsys.readouterr().out
    assert main(["inspect", "--config", str(cfg), "--out", "i.png", "--steps", "20"]) == 0
    out = capsys.readouterr().out
    assert Path("i.png").exists() and "action_in_flight" not in out  # [latency]'s inputs are no channels


def test_ablate_sweeps_sampler_options_and_latency(tmp_path):
    text = CONFIG + '\n[sweep]\nseeds = [0]\ncritic = ["asymmetric"]\n'
    text += 'grid = { "sensors.angle.update_period" = [0.0, 0.2], "latency.delay" = [0.05, 0.1] }\n'
    cfg = write(tmp_path / "s.toml", text)
    assert main(["ablate", "--config", str(cfg), "--out", "sweep", "--no-progress"]) == 0
    with open("sweep/results.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    assert {(r["sensors.angle.update_period"], r["latency.delay"]) for r in rows} == {
        ("0.0", "0.05"),
        ("0.0", "0.1"),
        ("0.2", "0.05"),
        ("0.2", "0.1"),
    }
    assert "action delay" in Path("sweep/summary.md").read_text()


def test_the_study_config_loads_and_builds(tmp_path, capsys):
    path = ROOT / "examples" / "configs" / "sampler_study.toml"
    cfg = load_config(path)
    assert cfg.latency is not None and len(cfg.sweep.cells()) >= 2
    keys = {k for cell in cfg.sweep.cells() for k in cell}
    assert any(k.endswith("update_period") for k in keys) and any(k.endswith("dropout") for k in keys)
    assert any(k.startswith("latency.") for k in keys)
    assert main(["inspect", "--config", str(path), "--out", "i.png", "--steps", "30"]) == 0


@pytest.mark.slow
def test_resume_with_latency_and_a_held_sampler_is_bit_identical(tmp_path):
    # the resume test's script and config, with latency, dropout, a slow sampler and an age added
    config = (
        CONFIG.replace("timesteps = 128", "timesteps = 1024")
        .replace(TINY_PPO, "")
        .replace("[algorithm]", "[algorithm]\nkwargs = { n_steps = 64, batch_size = 64, n_epochs = 2 }")
    )
    (tmp_path / "c.toml").write_text(config)
    full = _run(tmp_path, "full", 1024, False, "full.npz")
    _run(tmp_path, "split", 512, False, "first.npz")
    resumed = _run(tmp_path, "split", 1024, True, "resumed.npz")
    after = full["steps"] > 512
    assert resumed["steps"][0] == full["steps"][after][0] and len(resumed["steps"]) == after.sum()
    for key in ("policy", "critic", "actions"):
        np.testing.assert_array_equal(resumed[key], full[key][after], err_msg=key)


def test_ablate_numbers_long_levels_in_the_figure_and_the_summary():
    from sensorgym.app.ablation import results_figure, summary_markdown

    cfg = load_config(ROOT / "examples" / "configs" / "sampler_study.toml")
    keys = sorted({k for cell in cfg.sweep.cells() for k in cell})
    rows = []
    for n, cell in enumerate(cfg.sweep.cells()):
        for seed in (0, 1):
            row = {k: str(cell.get(k, "")) for k in keys}
            row.update(critic="asymmetric", seed=seed, eval_return_mean=900.0 + 10 * n + seed)
            row.update(eval_returns="900 1000", eval_return_std=70.7, eval_episodes=2)
            row.update(timesteps=60416, timesteps_budget=60000)
            rows.append(row)
    text = summary_markdown(rows, keys, cfg)
    assert "| cell 1: 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 |" in text
    assert "cell 3: Choice([0.0, 0.02, 0.04]), Uniform(0.0, 0.02), Uniform(0.0, 0.2)" in text
    assert "config" in text.split("cell 2:")[1].split("|")[0]  # a key the cell leaves to the config
    fig = results_figure(rows, keys, cfg)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["cell 1", "cell 2", "cell 3"]
    assert "summary.md" in ax.get_xlabel()
