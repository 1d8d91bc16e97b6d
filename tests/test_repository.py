"""The README's two set-up commands are the ones the project runs: CI calls the test command
verbatim, and the main job is the paper's figures on defaults."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setup_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", section, flags=re.S)]


def test_readme_has_exactly_two_setup_commands():
    cmds = _setup_commands()
    assert len(cmds) == 2 and all("\n" not in c for c in cmds), cmds
    assert "replica figures" in cmds[0] and "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert _setup_commands()[1] in ci.splitlines()
