"""Which credential an environment is opened with.

* By default, Microsoft Entra ID through azure-identity's ``DefaultAzureCredential`` (managed
  identity, workload identity, environment variables, Azure CLI login, ...): the only kind
  OneLake accepts.
* ``[storage] connection_string_env = "NAME"``: the environment variable ``NAME`` holds a
  connection string; its ``AccountKey`` or ``SharedAccessSignature`` is used.
* ``[storage] account_key_env = "NAME"``: the environment variable ``NAME`` holds the account key.
* An Azurite URL (``devstoreaccount1``) with neither option uses the emulator's published
  development key, so a local emulator works with no set-up.

The URL always says where the environment is; a connection string supplies only the secret, and
an ``AccountName`` in it must match the URL's account. Secrets are read from the environment at
open time and never written to the mailbox, logs or error messages.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping
from typing import Any

import attrs

from fdcore.errors import ConfigError
from fdcore.webhook import NOT_A_VARIABLE, is_variable_name
from fdcore_onelake.urls import Location, redact

CONNECTION_STRING_ENV = "connection_string_env"
ACCOUNT_KEY_ENV = "account_key_env"
OPTIONS = (CONNECTION_STRING_ENV, ACCOUNT_KEY_ENV)

#: Azurite's well-known development account; public, documented, and useless outside an emulator.
EMULATOR_ACCOUNT = "devstoreaccount1"
EMULATOR_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


@attrs.frozen
class Credential:
    """What the SDK is given, and a secret-free identity to share one client per credential."""

    identity: str  # e.g. "entra" or "key:<account>:<hash>"; never the secret itself
    description: str  # for messages: "account key from $NAME"
    value: Any = attrs.field(repr=False)  # TokenCredential, shared-key dict or SAS string


_default: dict[int, Any] = {}  # pid -> DefaultAzureCredential (one per process, token cache)
_default_lock = threading.Lock()


def default_azure_credential() -> Any:
    """The process's one DefaultAzureCredential (it caches tokens, so share it)."""
    with _default_lock:
        credential = _default.get(os.getpid())
        if credential is None:
            from azure.identity import DefaultAzureCredential  # slow import, only when used

            credential = _default[os.getpid()] = DefaultAzureCredential()
        return credential


def resolve_credential(
    url: str,
    location: Location,
    options: Mapping[str, str],
    environ: Mapping[str, str] = os.environ,
) -> Credential:
    """The credential ``options`` ask for, or a ConfigError naming the option at fault."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        name = unknown[0]
        raise ConfigError.unknown_key(
            redact(url),
            f"[storage] {name}",
            name,
            ["backend", *OPTIONS],
            "unknown option for the onelake backend",
        )
    chosen = [name for name in OPTIONS if options.get(name)]
    if len(chosen) > 1:
        raise ConfigError(redact(url), "[storage]", f"set only one of {' and '.join(chosen)}")
    if not chosen:
        if location.kind == "emulator" and location.account_name == EMULATOR_ACCOUNT:
            return _shared_key(EMULATOR_ACCOUNT, EMULATOR_KEY, "the Azurite development key")
        return Credential("entra", "Microsoft Entra ID (DefaultAzureCredential)", None)
    option = chosen[0]
    variable = options[option]
    where = f"[storage] {option}"
    if not is_variable_name(variable):
        raise ConfigError(redact(url), where, NOT_A_VARIABLE)
    secret = environ.get(variable, "").strip()
    if not secret:
        raise ConfigError(redact(url), where, f"environment variable {variable} is not set")
    if option == ACCOUNT_KEY_ENV:
        if location.kind == "onelake":
            raise ConfigError(
                redact(url), where, "OneLake has no account keys; use Microsoft Entra ID (unset it)"
            )
        return _shared_key(location.account_name, secret, f"account key from ${variable}")
    return _from_connection_string(url, location, where, variable, secret)


def _from_connection_string(
    url: str, location: Location, where: str, variable: str, text: str
) -> Credential:
    fields: dict[str, str] = {}
    for part in text.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep:
            fields[name.strip().lower()] = value.strip()
    if fields.get("usedevelopmentstorage", "").lower() == "true":
        fields.setdefault("accountname", EMULATOR_ACCOUNT)
        fields.setdefault("accountkey", EMULATOR_KEY)
    account = fields.get("accountname")
    if account and account != location.account_name and location.kind != "onelake":
        raise ConfigError(
            redact(url),
            where,
            f"${variable} names account {account!r}, the URL names {location.account_name!r}",
        )
    if fields.get("sharedaccesssignature"):
        sas = fields["sharedaccesssignature"]
        digest = _digest(sas)
        return Credential(f"sas:{digest}", f"shared access signature from ${variable}", sas)
    if fields.get("accountkey"):
        if location.kind == "onelake":
            message = "OneLake has no account keys; use a SAS or Entra ID"
            raise ConfigError(redact(url), where, message)
        key_from = f"account key from the connection string in ${variable}"
        return _shared_key(location.account_name, fields["accountkey"], key_from)
    raise ConfigError(
        redact(url), where, f"${variable} holds no AccountKey or SharedAccessSignature"
    )


def _shared_key(account: str, key: str, description: str) -> Credential:
    value = {"account_name": account, "account_key": key}
    return Credential(f"key:{account}:{_digest(key)}", description, value)


def _digest(secret: str) -> str:
    # Distinguishes two secrets for client sharing without keeping the secret in the key.
    return hashlib.sha256(secret.encode()).hexdigest()[:16]
