"""docs/error_model.md's ``sensorgym inspect`` example is what the command prints (audit 26 item 5: the page
quoted "noise density 0.002 -> 0.00206 ± 3.26e-05" where the command printed "0.00206 ± 0.000166"): the page's
config, run with the page's command line (in a subprocess, as a user runs it), prints every line the page
quotes."""

from __future__ import annotations

import re
import shlex

from .common import ROOT, sensorgym

DOC = ROOT / "docs" / "error_model.md"


def _example() -> tuple[str, list[str], list[str]]:
    """The inspect section's config, command line and quoted output lines."""
    section = DOC.read_text().split("## Checking a config against its trace")[1].split("\n## ")[0]
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", section, re.M | re.S)  # (language, text) per fence
    config = next(text for language, text in blocks if language == "toml")
    command, output = [text for language, text in blocks if not language][:2]
    return config, shlex.split(command.strip().removeprefix("$ ")), output.rstrip("\n").splitlines()


def test_the_page_quotes_what_the_command_prints(tmp_path):
    config, command, quoted = _example()
    assert command[:2] == ["sensorgym", "inspect"] and "--config" in command
    name = command[command.index("--config") + 1]
    (tmp_path / name).write_text(config)
    out = sensorgym(tmp_path, *command[1:])  # the command as a user runs it
    assert out.returncode == 0, out.stderr
    printed = out.stdout.splitlines()
    missing = [line for line in quoted if line not in printed]
    assert not missing, (missing, out.stdout)
    assert len(quoted) >= 10 and any("scale factor" in line for line in quoted)
