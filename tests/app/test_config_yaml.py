"""Issue 11.11: a malformed or tagged YAML config gave a raw traceback; it must give the same clean
one-line error as TOML and JSON, through ``load_config`` and through the CLI."""

from __future__ import annotations

import pytest

from sensorgym.app.config import ConfigError, load_config

pytest.importorskip("yaml")

BAD = {
    "malformed": "env:\n  id: [Pendulum-v1\n",
    "tagged": "env: !!python/object/apply:os.system ['echo owned']\n",
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_yaml_is_a_one_line_config_error(tmp_path, kind):
    path = tmp_path / f"{kind}.yaml"
    path.write_text(BAD[kind])
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert message.startswith(str(path)) and "YAML" in message and "Fix:" in message
    assert "\n" not in message and message.count("Fix:") == 1


@pytest.mark.parametrize("kind", sorted(BAD))
def test_cli_reports_bad_yaml_without_a_traceback(tmp_path, capsys, kind):
    from sensorgym.app.cli import main

    path = tmp_path / f"{kind}.yaml"
    path.write_text(BAD[kind])
    code = main(["train", "--config", str(path), "--out", str(tmp_path / "runs")])
    assert code == 2  # a user error
    err = capsys.readouterr().err
    assert "Traceback" not in err and str(path) in err and "YAML" in err
    assert not (tmp_path / "owned").exists()
