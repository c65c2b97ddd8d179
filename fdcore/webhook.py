"""One JSON POST to a webhook whose URL is a secret: bounded, retried, and never revealing it.

Shared by the webhook notifiers (fdcore-teams' ``teams``, contrib's ``webhook``): each builds its
message, :func:`webhook_from` reads the URL from the variable its route names, and
:meth:`Webhook.post` delivers it.

Retries 429 and 5xx (and connection failures), honouring ``Retry-After``, within a bounded total
time; any other 4xx is a configuration error, raised at once. The URL (a Teams Workflows URL
carries its signature in the query) never appears in an exception: messages name the environment
variable that holds it instead.
"""

from __future__ import annotations

import email.utils
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from datetime import timezone
from typing import Any

from fdcore.durations import parse_duration
from fdcore.errors import DurationError

__all__ = [
    "NOT_A_VARIABLE",
    "WEBHOOK_OPTIONS",
    "Webhook",
    "WebhookRefused",
    "WebhookUnavailable",
    "is_variable_name",
    "retry_after",
    "secret_from",
    "webhook_from",
]

#: Waits between attempts without a Retry-After (seconds).
BACKOFF = (1.0, 2.0, 4.0, 8.0)


class WebhookRefused(Exception):
    """The webhook answered a 4xx other than 429: its URL or the message is wrong; retrying will
    not help."""


class WebhookUnavailable(Exception):
    """The webhook kept failing (429, 5xx, no connection) until the bounded total ran out."""


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds, or an HTTP date); None if absent."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - now)


class Webhook:
    """POSTs JSON to the URL held in environment variable ``variable``."""

    def __init__(
        self,
        url: str,
        variable: str,
        *,
        timeout: float = 10.0,
        retry_for: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._url = url
        self.variable = variable
        self.timeout = timeout
        self.retry_for = retry_for
        self.sleep = sleep
        self.clock = clock
        self.posts = 0  # attempts made, for tests and logs

    def __repr__(self) -> str:  # never the URL
        return f"Webhook(${self.variable})"

    def _redact(self, text: str) -> str:
        return text.replace(self._url, f"${self.variable}")

    def post(self, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        """POST ``body``; return on 2xx, raise WebhookRefused or WebhookUnavailable otherwise."""
        deadline = self.clock() + self.retry_for
        attempt = 0
        while True:
            attempt += 1
            wait, problem = self._attempt(body, headers or {}, deadline, attempt)
            if problem is None:
                return
            if self.clock() + wait > deadline:
                attempts = f"{attempt} attempt{'s' if attempt > 1 else ''}"
                raise WebhookUnavailable(
                    f"webhook in ${self.variable} still failing after {attempts} "
                    f"within {self.retry_for:g}s: {problem}"
                )
            self.sleep(wait)

    def _attempt(
        self, body: bytes, headers: Mapping[str, str], deadline: float, attempt: int
    ) -> tuple[float, str | None]:
        """One POST: (0, None) on success, else (seconds to wait, what went wrong)."""
        backoff = BACKOFF[min(attempt - 1, len(BACKOFF) - 1)]
        request = urllib.request.Request(
            self._url,
            data=body,
            headers={"Content-Type": "application/json", **headers},
            method="POST",
        )
        timeout = max(0.1, min(self.timeout, deadline - self.clock()))
        self.posts += 1
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                response.read(65536)
            return 0.0, None
        except urllib.error.HTTPError as exc:
            code, reason = exc.code, self._redact(str(exc.reason))
            if code != 429 and code < 500:
                raise WebhookRefused(
                    f"webhook in ${self.variable} refused the post: HTTP {code} {reason} "
                    "(check the URL and that the flow accepts this message)"
                ) from None
            wait = retry_after(exc.headers.get("Retry-After"), time.time())
            return (backoff if wait is None else wait), f"HTTP {code} {reason}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            why = getattr(exc, "reason", None) or exc
            return backoff, self._redact(f"{type(exc).__name__}: {why}")


#: What an option naming a variable (``webhook_env``, ``connection_string_env``...) is told when
#: it holds something else: most likely the secret itself, pasted in, so never repeated.
NOT_A_VARIABLE = (
    "is not an environment variable's name: put the secret in an environment variable "
    "and give the variable's name here"
)
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")


def is_variable_name(value: object) -> bool:
    """Whether ``value`` can name an environment variable (letters, digits, ``_``)."""
    return isinstance(value, str) and _VARIABLE_NAME.fullmatch(value) is not None


def secret_from(options: Mapping[str, Any], key: str, what: str) -> tuple[str, str]:
    """(variable, value) of the environment variable option ``key`` names; ValueError naming the
    option or the variable, never the value (nor what the option holds, if not a name)."""
    variable = options.get(key)
    if not isinstance(variable, str) or not variable:
        raise ValueError(f"{key}: expected the name of the variable holding the {what}")
    if not is_variable_name(variable):
        raise ValueError(f"{key} {NOT_A_VARIABLE}")
    value = os.environ.get(variable, "")
    if not value:
        raise ValueError(f"{key}: environment variable {variable} is not set")
    return variable, value


def _seconds(options: Mapping[str, Any], key: str, default: float) -> float:
    value = options.get(key)
    if value is None:
        return default
    try:
        return parse_duration(value)
    except DurationError as exc:
        raise ValueError(f"{key}: {exc}") from None


#: The options :func:`webhook_from` reads.
WEBHOOK_OPTIONS = ("webhook_env", "timeout", "retry_for")


def webhook_from(options: Mapping[str, Any], what: str) -> Webhook:
    """The webhook a route's options describe: ``webhook_env`` (the variable holding the URL),
    ``timeout`` (per attempt, default 10s), ``retry_for`` (all attempts, default 1m)."""
    variable, url = secret_from(options, "webhook_env", f"{what} URL")
    if not url.startswith(("https://", "http://")):
        raise ValueError(f"webhook_env: {variable} does not hold an http(s) URL")
    return Webhook(
        url,
        variable,
        timeout=_seconds(options, "timeout", 10.0),
        retry_for=_seconds(options, "retry_for", 60.0),
    )
