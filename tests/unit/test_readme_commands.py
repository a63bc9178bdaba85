# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every command README.md gives a user is run by a stage of `make test`, or the README says it is not.

The README's table "Which of these commands make test runs" is the one place that says which stage runs which
command; this test holds it to the README's text (no command left out) and to the Makefile (every stage it
names is one that `make test` runs)."""

import os
import re
import shutil
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HEADING = "### Which of these commands `make test` runs"
COMMAND = re.compile(r"^(?:[A-Z_]+=\S+ )*make [a-z][\w-]*$")
ENV_OPTION = re.compile(r"^[A-Z][A-Z_]+=\S+$")


def _readme():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        return f.read()


def _table():
    """{command: what runs it} from the README's table."""
    text = _readme()
    assert HEADING in text
    rows = {}
    section = text.split(HEADING, 1)[1]
    table = section[section.index("\n|"):].split("\n\n", 1)[0]
    for line in table.strip().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or set(cells[0]) <= {"-"} or cells[0] == "command":
            continue
        for command in re.findall(r"`([^`]+)`", cells[0]):
            rows[command] = cells[1]
    return rows


def _stages(target):
    """The stages `make TARGET` runs (its tests/run-stages.sh arguments, lanes split)."""
    if not shutil.which("make"):
        # test-newest runs the unit tests in a chroot without make; the unit stage has it.
        pytest.skip("make is not installed here")
    out = subprocess.run(["make", "-n", "--no-print-directory", target], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    line = [x for x in out.splitlines() if "tests/run-stages.sh" in x][0]
    return re.split(r"[,+ ]", line.split("tests/run-stages.sh", 1)[1].strip())


def _readme_commands():
    """Each command the README shows in code (console blocks and `...` spans), and each environment option."""
    text = _readme().split(HEADING, 1)[0]
    spans = re.findall(r"`([^`\n]+)`", text)
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        spans += [line.split("#")[0].strip() for line in block.splitlines()]
    return sorted({s for s in spans if COMMAND.match(s)}), sorted({s for s in spans if ENV_OPTION.match(s)})


def test_every_command_is_in_the_table():
    commands, options = _readme_commands()
    table = _table()
    assert "make demo" in commands and "make test" in commands
    missing = [c for c in commands if c not in table]
    assert missing == [], f"README commands missing from its table '{HEADING}': {missing}"
    for option in options:
        assert any(option in command for command in table), f"{option}: no row of the table runs the demo with it"


def test_every_stage_named_is_one_make_test_runs():
    stages = set(_stages("test"))
    for command, how in _table().items():
        named = re.findall(r"stage `([\w-]+)`", how)
        if how.startswith("not run"):
            assert not named, command
            continue
        assert named or how in ("`.ci/run`", "set-up, before stage `unit`"), f"{command}: {how}"
        assert set(named) <= stages, f"{command}: {set(named) - stages} are not stages of make test"


@pytest.mark.parametrize("target", ["check", "lab-test"])
def test_the_sub_suites_are_inside_make_test(target):
    """`make check` and `make lab-test` run only stages that make test runs too, and the table names them all."""
    stages = _stages(target)
    assert set(stages) <= set(_stages("test"))
    how = _table()[f"make {target}"]
    named = re.findall(r"stage `([\w-]+)`", how)
    if target == "check":  # "stage `unit` to stage `demo-local`": the first and the last
        assert named == [stages[0], stages[-1]]
    else:
        assert sorted(named) == sorted(stages)


def test_the_demo_stage_runs_the_readme_command():
    assert "\tbash tests/lab/demo_test.sh\n" in open(os.path.join(REPO, "Makefile"), encoding="utf-8").read()
    with open(os.path.join(REPO, "tests", "lab", "demo_test.sh"), encoding="utf-8") as f:
        assert "\nKEEP_LAB=1 make --no-print-directory demo | tee" in f.read()
