"""Where an environment lives: ``s3://bucket/folder`` and the ``[storage]`` options.

Credentials never come from here: agent.toml is read by people and copied around, so a key in
it is refused, and boto3's standard chain (environment variables, ``~/.aws``, a container or
instance role, SSO) supplies them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlsplit

import attrs

from fdcore.abc import validate_key
from fdcore.errors import ConfigError, InvalidKey

SCHEME = "s3"
# S3's rule for new buckets (3-63 of lowercase letters, digits, dots and hyphens, starting and
# ending with a letter or digit); stores that allow more (old us-east-1 buckets) are rare.
BUCKET = re.compile(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]")
ADDRESSING_STYLES = ("auto", "path", "virtual")
OPTIONS = {
    "endpoint_url": "an S3-compatible store's address, like http://127.0.0.1:9000",
    "region": "the bucket's region (else boto3's: AWS_REGION, ~/.aws/config)",
    "profile": "a profile of ~/.aws/config to take credentials and region from",
    "addressing_style": "path or virtual (bucket in the path or in the host name); auto",
}
SECRETS = ("key", "secret", "token", "password", "credential")


@attrs.frozen
class Location:
    """An opened URL: the bucket, the folder in it (``""`` or ending in ``/``), the options."""

    url: str
    bucket: str
    folder: str
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    addressing_style: str = "auto"

    def object_key(self, key: str) -> str:
        return self.folder + key


def looks_like_s3(url: str) -> bool:
    return url.lower().startswith(f"{SCHEME}://")


def parse_location(url: str, options: Mapping[str, str]) -> Location:
    """``s3://bucket[/folder...]`` and its options, or a ConfigError naming what is wrong."""
    parts = urlsplit(url)
    if parts.scheme.lower() != SCHEME:
        raise ConfigError(url, None, "not an s3:// URL")
    bucket = parts.netloc  # as written: a bucket name has no capitals, no port, no user
    if parts.query or parts.fragment or "@" in bucket or ":" in bucket:
        raise ConfigError(url, None, "an s3:// URL is s3://bucket/folder, with nothing else")
    if not BUCKET.fullmatch(bucket):
        raise ConfigError(
            url, None, f"bucket {bucket!r} is not a bucket name (3-63 of a-z 0-9 . -)"
        )
    folder = parts.path.strip("/")
    if folder:
        try:
            validate_key(folder)
        except InvalidKey as exc:
            raise ConfigError(url, None, f"folder {folder!r} is not usable: {exc}") from None
        folder += "/"
    _check_options(url, options)
    endpoint = options.get("endpoint_url") or None
    if endpoint is not None and urlsplit(endpoint).scheme not in ("http", "https"):
        raise ConfigError(url, "[storage] endpoint_url", f"{endpoint!r} is not an http(s) URL")
    style = options.get("addressing_style") or "auto"
    if style not in ADDRESSING_STYLES:
        raise ConfigError(
            url,
            "[storage] addressing_style",
            f"{style!r} is not one of {', '.join(ADDRESSING_STYLES)}",
        )
    return Location(
        url,
        bucket,
        folder,
        endpoint_url=endpoint,
        region=options.get("region") or None,
        profile=options.get("profile") or None,
        addressing_style=style,
    )


def _check_options(url: str, options: Mapping[str, str]) -> None:
    for name in options:
        if any(word in name.lower() for word in SECRETS):
            raise ConfigError(
                url,
                f"[storage] {name}",
                "credentials are never read from agent.toml: give them to boto3's standard "
                "chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ~/.aws, a role)",
            )
        if name not in OPTIONS:
            known = ", ".join(sorted(OPTIONS))
            raise ConfigError(
                url, f"[storage] {name}", f"unknown option (the s3 backend has {known})"
            )
