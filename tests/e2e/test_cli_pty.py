"""The `engram` command driven as a person drives it: in a pseudo-terminal that is its controlling
terminal (tests/terminal.py: getpass and readline see a real terminal), against the local stack:
log in by answering the prompts, chat two turns and watch the text and the tool call arrive, leave
with Ctrl-D, list the facts the chat stored. The assertions are on what the terminal shows."""

from __future__ import annotations

import os
import re
import shlex
import stat
import uuid

import pytest

from engram_client import Client
from tests.terminal import Terminal, engram_command


@pytest.fixture()
def person_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), HOME=str(tmp_path), TERM="dumb")
    return env


def run(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    term = Terminal(engram_command() + args, env)
    code = term.wait()
    return code, term.screen.decode(errors="replace").replace("\r\n", "\n")


def test_login_chat_two_turns_and_list_facts(live, person_env, tmp_path):
    url = live.url.rstrip("/")
    user = f"dev-cli-{uuid.uuid4().hex[:8]}"
    with Client(url, user) as engram:
        engram.create_agent(name="Scout", persona="Be brief.")

    login = Terminal(engram_command() + ["login"], person_env)
    login.expect("Engram URL")
    login.type(url + "\n")
    login.expect("API key")
    login.type(user + "\n")
    shown = login.expect("Saved to")
    assert login.wait() == 0
    assert user not in shown + login.screen.decode()  # the key is not echoed
    assert f"Logged in to {url}" in shown
    config = tmp_path / "config" / "engram" / "config.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600

    chat = Terminal(engram_command() + ["chat", "Scout"], person_env)
    chat.expect("you> ")
    chat.type("remember that I only drink green tea\n")
    first = chat.expect("you> ")
    # the model's first words, then the tool call as it runs, then the answer after it
    assert re.search(
        r"Scout> Let me use remember\.\n  \[tool\] remember \{.*green tea.*\}\n  \[tool\] remember done\nScout> .*Done", first
    ), first
    chat.type("what do you know about me?\n")
    second = chat.expect("you> ")
    assert "Scout> (offline model) Here is what I know about you:\n- I only drink green tea" in second
    chat.type("\x04")  # Ctrl-D leaves
    assert chat.wait() == 0

    code, facts = run(["facts"], person_env)
    assert code == 0 and "I only drink green tea" in facts and "FACT" in facts


def test_quit_a_session_of_its_own_the_other_lists_and_the_environment_over_the_config(live, person_env):
    url = live.url.rstrip("/")
    user = f"dev-cli-{uuid.uuid4().hex[:8]}"
    with Client(url, user) as engram:
        agent = engram.create_agent(name="Ada")
    env = {**person_env, "ENGRAM_URL": url, "ENGRAM_API_KEY": user}  # no login: the environment alone
    chat = Terminal(engram_command() + ["chat", agent["id"], "--session", "notes"], env)
    chat.expect("you> ")
    chat.type("hello\n")
    assert 'You said: "hello"' in chat.expect("you> ")
    chat.type("/quit\n")
    assert chat.wait() == 0
    code, agents = run(["agents"], env)
    assert code == 0 and agent["id"] in agents
    code, sessions = run(["--json", "runs", "Ada"], env)
    assert code == 0 and '"sessionId": "notes"' in sessions
    with Client(url, user) as engram:
        engram.upsert_agent_memory(agent["id"], key="deploy", value="make deploy from the repo root", pinned=True)
        ws = engram.create_workspace(name="Team")
        engram.upsert_workspace_memory(ws["id"], key="db", value="PostgreSQL 16")
    code, shown = run(["memories", "Ada"], env)
    assert code == 0 and re.search(r"deploy +make deploy from the repo root +core +manual +yes", shown), shown
    code, shown = run(["memories", "--workspace", "Team"], env)
    assert code == 0 and "PostgreSQL 16" in shown
    code, shown = run(["usage", "--agent", "Ada"], env)
    assert code == 0 and " notes " in shown and "Total: " in shown and "BY KIND" in shown and "Spent today $" in shown
    code, shown = run(["agents"], {**env, "ENGRAM_API_KEY": "egk_" + "A" * 43})
    assert code == 1 and "401" in shown


def test_chat_with_an_unknown_agent_says_so(live, person_env):
    env = {**person_env, "ENGRAM_URL": live.url.rstrip("/"), "ENGRAM_API_KEY": "dev-cli-nobody"}
    chat = Terminal(engram_command() + ["chat", "Nobody"], env)
    chat.expect("you> ")
    # Named at once, before the person has typed anything.
    assert "engram: no agent 'Nobody'" in chat.expect("(see `engram agents`)")
    assert chat.wait() == 1


def test_a_chat_started_with_sigint_ignored_still_names_an_unknown_agent(live, person_env):
    """Started from a background job or `nohup`, which pass SIGINT on ignored (CI caught it: the
    failure's interrupt never arrived and the chat waited for a line)."""
    env = {**person_env, "ENGRAM_URL": live.url.rstrip("/"), "ENGRAM_API_KEY": "dev-cli-nobody"}
    command = " ".join(shlex.quote(part) for part in [*engram_command(), "chat", "Nobody"])
    chat = Terminal(["sh", "-c", f"trap '' INT; exec {command}"], env)
    chat.expect("you> ")
    assert "engram: no agent 'Nobody'" in chat.expect("(see `engram agents`)")
    assert chat.wait() == 1


def test_without_login_or_environment_it_says_how_to_log_in(person_env):
    code, shown = run(["agents"], person_env)
    assert code == 2 and "engram login" in shown


def test_help_lists_the_commands(person_env):
    code, shown = run(["--help"], person_env)
    assert code == 0
    for command in ("login", "agents", "chat", "facts", "memories", "runs", "usage"):
        assert command in shown


def test_chat_asks_before_a_held_tool_and_approvals_lists_and_decides(live, person_env):
    url = live.url.rstrip("/")
    user = f"dev-cli-{uuid.uuid4().hex[:8]}"
    with Client(url, user) as engram:
        engram.create_agent(name="Keeper", requireApproval=["remember"])
    env = {**person_env, "ENGRAM_URL": url, "ENGRAM_API_KEY": user}
    chat = Terminal(engram_command() + ["chat", "Keeper"], env)
    chat.expect("you> ")
    chat.type("remember that I only drink green tea\n")
    asked = chat.expect("Approve this call? [y/N] ")
    assert "[approval] remember" in asked and "green tea" in asked
    chat.type("n\n")
    chat.expect("Why not (a note for the agent, optional)? ")
    chat.type("not today\n")
    denied = chat.expect("you> ")
    assert "[approval] remember denied by" in denied and "[tool] remember failed" in denied
    chat.type("remember that I like jazz\n")
    chat.expect("Approve this call? [y/N] ")
    chat.type("y\n")
    approved = chat.expect("you> ")
    assert "[approval] remember approved by" in approved and "[tool] remember done" in approved
    chat.type("\x04")
    assert chat.wait() == 0

    code, waiting = run(["approvals"], env)
    assert code == 0 and "Nothing waits for your approval." in waiting
    with Client(url, user) as engram:  # a turn sent elsewhere waits; the command line decides it
        agent_id = next(a["id"] for a in engram.iter_agents() if a["name"] == "Keeper")
        engram.create_session(agent_id, id="side")
        paused = engram.send_message(agent_id, "side", "remember that I collect stamps")
        tool_use = paused["pendingApprovals"][0]["toolUseId"]
    code, waiting = run(["approvals"], env)
    assert code == 0 and paused["runId"] in waiting and "remember" in waiting and "stamps" in waiting
    code, said = run(["approvals", "deny", paused["runId"], tool_use, "--note", "no hobbies"], env)
    assert code == 0 and f"Denied {tool_use} of {paused['runId']}; the run resumes now." in said
    code, again = run(["approvals", "deny", paused["runId"], tool_use], env)
    assert code != 0 and ("already_decided" in again or "decided already" in again)
