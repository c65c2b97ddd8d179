"""The Unix socket between a lane's holder, the dispatcher and the driver.

One request per connection on a ``SOCK_SEQPACKET`` socket (message boundaries kept): a JSON
object, with the lane's descriptor attached (``socket.send_fds``) where one moves. Requests:

- ``{"op": "enqueue", "lane": L, "entry": {...}}`` with the lane's descriptor: the holder hands
  the lane over, then closes its own copy;
- ``{"op": "next"}``: the driver asks for the next admitted lane and its token;
- ``{"op": "claim", "lane": L, "token": T}``: the reply carries the lane's descriptor; asked
  again with the same token after a lost reply, it carries none and says ``claimed_before``.

Every descriptor received is made non-inheritable at once, and every refusal closes them all.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from pathlib import Path
from typing import Any

from fdcore_admission.dispatcher import Dispatcher, set_dispatcher_mode
from fdcore_admission.errors import AdmissionRefused
from fdcore_admission.lanes import Lanes

SOCKET = "dispatcher.sock"  # in the host folder
MAX_MESSAGE = 256 * 1024
MAX_FDS = 8  # more than one is refused, but they are received (and closed) to say so
TIMEOUT = 10.0  # seconds any peer may take to answer: every read here is bounded


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, MAX_FDS)
    for fd in fds:
        os.set_inheritable(fd, False)
    try:
        message = json.loads(data)
        if not isinstance(message, dict):
            raise ValueError("not an object")
    except ValueError as exc:
        _close(fds)
        raise AdmissionRefused("ADMISSION_MESSAGE_INVALID", f"unreadable message: {exc}") from None
    return message, fds


def _send(conn: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    socket.send_fds(conn, [json.dumps(message).encode()], fds or [])


def _close(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


# -- the dispatcher's side -------------------------------------------------------------------


def listen(path: str | Path) -> socket.socket:
    path = Path(path)
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server.bind(str(path))
    server.listen(16)
    return server


def serve_one(dispatcher: Dispatcher, conn: socket.socket) -> None:
    """Answer one request on ``conn``; no error leaves (the peer gets a refusal instead)."""
    conn.settimeout(TIMEOUT)
    fds: list[int] = []
    try:
        message, fds = _receive(conn)
        op = message.get("op")
        if op == "enqueue":
            received, fds = fds, []  # enqueue owns them now: kept, or closed on refusal
            row = dispatcher.enqueue(str(message.get("lane")), received, message.get("entry") or {})
            _send(conn, {"ok": True, "lane": row.lane, "stage": row.stage})
        elif op == "next":
            admitted = dispatcher.admit_next()
            reply: dict[str, Any] = {"ok": True, "lane": None}
            if admitted is not None:
                reply = {
                    "ok": True,
                    "lane": admitted.lane,
                    "token": admitted.token,
                    "arguments": list(admitted.arguments),
                    "environment": admitted.environment,
                }
            _send(conn, reply)
        elif op == "claim":
            fd = dispatcher.claim(str(message.get("lane")), message.get("token"))
            if fd is None:  # this token's claim was answered before: its descriptor went then
                _send(conn, {"ok": True, "lane": message.get("lane"), "claimed_before": True})
                return
            try:
                _send(conn, {"ok": True, "lane": message.get("lane")}, [fd])
            finally:
                os.close(fd)  # the driver's copy holds the lane now
        else:
            raise AdmissionRefused("ADMISSION_MESSAGE_INVALID", f"unknown op {op!r}")
    except AdmissionRefused as exc:
        with contextlib.suppress(OSError):
            _send(conn, {"ok": False, "code": exc.code, "error": str(exc)})
    except OSError:
        pass  # the peer went away: nothing to answer
    finally:
        _close(fds)
        conn.close()


def serve(dispatcher: Dispatcher, server: socket.socket, poll_seconds: float = 1.0) -> None:
    """Answer requests until the process is stopped; expire starts and beat the heart between."""
    server.settimeout(poll_seconds)
    while True:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            dispatcher.expire()
            dispatcher.queue.heartbeat()
            continue
        serve_one(dispatcher, conn)


# -- the holder's and the driver's side -----------------------------------------------------


def _ask(
    path: str | Path, message: dict[str, Any], fds: list[int] | None = None
) -> tuple[dict[str, Any], list[int]]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
        conn.settimeout(TIMEOUT)
        conn.connect(str(path))
        _send(conn, message, fds)
        reply, received = _receive(conn)
    if not reply.get("ok"):
        _close(received)
        raise AdmissionRefused(str(reply.get("code")), str(reply.get("error")).partition(": ")[2])
    return reply, received


def hand_over(path: str | Path, lane: str, fd: int, entry: dict[str, Any]) -> None:
    """Give the held lane to the dispatcher; the caller then closes ``fd`` (the lane stays held)."""
    _ask(path, {"op": "enqueue", "lane": lane, "entry": entry}, [fd])


def next_admitted(path: str | Path) -> dict[str, Any] | None:
    reply, _ = _ask(path, {"op": "next"})
    return reply if reply.get("lane") else None


def claim(path: str | Path, lane: str, token: str) -> int:
    """The descriptor holding ``lane`` (non-inheritable): the caller holds the lane now.

    Idempotent: a driver that lost the reply (a timeout, a broken connection) calls it again with
    the same lane and token. If the first claim never reached the dispatcher, this one is it. If
    it did, the descriptor it carried closed with the lost reply, and the lane is taken here
    directly if nobody holds it now (ADMISSION_LANE_BUSY if another process took it meanwhile:
    it is theirs). A reply with more descriptors than one keeps the first and closes the rest.
    """
    reply, fds = _ask(path, {"op": "claim", "lane": lane, "token": token})
    _close(fds[1:])
    if fds:
        return fds[0]
    if not reply.get("claimed_before"):
        raise AdmissionRefused("ADMISSION_DESCRIPTORS", f"lane {lane}: no descriptor in reply")
    fd = Lanes(Path(path).parent).try_hold(lane)
    if fd is None:
        raise AdmissionRefused(
            "ADMISSION_LANE_BUSY",
            f"lane {lane}: claimed before with this token, held by another now",
        )
    return fd


def run_dispatcher(folder: str | Path) -> None:
    """Recover the stored rows, enter dispatcher mode and answer requests until killed.

    Killed (SIGTERM, SIGKILL), the dispatcher's descriptors close: its lanes are free, and its
    rows wait in SQLite for the next dispatcher to recover them.
    """
    folder = Path(folder)
    dispatcher = Dispatcher(folder)
    dropped = dispatcher.recover()
    server = listen(folder / SOCKET)
    set_dispatcher_mode(folder, True)
    print(f"dispatcher ready on {folder / SOCKET}; rows dropped: {len(dropped)}", flush=True)
    serve(dispatcher, server)
