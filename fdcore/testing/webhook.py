"""A real HTTP webhook on 127.0.0.1 that records every post, for notifier tests.

``answers`` scripts the replies in order (then 200 for every later post): a status, headers, and
a delay before answering (a hanging webhook). Used by fdcore's incident tests and fdcore-teams'.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

__all__ = [
    "Answer",
    "Post",
    "RecordingWebhook",
    "recording_webhook",
]


@attrs.frozen
class Answer:
    status: int = 200
    headers: dict[str, str] = attrs.field(factory=dict)
    delay: float = 0.0  # seconds before answering


@attrs.frozen
class Post:
    """One request the webhook received, and what it answered."""

    path: str
    headers: dict[str, str]
    body: bytes
    status: int
    at: float  # time.monotonic() when it arrived

    def json(self) -> Any:
        return json.loads(self.body)


class RecordingWebhook:
    """The server; ``url`` takes a secret query string like a Teams Workflows URL does."""

    def __init__(self, answers: list[Answer] | None = None) -> None:
        self.answers = list(answers or [])
        self.posts: list[Post] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        webhook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                arrived = time.monotonic()
                with webhook._lock:
                    answer = webhook.answers.pop(0) if webhook.answers else Answer()
                    webhook.posts.append(
                        Post(self.path, dict(self.headers), body, answer.status, arrived)
                    )
                if answer.delay:
                    webhook._closing.wait(answer.delay)
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: a test reads self.posts

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str = "/workflows/hook", query: str = "sig=secret") -> str:
        return f"http://127.0.0.1:{self.port}{path}?{query}"

    @property
    def delivered(self) -> list[Post]:
        """The posts answered 2xx."""
        return [post for post in self.posts if 200 <= post.status < 300]

    def start(self) -> RecordingWebhook:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def recording_webhook(answers: list[Answer] | None = None) -> Iterator[RecordingWebhook]:
    webhook = RecordingWebhook(answers).start()
    try:
        yield webhook
    finally:
        webhook.close()
