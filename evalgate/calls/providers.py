"""Judge (and chat-model target) providers. All of them speak the OpenAI chat-completions protocol, so
they differ only in base URL, API key variable, default model and a few capabilities.

| provider | base URL (``judge_base_url`` overrides) | key variable(s) | default model |
|---|---|---|---|
| ``openai`` | https://api.openai.com/v1 | ``OPENAI_API_KEY`` | gpt-4o-mini |
| ``gemini`` | https://generativelanguage.googleapis.com/v1beta/openai/ | ``GOOGLE_API_KEY`` or ``GEMINI_API_KEY`` | gemini-2.0-flash |
| ``ollama`` | ``OLLAMA_BASE_URL`` + ``/v1`` | none (the base URL is required) | qwen2.5:14b-instruct |
| ``local`` | ``judge_base_url`` (required) | ``LOCAL_JUDGE_API_KEY`` | local-model |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from evalgate.errors import UserError
from evalgate.safety.redact import register_secret, split_credentials


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """Static facts about one provider."""

    name: str
    base_url: str | None
    key_variables: tuple[str, ...]
    default_model: str
    base_url_variable: str | None = None
    supports_seed: bool = True
    self_hosted: bool = False
    """Self-hosted models cost nothing per token unless ``prices`` says otherwise."""


PROVIDERS: dict[str, ProviderSpec] = {
    "openai": ProviderSpec("openai", "https://api.openai.com/v1", ("OPENAI_API_KEY",), "gpt-4o-mini"),
    "gemini": ProviderSpec(
        "gemini", "https://generativelanguage.googleapis.com/v1beta/openai/", ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
        "gemini-2.0-flash", supports_seed=False,
    ),
    "ollama": ProviderSpec("ollama", None, (), "qwen2.5:14b-instruct", base_url_variable="OLLAMA_BASE_URL",
                           self_hosted=True),
    "local": ProviderSpec("local", None, ("LOCAL_JUDGE_API_KEY",), "local-model", self_hosted=True),
}
NO_KEY = "no-key-required"
"""Sent as the bearer token to providers that take none (Ollama); the openai client insists on one."""


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """A provider resolved against settings and the environment: ready to build a client."""

    spec: ProviderSpec
    base_url: str
    """The configured base URL (``judge_base_url`` for the judge), else the provider's base URL variable
    (``OLLAMA_BASE_URL`` + ``/v1``), else its fixed URL; no trailing ``/`` and no ``user:password@``."""
    api_key: str
    """A secret (registered for redaction): the key variable's value, the ``api_key`` the caller was given,
    or ``NO_KEY`` for a provider that takes none."""
    model: str
    key_variable: str | None
    """Where ``api_key`` came from, safe to print: the environment variable, the caller's ``api_key_origin``,
    or None (no key needed)."""
    authorization: str | None = None
    """``Basic …`` when the base URL carried ``user:password@``: sent instead of ``Bearer <key>`` (one
    Authorization header, never both); ``base_url`` is then the URL without them."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def authorization_header(self) -> str:
        """The Authorization header value: the URL's credentials, else the API key as a bearer token."""
        return self.authorization or f"Bearer {self.api_key}"

    def describe(self) -> dict[str, object]:
        """Safe to print: never contains the key itself."""
        return {"provider": self.name, "model": self.model, "base_url": self.base_url,
                "key_variable": self.key_variable}


def resolve_provider(
    name: str,
    *,
    model: str | None,
    base_url: str | None,
    env: Mapping[str, str],
    setting: str = "judge_provider",
    base_url_setting: str = "EVALGATE_JUDGE_BASE_URL",
    api_key: str | None = None,
    api_key_origin: str = "judge_api_key",
) -> ProviderConfig:
    """Resolve ``name`` into a base URL, key and model (key and base URL variables read from ``env``, the
    environment the caller was given); a missing key or base URL is a ``UserError``. ``api_key``, when
    given, is used instead of the provider's key variables (``api_key_origin`` names where it came from)."""
    spec = PROVIDERS.get(name)
    if spec is None:
        raise UserError(f"unknown provider {name!r}; choose one of {', '.join(PROVIDERS)}", where=setting)
    if api_key:
        key_variable: str | None = api_key_origin
    else:
        key_variable, api_key = _find_key(spec, env, setting)
    url, authorization = split_credentials(_base_url(spec, base_url, env, setting, base_url_setting))
    register_secret(api_key)
    return ProviderConfig(spec=spec, base_url=url, api_key=api_key, model=model or spec.default_model,
                          key_variable=key_variable, authorization=authorization)


def missing_key(name: str, env: Mapping[str, str], api_key: str | None = None) -> str | None:
    """The key variable(s) provider ``name`` needs and ``env`` lacks (``"OPENAI_API_KEY"``), or None when it has
    one, takes none, or is unknown (``resolve_provider`` reports that)."""
    spec = PROVIDERS.get(name)
    if spec is None or api_key or not spec.key_variables:
        return None
    if any(env.get(variable, "").strip() for variable in spec.key_variables):
        return None
    return " or ".join(spec.key_variables)


def _find_key(spec: ProviderSpec, env: Mapping[str, str], setting: str) -> tuple[str | None, str]:
    if not spec.key_variables:
        return None, NO_KEY
    for variable in spec.key_variables:
        value = env.get(variable, "").strip()
        if value:
            return variable, value
    names = " or ".join(spec.key_variables)
    raise UserError(f"provider {spec.name!r} needs an API key: set {names}", where=setting)


def _base_url(spec: ProviderSpec, configured: str | None, env: Mapping[str, str], setting: str,
              base_url_setting: str) -> str:
    if configured:
        return configured.rstrip("/")
    if spec.base_url_variable and env.get(spec.base_url_variable, "").strip():
        return _with_v1(env[spec.base_url_variable].strip())
    if spec.base_url:
        return spec.base_url.rstrip("/")
    hint = f"set {spec.base_url_variable} or " if spec.base_url_variable else "set "
    raise UserError(f"provider {spec.name!r} needs a base URL: {hint}{base_url_setting}", where=setting)


def _with_v1(url: str) -> str:
    """Ollama's OpenAI-compatible API lives under ``/v1`` of its base URL."""
    url = url.rstrip("/")
    return url if url.endswith("/v1") else f"{url}/v1"
