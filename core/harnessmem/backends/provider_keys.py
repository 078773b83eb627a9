"""Which variable holds a model's API key, told without importing litellm.

``import litellm`` takes seconds (much more on a loaded machine), so the start-up check of
the litellm backend and of ``harnessmem chat`` answers from this table for the usual
providers: a name with a provider prefix (``openai/gpt-4o-mini``), or a bare OpenAI or
Anthropic name from litellm's bundled price list (``gpt-4o-mini``). For any other
name the caller asks litellm itself. The variable names are litellm's own
(``validate_environment``); ``tests/test_model_litellm.py`` checks them against it, and
docs/models.md lists the same table.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping

from harnessmem.tokens import litellm_package_dir

__all__ = [
    "AMBIENT_CREDENTIALS",
    "KEY_VARIABLE",
    "PROVIDER_KEYS",
    "bare_names",
    "key_variables",
    "missing_key",
]

#: Provider -> the variables that hold its key (any one will do); () when it needs none.
PROVIDER_KEYS: Mapping[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "mistral": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "cohere": ("COHERE_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "together_ai": ("TOGETHERAI_API_KEY",),
    "fireworks_ai": ("FIREWORKS_AI_API_KEY", "FIREWORKS_API_KEY"),
    "perplexity": ("PERPLEXITYAI_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "deepinfra": ("DEEPINFRA_API_KEY",),
    # Local servers: no key.
    "ollama": (),
    "ollama_chat": (),
    "hosted_vllm": (),
    "vllm": (),
    "lm_studio": (),
}

#: Providers whose credentials may come from the machine (instance roles, ADC), not a variable.
AMBIENT_CREDENTIALS = frozenset(
    {"bedrock", "bedrock_converse", "sagemaker", "sagemaker_chat", "vertex_ai", "vertex_ai_beta"}
)


#: Which of the ``missing_keys`` litellm's ``validate_environment`` reports hold a secret
#: (an API key or token), rather than a setting such as a region or an API base.
KEY_VARIABLE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD")

# The providers whose bare names litellm resolves from its price list (others need a prefix).
_BARE_PROVIDERS = frozenset({"openai", "anthropic"})


@functools.cache
def bare_names() -> dict[str, str]:
    """Bare model name -> provider, from litellm's bundled price list (OpenAI, Anthropic)."""
    package = litellm_package_dir()
    if package is None:
        return {}
    try:
        with (package / "model_prices_and_context_window_backup.json").open("rb") as file:
            prices = json.load(file)
    except (OSError, ValueError):
        return {}
    return {
        name: entry["litellm_provider"]
        for name, entry in prices.items()
        # a fine-tune id (ft:...) is the account's own: litellm tells it
        if "/" not in name
        and ":" not in name
        and isinstance(entry, dict)
        and entry.get("litellm_provider") in _BARE_PROVIDERS
    }


def _provider(model: str, custom_llm_provider: str | None, api_base: str | None) -> str | None:
    if custom_llm_provider:
        return custom_llm_provider
    prefix, slash, _ = model.partition("/")
    if slash:
        return prefix
    # litellm picks a bare name's provider from api_base when one is given: let it.
    return None if api_base else bare_names().get(model)


def key_variables(
    model: str, *, custom_llm_provider: str | None = None, api_base: str | None = None
) -> tuple[str, ...] | None:
    """The variables one of which must hold ``model``'s key: ``()`` when it needs none (a
    local server, or credentials from the machine); None when this table cannot tell (ask
    litellm)."""
    provider = _provider(model, custom_llm_provider, api_base)
    if provider in AMBIENT_CREDENTIALS:
        return ()
    return PROVIDER_KEYS.get(provider) if provider is not None else None


def missing_key(variables: tuple[str, ...], environ: Mapping[str, str] | None = None) -> bool:
    """True when none of ``variables`` is set to a non-empty value (and some are needed)."""
    env = os.environ if environ is None else environ
    return bool(variables) and not any(env.get(name) for name in variables)
