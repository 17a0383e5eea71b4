"""`subagents config` and the settings files reaching `run`, as real subprocesses.

The `cli` fixture runs in `tmp_path` (the project directory) with SUBAGENTS_HOME=`home`.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import Cli, write_script


def project_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / ".subagents" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_config_prints_the_merged_values_and_their_origins(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    project = project_config(tmp_path, '[aliases]\nfast = "openai:gpt-5-mini"\n')
    user = home / "config.toml"
    user.write_text('model = "fast"\n[budget]\ntokens = 900\n', encoding="utf-8")
    done = cli("config", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["files"] == [str(project), str(user)]
    rows = {row["key"]: (row["value"], row["origin"]) for row in document["values"]}
    assert rows["model"] == ("openai:gpt-5-mini", f"{user}:1")
    assert rows["aliases.fast"] == ("openai:gpt-5-mini", f"{project}:2")
    assert rows["budget.tokens"] == ("900", f"{user}:3")
    assert rows["sandbox"] == ("workspace-write", "default")

    text = cli("config", env={"SUBAGENTS_SANDBOX": "read-only"})
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert any(line.split() == ["sandbox", "read-only", "$SUBAGENTS_SANDBOX"] for line in lines)
    assert any(line.split() == ["model", "openai:gpt-5-mini", f"{user}:1"] for line in lines)
    assert lines[-1].startswith(f"# settings files read: {project}, {user}")


def test_a_malformed_file_is_one_line_with_its_line_and_nothing_is_written(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    path = project_config(tmp_path, 'model = "scripted:x.yaml"\n\n[budget]\ntokns = 3\n')
    for args in (("config",), ("run", "hi"), ("agents",)):
        done = cli(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert done.stdout == ""
        assert done.stderr.splitlines() == [
            f"subagents: error: {path}:4: unknown key `budget.tokns`; the keys are: tokens, "
            "model_calls, children [CONFIG_INVALID]"
        ]
    assert not (home / "state.db").exists()


def test_an_unknown_alias_is_refused_with_its_code_before_anything_runs(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    done = cli("run", "hi", "--model", "turbo")
    assert done.returncode == 2
    assert done.stderr.startswith("subagents: error: unknown model alias 'turbo'")
    assert done.stderr.rstrip().endswith("[MODEL_ALIAS_UNKNOWN]")
    assert not (home / "state.db").exists()


def test_run_takes_the_model_and_budget_from_the_settings_and_flags_win(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    script = write_script(
        tmp_path / "lead.yaml", "lead:\n  - text: first answer\n  - text: second answer\n"
    )
    other = write_script(tmp_path / "other.yaml", "lead:\n  - text: from the flag\n")
    project_config(tmp_path, f'model = "mine"\n[aliases]\nmine = "{script}"\n')
    done = cli("run", "hi", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == "first answer"
    flagged = cli("run", "hi", "--json", "--model", other)
    assert json.loads(flagged.stdout)["output"] == "from the flag"
    aliased = cli("run", "hi", "--json", "--model", "mine")
    assert json.loads(aliased.stdout)["output"] == "first answer"

    (home / "config.toml").write_text("[budget]\nmodel_calls = 0\n", encoding="utf-8")
    spent = cli("run", "hi", "--json")
    assert spent.returncode == 1
    assert json.loads(spent.stdout)["stop_reason"] == "budget"
    unlimited = cli("run", "hi", "--json", "--budget-model-calls", "5")
    assert unlimited.returncode == 0, unlimited.stderr


def test_the_sandbox_mode_comes_from_the_settings_unless_a_flag_says(
    cli: Cli, tmp_path: Path, home: Path
) -> None:
    script = write_script(
        tmp_path / "lead.yaml",
        "lead:\n  - calls: [{tool: write_file, args: {path: out.txt, content: hi}}]\n"
        "  - text: tried\n",
    )
    project_config(tmp_path, 'sandbox = "read-only"\n')
    done = cli("run", "write", "--model", script, "--json")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "out.txt").exists()  # read-only: the write was refused
    flagged = cli("run", "write", "--model", script, "--sandbox", "workspace-write")
    assert flagged.returncode == 0, flagged.stderr
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "hi"
