"""``harnessmem chat``: talk to an agent with memory (:class:`harnessmem.agent.Agent`)."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import click

from harnessmem import layout
from harnessmem.cli._common import (
    EXIT_CONFIG,
    EXIT_OK,
    CommandError,
    common_options,
    load_settings,
    open_harness,
    plural,
    report_error,
    shown_url,
)

if TYPE_CHECKING:
    from harnessmem.agent import Agent
    from harnessmem.harness import MemoryHarness

_HELP = (
    "/exit (or Ctrl-D) leaves; /memory shows the memory block the model gets; "
    "/compact [FOCUS] compacts the conversation now, keeping what FOCUS names; /help shows this"
)


@click.command("chat")
@common_options(as_json=False)
@click.option(
    "--model",
    "-m",
    "model_name",
    default=None,
    metavar="NAME",
    help="The agent's litellm model (openai/gpt-4o-mini, ollama/llama3.1, ...); "
    "default: model.name of the settings.",
)
@click.option("--api-base", default=None, help="Base URL of the model API (proxies, vLLM, Ollama).")
@click.option("--session", "session_id", default=None, help="Session id; default: chat-<time>.")
@click.option("--instructions", default=None, help="The agent's instructions (system prompt).")
def chat_command(
    config: str | None,
    workspace: str | None,
    model_name: str | None,
    api_base: str | None,
    session_id: str | None,
    instructions: str | None,
) -> None:
    """Chat with an agent that remembers: memory tools, compaction and flush included.

    The agent runs on a chat model through litellm, so it needs a model name (and the
    provider's key, e.g. OPENAI_API_KEY). What it learns goes to the workspace's daily
    logs like any session's.

    A failed turn (the model unreachable, a key rejected) prints an error and the chat
    goes on; when it ends, the exit status is that of the last failed turn (6 for a
    model error), so a script piping questions in learns that an answer is missing.
    """
    from harnessmem.agent import DEFAULT_INSTRUCTIONS, Agent

    settings, _ = load_settings(config, workspace)
    name = model_name or settings.model.name
    if not name:
        raise CommandError(
            "chat needs a chat model, and none is set",
            hint="pass --model openai/gpt-4o-mini (any litellm model name), or set model.name "
            "in harnessmem.toml or HARNESSMEM_MODEL__NAME; the key comes from the "
            "provider's variable, e.g. OPENAI_API_KEY",
            code=EXIT_CONFIG,
        )
    options = _litellm_options(settings.model.options if not model_name else {}, api_base)
    _check_model(name, options, given=bool(model_name))
    with open_harness(settings) as harness:
        session = harness.session(session_id or time.strftime("chat-%Y%m%d-%H%M%S"))
        agent = Agent(session, name, instructions=instructions or DEFAULT_INSTRUCTIONS, **options)
        _banner(harness, agent)
        status = _loop(agent)
    if status != EXIT_OK:
        sys.exit(status)


def _litellm_options(configured: dict[str, Any], api_base: str | None) -> dict[str, Any]:
    """The litellm arguments the chat passes: the configured ones it understands."""
    options = {
        key: configured[key]
        for key in ("api_base", "api_key", "api_version", "temperature", "timeout")
        if configured.get(key) is not None
    }
    if api_base:
        options["api_base"] = api_base
    # Retries by the provider's client (litellm's own retry loop needs tenacity).
    options.setdefault("num_retries", 0)
    options.setdefault("max_retries", 2)
    return options


def _check_model(name: str, options: dict[str, Any], *, given: bool) -> None:
    """A one-line error for an unknown provider or a missing key, before the prompt.

    The usual providers are checked without importing litellm (seconds), so a missing key
    fails at once; litellm checks the other names.
    """
    from harnessmem.backends.litellm_backend import LiteLLMBackend, key_variables, missing_key

    variables = key_variables(name, api_base=options.get("api_base"))
    if variables and not options.get("api_key") and missing_key(variables):
        what = f"chat --model {name!r}" if given else f"model.name {name!r}"
        also = "" if given else ", or set model.options.api_key"
        raise CommandError(
            f"{what} needs an API key: {' or '.join(variables)} is not set",
            hint=f"export {variables[0]}{also}",
            code=EXIT_CONFIG,
        )
    checked = {k: v for k, v in options.items() if k in ("api_base", "api_key", "api_version")}
    LiteLLMBackend.create(checked, model_name=name, where="model" if not given else "chat --model")


def _banner(harness: MemoryHarness, agent: Agent) -> None:
    from harnessmem.tokens import memory_tokens

    try:
        memory = harness.workspace.read_text(layout.MEMORY_FILE)
    except FileNotFoundError:
        memory = ""
    tools = ", ".join(s["function"]["name"] for s in agent.tool_schemas)
    where = shown_url(harness.workspace.url)
    click.echo(f"harnessmem chat · model {agent.model} · workspace {where}")
    tokens = memory_tokens(memory) if memory.strip() else 0
    state = f"MEMORY.md: {tokens:,} tokens" if tokens else "MEMORY.md is empty"
    click.echo(f"session {agent.session.id} · {state} · tools: {tools}")
    click.echo(_HELP)


def _loop(agent: Agent) -> int:
    """Read and answer until /exit or the end of input; the exit status of the chat."""
    facts = 0
    failures: list[int] = []  # exit statuses of the failed turns
    while True:
        try:
            text = input("you> ")
        except EOFError:
            click.echo("")
            break
        text = text.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            break
        if text == "/help":
            click.echo(_HELP)
            continue
        if text == "/memory":
            click.echo(agent.session.system_context() or "(MEMORY.md is empty)")
            continue
        if text == "/compact" or text.startswith("/compact "):
            before, after = agent.compact(text.removeprefix("/compact").strip() or None)
            if after < before:
                click.echo(f"compacted: {before} -> {after} messages (the rest is summarised)")
            else:
                click.echo(f"nothing to compact: {plural(before, 'message')} in the conversation")
            continue
        try:
            reply = agent.run(text)
        except Exception as exc:  # one failed turn does not end the chat
            from harnessmem.errors import HarnessMemError

            if not isinstance(exc, HarnessMemError):
                raise
            failures.append(report_error(exc))
            continue
        click.echo(click.style("agent> ", fg="cyan", bold=True) + reply.text)
        notes = []
        if reply.tool_calls:
            notes.append("used " + ", ".join(dict.fromkeys(reply.tool_calls)))
        flush = reply.flush
        if flush is not None and flush.written:
            facts += len(flush.entries)
            notes.append(f"remembered {plural(len(flush.entries), 'fact')} in {flush.path}")
        if reply.overflow_retries:
            notes.append("the context overflowed and was compacted")
        if notes:
            click.echo(click.style(f"       ({'; '.join(notes)})", dim=True))
    failed = f"; {plural(len(failures), 'turn')} failed" if failures else ""
    click.echo(f"bye: {plural(facts, 'fact')} written to the daily log in this chat{failed}")
    return failures[-1] if failures else EXIT_OK
