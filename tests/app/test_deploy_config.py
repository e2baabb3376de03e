"""Issue 36 item 2, without training: the ``[deploy.NAME]`` table of a config (dotted or nested overrides,
every mistake one line naming the key path, the value and the fix, a condition that changes what the
policy reads refused before any run), what it leaves alone (the run ids and the study of the config),
and the deployment part of ``summary.md`` on scores made up so that every number is known."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from sensorgym.app.config import ConfigError, parse_config
from sensorgym.app.config_deploy import deploy_column

from .common import ci, t_interval

ROOT = Path(__file__).resolve().parents[2]

ANGLE = {"type": "StateSensorOptions", "key": "obs", "index": [0, 1], "history_length": 2}
BASE = {
    "env": {"id": "Pendulum-v1", "n_envs": 2},
    "sensors": {"angle": ANGLE},
    "sweep": {"seeds": [0, 1], "grid": {"sensors.angle.noise": [0.0, 0.1]}},
}


def _with(deploy: object, **tables: object) -> dict:
    raw = copy.deepcopy(BASE)
    raw.update(copy.deepcopy(tables))
    raw["deploy"] = deploy
    return raw


def test_a_condition_is_written_as_grid_keys_or_nested_and_reads_the_same():
    dotted = parse_config(_with({"real": {"sensors.angle.noise": 0.12, "latency.delay": 0.04}}))
    nested = parse_config(
        _with({"real": {"sensors": {"angle": {"noise": 0.12}}, "latency": {"delay": 0.04}}})
    )
    assert dotted.deploy == nested.deploy == {"real": {"sensors.angle.noise": 0.12, "latency.delay": 0.04}}
    # a distribution is a value, not a table to flatten
    uniform = {"dist": "Uniform", "low": 0.0, "high": 0.1}
    cfg = parse_config(
        _with({"real": {"sensors": {"angle": {"noise": uniform}}}, "lab": {"latency.delay": 0.02}})
    )
    assert cfg.deploy == {"real": {"sensors.angle.noise": uniform}, "lab": {"latency.delay": 0.02}}
    assert [deploy_column(n) for n in cfg.deploy] == ["deploy_real_return_mean", "deploy_lab_return_mean"]
    assert parse_config(copy.deepcopy(BASE)).deploy == {}  # no table: no conditions


def test_the_readme_example_is_a_valid_condition():
    readme = (ROOT / "README.md").read_text()
    (block,) = [b for b in re.findall(r"```toml\n(.*?)```", readme, flags=re.S) if "[deploy." in b]
    import tomllib

    text = (ROOT / "examples" / "configs" / "ablate.toml").read_text() + "\n" + block
    cfg = parse_config(tomllib.loads(text))
    assert cfg.deploy == {"real": {"sensors.angle.noise": 0.12, "latency.delay": 0.1}}
    # the default study shows the same condition, commented out: uncommented, it is a levels-only one
    from sensorgym.app.ablation.task import check_deployable

    shipped = (ROOT / "examples" / "configs" / "ablate.toml").read_text()
    assert parse_config(tomllib.loads(shipped)).deploy == {}  # the default study has none
    uncommented = re.sub(r'^# (\[deploy\.|")', r"\1", shipped, flags=re.M)
    study = parse_config(tomllib.loads(uncommented))
    assert study.deploy == cfg.deploy
    check_deployable(study, "ablate.toml")


REFUSALS = [
    # (deploy table, other tables, what the one line must hold)
    ({"real": {"sensors.angle.noise": -1}}, {}, ["config deploy.real:", "noise", "-1", "Fix:"]),
    ({"real": {"sensors.angle.nosie": 0.1}}, {}, ["config deploy.real:", "sensors.angle.nosie", "'noise'"]),
    ({"real": {"sensors.gyro.noise": 0.1}}, {}, ["deploy.real.sensors.gyro.noise = 0.1", "no sensor 'gyro'"]),
    ({"real": {"algorithm.eval_episodes": 3}}, {}, ["deploy.real.algorithm.eval_episodes = 3", "training"]),
    ({"real": {"critic.env_obs": False}}, {}, ["deploy.real.critic.env_obs = False", "not deployed"]),
    ({"real": {"sweep.seeds": [1]}}, {}, ["deploy.real.sweep.seeds = [1]", "must start with one of"]),
    ({"real": {"latency.delay": -0.1}}, {}, ["config deploy.real:", "latency.delay", "-0.1"]),
    ({"real": {}}, {}, ["config deploy.real = {}", "non-empty table"]),
    ({"real": 0.1}, {}, ["config deploy.real = 0.1", "table of overrides"]),
    ([1], {}, ["config deploy = [1]", "table of named conditions"]),
    ({"real robot": {"latency.delay": 0.1}}, {}, ["config deploy = 'real robot'", "plain word"]),
    ({"real": {"sensors.angle.type": "EnvAttributeOptions"}}, {}, ["config deploy.real:", "attr"]),
    # valid on the config, not on one sweep cell: the line names the cell
    (
        {"real": {"latency.jitter": 0.03}},
        {"latency": {"delay": 0.05}, "sweep": {"grid": {"latency.delay": [0.05, 0.02]}}},
        ["config deploy.real (in sweep cell {latency.delay = 0.02}):", "latency.jitter = 0.03"],
    ),
]


@pytest.mark.parametrize(("deploy", "tables", "expected"), REFUSALS)
def test_a_bad_condition_is_one_line_naming_the_key_the_value_and_the_fix(deploy, tables, expected):
    with pytest.raises(ConfigError) as info:
        parse_config(_with(deploy, **tables))
    line = str(info.value)
    assert "\n" not in line and line.count("Fix:") == 1, line
    for part in expected:
        assert part in line, (part, line)


NOT_LEVELS = [
    # what the policy reads, or the env it runs in: eval --config refuses these, so does a condition
    ({"real": {"sensors.angle.index": [0]}}, {}, "sensors.angle.index: [0, 1] -> [0]"),
    ({"real": {"sensors.angle.history_length": 3}}, {}, "sensors.angle.history_length: 2 -> 3"),
    ({"real": {"env.n_envs": 4}}, {}, "env.n_envs: 2 -> 4"),
    ({"real": {"policy.age": ["angle"]}}, {}, "policy.age: [] -> ['angle']"),
    ({"real": {"env.kwargs.g": 3.0}}, {}, "env.kwargs.g: (unset) -> 3.0"),
    # levels-only on the config, not on a cell that sets the same key otherwise
    (
        {"real": {"sensors.angle.history_length": 2}},
        {"sweep": {"grid": {"sensors.angle.history_length": [2, 3]}}},
        "(in sweep cell {sensors.angle.history_length = 3}): changes what the trained policy reads",
    ),
]


@pytest.mark.parametrize(("deploy", "tables", "expected"), NOT_LEVELS)
def test_a_condition_that_changes_more_than_levels_is_refused_before_any_run(deploy, tables, expected):
    from sensorgym.app.ablation.task import check_deployable

    cfg = parse_config(_with(deploy, **tables))  # the values are valid
    with pytest.raises(ConfigError) as info:
        check_deployable(cfg, "my.toml")
    line = str(info.value)
    assert line.startswith("my.toml: config deploy.real") and "\n" not in line and line.count("Fix:") == 1
    assert expected in line and "override only levels" in line, line
    # run_sweep refuses it too, before it writes anything
    from sensorgym.app.ablation import run_sweep

    with pytest.raises(ConfigError, match=r"config deploy\.real"):
        run_sweep(cfg, Path("/nonexistent/never-written"), progress=False, log=lambda line: None)


def test_levels_only_conditions_pass():
    from sensorgym.app.ablation.task import check_deployable

    levels = {"sensors.angle.noise": 0.3, "sensors.angle.delay": 0.1, "sensors.angle.dropout": 0.1,
              "latency.delay": 0.1, "sensors.angle.update_period": 0.1}  # fmt: skip
    check_deployable(parse_config(_with({"real": levels})), "my.toml")


def test_the_command_refuses_a_condition_before_any_run(tmp_path):
    pytest.importorskip("stable_baselines3")
    from .common import one_line, sensorgym_here, tiny_toml

    extra = '[sweep]\nseeds = [0]\ncritic = ["symmetric"]\n[deploy.real]\n"sensors.angle.index" = [1]\n'
    (tmp_path / "bad.toml").write_text(tiny_toml(extra=extra))
    line = one_line(sensorgym_here(tmp_path, "ablate", "--config", "bad.toml", "--out", "ab"))
    assert line.startswith("sensorgym ablate: bad.toml: config deploy.real: changes what the trained policy")
    assert "(in sweep cell" not in line
    assert "sensors.angle.index: [0, 1] -> [1]" in line
    assert not (tmp_path / "ab").exists()  # refused before anything was written


def test_a_condition_does_not_change_the_runs_or_the_study():
    """Adding, changing or removing a condition keeps every run id and the study's identity, so a folder
    holding the study resumes (and scores its runs) instead of being refused as another config's."""
    from sensorgym.app.ablation import plan_runs
    from sensorgym.app.outdir import study_base

    plain = parse_config(copy.deepcopy(BASE))
    real = parse_config(_with({"real": {"latency.delay": 0.04}}))
    other = parse_config(_with({"real": {"latency.delay": 0.08}, "lab": {"sensors.angle.noise": 0.3}}))
    ids = [r.run_id for r in plan_runs(plain)]
    assert len(ids) == 8 and ids == [r.run_id for r in plan_runs(real)] == [
        r.run_id for r in plan_runs(other)
    ]
    assert study_base(plain.raw) == study_base(real.raw) == study_base(other.raw)
    # a change anywhere else is another study
    assert ids != [
        r.run_id for r in plan_runs(parse_config(_with({}, env={"id": "Pendulum-v1", "n_envs": 3})))
    ]


# -- the deployment part of summary.md, on made-up scores -----------------------------------------------
#: (noise, critic) -> own score per seed, and the deployed score per seed (seeds 0, 1, 2)
OWN = {
    (0.0, "symmetric"): [-200.0, -220.0, -180.0],
    (0.0, "asymmetric"): [-190.0, -210.0, -170.0],
    (0.2, "symmetric"): [-400.0, -380.0, -420.0],
    (0.2, "asymmetric"): [-350.0, -300.0, -330.0],
}
DEPLOYED = {
    (0.0, "symmetric"): [-600.0, -650.0, -560.0],
    (0.0, "asymmetric"): [-590.0, -600.0, -570.0],
    (0.2, "symmetric"): [-450.0, -430.0, -470.0],
    (0.2, "asymmetric"): [-360.0, -320.0, -345.0],
}


def _summary_cfg(seeds: list[int]):
    return parse_config(
        {
            "env": {"id": "Pendulum-v1", "n_envs": 2},
            "sensors": {"angle": {"type": "StateSensorOptions", "key": "obs", "index": [0, 1]}},
            "algorithm": {"timesteps": 128, "eval_episodes": 4},
            "sweep": {"seeds": seeds, "grid": {"sensors.angle.noise": [0.0, 0.2]}},
            "deploy": {"real": {"sensors.angle.noise": 0.3, "latency.delay": 0.04}},
        }
    )


def _made_up_rows(seeds: list[int]) -> list[dict]:
    rows = []
    for (noise, critic), own in OWN.items():
        for seed in seeds:
            rows.append(
                {
                    "run_id": f"{noise}{critic}{seed}",
                    "critic": critic,
                    "seed": str(seed),
                    "sensors.angle.noise": str(noise),
                    "eval_return_mean": str(own[seed]),
                    "eval_return_std": "10.0",
                    "eval_episodes": "4",
                    "eval_returns": "",
                    "timesteps": "128",
                    deploy_column("real"): str(DEPLOYED[(noise, critic)][seed]),
                }
            )
    return rows


def test_the_summary_gives_drops_paired_differences_and_which_arm_transfers_best():
    from sensorgym.app.ablation import deploy_markdown

    text = deploy_markdown(_made_up_rows([0, 1, 2]), ["sensors.angle.noise"], _summary_cfg([0, 1, 2]))
    assert text.startswith("## Scored where it will be deployed\n")
    section = text
    assert "- **real**: `sensors.angle.noise` = 0.3, `latency.delay` = 0.04" in section
    # per arm: own and deployed mean ± sd, and the drop (own - deployed, paired by seed) with its interval
    drop = t_interval(
        [o - d for o, d in zip(OWN[(0.2, "symmetric")], DEPLOYED[(0.2, "symmetric")], strict=True)]
    )
    assert f"| symmetric (angle noise = 0.2) | 3 | -400.0 ± 20.0 | -450.0 ± 20.0 | {ci(*drop)} |" in section
    # the arms in order of level, then critic as [sweep] lists them
    arms = re.findall(r"^\| ((?:a?symmetric) \(angle noise = [\d.]+\)) \| 3 \|", section, flags=re.M)
    assert arms == [f"{c} (angle noise = {n})" for n in ("0.0", "0.2") for c in ("symmetric", "asymmetric")]
    # the best deployed arm (noise 0.2, asymmetric: mean -341.7) against each other arm, paired by seed
    best = DEPLOYED[(0.2, "asymmetric")]
    table = section.split("### Under real: asymmetric (angle noise = 0.2) against each other arm")[1]
    for key in [(0.2, "symmetric"), (0.0, "asymmetric"), (0.0, "symmetric")]:
        mean, lo, hi = t_interval([b - o for b, o in zip(best, DEPLOYED[key], strict=True)])
        assert f"| {ci(mean, lo, hi)} | 3 |" in table, key
    nxt = t_interval([b - o for b, o in zip(best, DEPLOYED[(0.2, "symmetric")], strict=True)])
    assert nxt[1] > 0  # the made-up lead excludes 0
    (verdict,) = [line for line in section.splitlines() if line.startswith("- Under real")]
    assert verdict == (
        "- Under real, asymmetric (angle noise = 0.2) transfers best (mean -341.7): it beats the next best, "
        f"symmetric (angle noise = 0.2), by {ci(*nxt)} (95% paired t-interval, n = 3 seeds; the interval "
        "excludes 0), and every other arm with an interval that excludes 0."
    )


def test_arms_that_cannot_be_told_apart_are_said_so():
    from sensorgym.app.ablation import deploy_markdown

    rows = _made_up_rows([0, 1, 2])
    for r in rows:  # bring noise 0.2 symmetric level with the best, seed by seed up to +-25
        if r["sensors.angle.noise"] == "0.2" and r["critic"] == "symmetric":
            r[deploy_column("real")] = str([-335.0, -345.0, -340.0][int(r["seed"])])
    text = deploy_markdown(rows, ["sensors.angle.noise"], _summary_cfg([0, 1, 2]))
    (verdict,) = [line for line in text.splitlines() if line.startswith("- Under real")]
    mean, lo, hi = t_interval([-360.0 + 335.0, -320.0 + 345.0, -345.0 + 340.0])
    assert lo < 0 < hi
    assert verdict.startswith(
        "- Under real, symmetric (angle noise = 0.2) scores highest (mean -340.0), but it cannot be told "
        f"apart from the next best, asymmetric (angle noise = 0.2): {ci(-mean, -hi, -lo)} (95% paired "
        "t-interval, n = 3 seeds; the interval includes 0)"
    ), verdict
    # the arms whose interval to it includes 0 (the noise-free ones trail by 230 to 255 on every seed)
    assert verdict.endswith("; 1 arm(s) are within that uncertainty of it: asymmetric (angle noise = 0.2).")


def test_one_seed_gives_no_interval_and_says_so():
    from sensorgym.app.ablation import deploy_markdown

    text = deploy_markdown(_made_up_rows([0]), ["sensors.angle.noise"], _summary_cfg([0]))
    (verdict,) = [line for line in text.splitlines() if line.startswith("- Under real")]
    assert "with 1 paired seed(s) there is no interval: this cannot tell the arms apart" in verdict
    assert "[n/a: one seed]" in text


def test_the_deploy_figure_has_a_panel_per_question(tmp_path):
    pytest.importorskip("matplotlib")
    from sensorgym.app.ablation import deploy_figure

    fig = deploy_figure(_made_up_rows([0, 1, 2]), ["sensors.angle.noise"], _summary_cfg([0, 1, 2]))
    left, right = fig.axes
    assert fig._suptitle.get_text() == "Scored where it will be deployed: Pendulum-v1"
    assert [t.get_text() for t in left.get_legend().get_texts()] == ["own condition", "real"]
    assert [t.get_text() for t in right.get_legend().get_texts()] == ["real"]
    assert left.get_xticklabels()[0].get_text() == "symmetric\n(angle noise = 0.0)"

    # the left panel's points are the mean scores (own: circles, real: squares), the right's the drops
    def points(ax, marker):
        return [round(float(y), 6) for line in ax.get_lines() if line.get_marker() == marker
                for y in line.get_ydata()]  # fmt: skip

    order = [(0.0, "symmetric"), (0.0, "asymmetric"), (0.2, "symmetric"), (0.2, "asymmetric")]
    assert points(left, "o") == [round(sum(OWN[k]) / 3, 6) for k in order]
    assert points(left, "s") == [round(sum(DEPLOYED[k]) / 3, 6) for k in order]
    assert points(right, "s") == [round((sum(OWN[k]) - sum(DEPLOYED[k])) / 3, 6) for k in order]
    import matplotlib.pyplot as plt

    plt.close(fig)


# -- named sweep cells (arms) ------------------------------------------------------------------------------
ARMS = [
    {"arm": "clean", "sensors.angle.noise": 0.0},
    {"arm": "noisy", "sensors.angle.noise": 0.2, "sensors.angle.delay": 0.05},
]


def _armed(cells: list) -> dict:
    raw = copy.deepcopy(BASE)
    raw["sweep"] = {"seeds": [0, 1, 2], "critic": ["asymmetric"], "list": copy.deepcopy(cells)}
    return raw


def test_a_named_cell_is_its_name_in_the_plan_and_changes_nothing_in_the_config():
    from sensorgym.app.ablation.plan import _label, plan_runs
    from sensorgym.app.config import apply_overrides

    cfg = parse_config(_armed(ARMS))
    runs = plan_runs(cfg)
    assert [_label(r.cell) for r in runs[::3]] == ["clean", "noisy"]
    noisy = apply_overrides(cfg, ARMS[1])
    assert noisy.sensors["angle"].noise == 0.2 and noisy.sensors["angle"].delay == 0.05
    assert (
        noisy.raw["sensors"]
        == apply_overrides(cfg, {k: v for k, v in ARMS[1].items() if k != "arm"}).raw["sensors"]
    )


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        (
            [ARMS[0], {"sensors.angle.noise": 0.2}],
            "config sweep.list = .*names some cells \\(arm = ...\\) but not all",
        ),
        ([{**ARMS[0], "arm": "a b"}, ARMS[1]], "config sweep.list.arm = 'a b': expected a plain word"),
        (
            [ARMS[0], {**ARMS[1], "arm": "clean"}],
            "config sweep.list.arm = \\['clean', 'clean'\\]: has repeated",
        ),
    ],
    ids=["some named", "not a word", "repeated"],
)
def test_a_bad_arm_name_is_one_line_with_the_fix(cells, expected):
    with pytest.raises(ConfigError, match=expected) as e:
        parse_config(_armed(cells))
    assert "Fix:" in str(e.value) and "\n" not in str(e.value)


def test_the_summaries_name_the_arms_and_say_once_what_each_sets():
    from sensorgym.app.ablation import deploy_markdown, summary_markdown

    raw = _armed(ARMS)
    raw["deploy"] = {"real": {"sensors.angle.noise": 0.3}}
    cfg = parse_config(raw)
    keys = ["arm", "sensors.angle.delay", "sensors.angle.noise"]
    rows = []
    for n, cell in enumerate(ARMS):
        for seed in range(3):
            rows.append({"run_id": f"{n}{seed}", "critic": "asymmetric", "seed": str(seed),
                         **{k: str(cell.get(k, "")) for k in keys},
                         "eval_return_mean": str(-100.0 * (n + 1) - seed), "eval_return_std": "1.0",
                         "eval_episodes": "4", "eval_returns": "", "timesteps": "128",
                         deploy_column("real"): str(-300.0 + 50 * n - seed)})  # fmt: skip
    summary = summary_markdown(rows, keys, cfg)
    assert "- *clean*: angle noise = 0.0\n- *noisy*: angle delay = 0.05, angle noise = 0.2" in summary
    assert re.search(r"^\| clean \| -101\.0 ± 1\.0 \(3\) \|", summary, flags=re.M), summary
    assert "cell 1" not in summary
    deployed = deploy_markdown(rows, keys, cfg)
    assert "- Under real, asymmetric (noisy) transfers best (mean -251.0)" in deployed
