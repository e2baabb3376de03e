"""Issue 33 item 15: ``inspect`` and ``train`` with a bandwidth above the sensor's Nyquist rate ended in a
``math domain error`` traceback (inspect) or trained (train); the option now refuses it, and the command
says so in one line, exit 2."""

from __future__ import annotations

import pytest

from sensorgym.app.cli import main

from .common import tiny_toml


@pytest.mark.parametrize("command", ["inspect", "train"])
def test_a_bandwidth_above_nyquist_is_one_line_with_exit_2(tmp_path, monkeypatch, capsys, command):
    monkeypatch.chdir(tmp_path)
    text = tiny_toml().replace("noise = 0.05", "noise = 0.2\nbandwidth = 12.0")  # Pendulum: dt 0.05, 10 Hz
    (tmp_path / "bad.toml").write_text(text)
    assert main([command, "--config", "bad.toml", "--out", "o"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert "bandwidth" in err[0] and "Nyquist rate 10 Hz" in err[0] and "Fix:" in err[0]
