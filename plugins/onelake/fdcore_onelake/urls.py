"""Environment URLs: every form a user may paste, turned into one Blob location.

The backend always talks to the **Blob** endpoint (Put Blob is the one atomic conditional write;
see docs/onelake.md), so each form maps to a blob account URL, a container and a name prefix:

* ``https://onelake.dfs.fabric.microsoft.com/<ws>/<item>.Lakehouse/Files/<folder>``, the same on
  ``onelake.blob.fabric.microsoft.com``, or with GUIDs ``/<ws-guid>/<item-guid>/Files/<folder>``:
  container ``<ws>``, prefix ``<item>.Lakehouse/Files/<folder>/``.
* ``abfss://<ws>@onelake.dfs.fabric.microsoft.com/<item>.Lakehouse/Files/<folder>``: the same.
* ``https://<acct>.dfs.core.windows.net/<container>/<folder>`` (or ``.blob.``), and
  ``abfss://<container>@<acct>.dfs.core.windows.net/<folder>``: container, prefix ``<folder>/``.
* ``http://127.0.0.1:10000/devstoreaccount1/<container>/<folder>`` (Azurite, path-style).

Regional OneLake hosts (``<region>-onelake.dfs.fabric.microsoft.com``) and the sovereign Azure
clouds' storage suffixes are accepted too. The folder is optional for ADLS and Azurite.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal
from urllib.parse import SplitResult, unquote, urlsplit

import attrs

from fdcore.errors import ConfigError

Kind = Literal["onelake", "adls", "emulator"]

_ONELAKE_HOST = re.compile(
    r"^(?P<region>[a-z0-9-]+-)?onelake\.(?:dfs|blob)\.(?P<suffix>fabric\.microsoft\.com)$"
)
_ACCOUNT_HOST = re.compile(
    r"^(?P<account>[a-z0-9]{3,24})\.(?:dfs|blob)\."
    r"(?P<suffix>core\.windows\.net|core\.chinacloudapi\.cn|core\.usgovcloudapi\.net)$"
)
_CONTAINER = re.compile(r"^(?=.{3,63}$)[a-z0-9](?:[a-z0-9]|-(?!-))*[a-z0-9]$")
_GUID = re.compile(r"^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")
# OneLake item names carry their type ("sales.Lakehouse"); only a Lakehouse has a Files area.
_LAKEHOUSE_ITEM = re.compile(r"^.+\.Lakehouse$")


@attrs.frozen
class Location:
    """Where one environment lives on the Blob surface."""

    kind: Kind
    account_url: str  # the blob service endpoint, e.g. https://acct.blob.core.windows.net
    account_name: str  # for shared-key signing ("onelake" for OneLake, which has no keys)
    container: str  # OneLake: the workspace
    prefix: str  # every blob name of the environment starts with it; "" or ends with "/"

    def blob_name(self, key: str) -> str:
        return self.prefix + key


def is_emulator_host(host: str) -> bool:
    """Path-style hosts (the account is the first path segment): loopback, IPs, ``localhost``."""
    if host == "localhost":
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def looks_like_azure(url: str) -> bool:
    """Whether ``url`` is in a form :func:`parse_location` handles (no I/O, no full check)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme == "abfss":
        return bool(_ONELAKE_HOST.match(host) or _ACCOUNT_HOST.match(host))
    if parts.scheme == "https" and (_ONELAKE_HOST.match(host) or _ACCOUNT_HOST.match(host)):
        return True
    return parts.scheme in ("http", "https") and is_emulator_host(host) and parts.port is not None


def parse_location(url: str) -> Location:
    """The Blob location of environment ``url``; a ConfigError naming the problem otherwise."""
    parts, port = _split(url)
    host = (parts.hostname or "").lower()
    path = _path(url, parts)
    if onelake := _ONELAKE_HOST.match(host):
        if parts.scheme == "http":
            raise _bad(url, "OneLake is served over https only")
        blob_host = f"{onelake['region'] or ''}onelake.blob.{onelake['suffix']}"
        return _onelake(url, f"https://{blob_host}", path)
    if account := _ACCOUNT_HOST.match(host):
        if parts.scheme == "http":
            raise _bad(url, "Azure Storage accounts are served over https only")
        name = account["account"]
        return _account(url, "adls", f"https://{name}.blob.{account['suffix']}", name, path)
    if is_emulator_host(host) and parts.scheme in ("http", "https"):
        if not path:
            raise _bad(url, "an emulator URL needs /<account>/<container>[/<folder>]")
        netloc = f"[{host}]" if ":" in host else host
        endpoint = f"{parts.scheme}://{netloc}{f':{port}' if port else ''}/{path[0]}"
        return _account(url, "emulator", endpoint, path[0], path[1:])
    raise _bad(
        url,
        f"host {host or '(none)'!r} is not OneLake (onelake.dfs.fabric.microsoft.com), "
        "an Azure Storage account (<account>.dfs.core.windows.net) or an emulator address",
    )


def _split(url: str) -> tuple[SplitResult, int | None]:
    """``url``'s parts and port, for a URL of a scheme this backend serves, with no query."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise _bad(url, f"not a valid URL ({exc})") from None
    if parts.query or parts.fragment:
        # A SAS token pasted into the URL would end up in logs and the mailbox's own records.
        raise _bad(url, "must not carry a query or fragment (put a SAS in connection_string_env)")
    if parts.scheme not in ("https", "http", "abfss"):
        hint = "use https://, abfss://, or http:// for Azurite"
        raise _bad(url, f"unsupported scheme {parts.scheme!r} ({hint})")
    return parts, port


def _path(url: str, parts: SplitResult) -> list[str]:
    """The path's segments, an abfss:// URL's container or workspace (before '@') first."""
    path = [unquote(segment) for segment in parts.path.split("/")]
    path = [segment for segment in path if segment]  # tolerate doubled and trailing slashes
    if parts.scheme == "abfss":
        if not parts.username or parts.password is not None:
            raise _bad(url, "abfss:// needs <container or workspace>@<host>")
        path.insert(0, unquote(parts.username))
    elif parts.username is not None:
        raise _bad(url, "only abfss:// URLs name a container before '@'")
    return path


def _onelake(url: str, endpoint: str, path: list[str]) -> Location:
    if len(path) < 3:
        raise _bad(url, "a OneLake URL needs /<workspace>/<item>.Lakehouse/Files[/<folder>]")
    workspace, item, area, *folder = path
    if not (_LAKEHOUSE_ITEM.match(item) or _GUID.match(item)):
        raise _bad(url, f"item {item!r} must be <name>.Lakehouse or the lakehouse's GUID")
    if area != "Files":
        raise _bad(url, f"the mailbox must live under the lakehouse's Files area, not {area!r}")
    _check_folder(url, folder)
    return Location("onelake", endpoint, "onelake", workspace, _prefix([item, area, *folder]))


def _account(url: str, kind: Kind, endpoint: str, account: str, path: list[str]) -> Location:
    if not path:
        raise _bad(url, "needs a container: .../<container>[/<folder>]")
    container, *folder = path
    if not _CONTAINER.match(container):
        raise _bad(
            url,
            f"container {container!r} is not a valid name (3-63 lowercase letters, digits, "
            "single hyphens)",
        )
    _check_folder(url, folder)
    return Location(kind, endpoint, account, container, _prefix(folder))


def _check_folder(url: str, folder: list[str]) -> None:
    for segment in folder:
        if segment in (".", "..") or segment.startswith(".") or "\\" in segment:
            raise _bad(url, f"folder segment {segment!r} is not allowed (dot name or backslash)")


def _prefix(segments: list[str]) -> str:
    return "".join(f"{segment}/" for segment in segments)


def _bad(url: str, message: str) -> ConfigError:
    return ConfigError(redact(url), None, message)


def redact(url: str) -> str:
    """``url`` safe to print: no password and no query (a SAS token is a secret)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url.split("?", 1)[0]
    authority, slash, path = rest.partition("/")
    user, at, host = authority.rpartition("@")
    if at and ":" in user:
        authority = f"{user.split(':', 1)[0]}:***@{host}"
    path = path.split("?", 1)[0].split("#", 1)[0]
    shown = f"{scheme}://{authority}{slash}{path}"
    return shown + ("?..." if "?" in rest else "")
