"""The lane moves holder -> dispatcher -> driver over real Unix sockets between real processes,
and is never free in between; a dispatcher killed with SIGKILL recovers without stealing."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fdcore_admission.dispatcher import Dispatcher, set_dispatcher_mode
from fdcore_admission.errors import AdmissionRefused
from fdcore_admission.lanes import Lanes
from fdcore_admission.wire import claim, next_admitted, serve_one

pytestmark = [pytest.mark.slow, pytest.mark.processes]

HOLDER = """
import os, sys, time
from fdcore_admission.lanes import Lanes
from fdcore_admission.wire import hand_over
folder, lane = sys.argv[1], sys.argv[2]
fd = Lanes(folder).try_hold(lane)
assert fd is not None, "the lane should be free for the holder"
open(os.path.join(folder, lane + ".holding"), "w").close()  # the watcher starts now
time.sleep(0.2)
hand_over(os.path.join(folder, "dispatcher.sock"), lane, fd,
          {"queued_at": time.time(), "priority": 1, "environment": dict(os.environ)})
os.close(fd)
"""

WATCHER = """
import os, sys, time
from fdcore_admission.lanes import Lanes
folder, lane, marker, out = sys.argv[1:]
deadline = time.monotonic() + 60
while not os.path.exists(os.path.join(folder, lane + ".holding")):
    time.sleep(0.002)
while time.monotonic() < deadline:
    fd = Lanes(folder).try_hold(lane)
    if fd is not None:
        with open(out, "w") as f:
            f.write("after-driver" if os.path.exists(marker) else "GAP")
        sys.exit(0)
    time.sleep(0.002)
sys.exit(3)
"""

DRIVER = """
import os, sys, time
from fdcore_admission.wire import claim, next_admitted
folder, marker = sys.argv[1:]
path = os.path.join(folder, "dispatcher.sock")
admitted = next_admitted(path)
fd = claim(path, admitted["lane"], admitted["token"])
print(admitted["lane"], os.get_inheritable(fd), sorted(admitted["environment"]), flush=True)
time.sleep(0.5)
open(marker, "w").close()
"""  # exits: its descriptor, the last one on the lane, closes


def python(code: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "FDCORE_SECRET_TOKEN": "x", "FDCORE_TABLE": "sales"},
    )


@pytest.fixture
def dispatcher_process(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    process = start_dispatcher(tmp_path)
    yield process
    process.kill()
    process.wait()


def start_dispatcher(folder: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "fdcore.cli", "admission", "serve", "--host", str(folder)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().startswith("dispatcher ready on ")
    return process


def test_the_lane_is_never_free_between_holder_dispatcher_and_driver(
    tmp_path: Path, dispatcher_process: subprocess.Popen[str]
) -> None:
    marker, out = tmp_path / "driver-done", tmp_path / "watcher.out"
    # the watcher tries the lane every 2 ms from the moment the holder has it until it is free
    watcher = python(WATCHER, tmp_path, "sales", marker, out)
    holder = python(HOLDER, tmp_path, "sales")
    assert holder.wait(30) == 0  # handed over and exited: only the dispatcher holds the lane
    time.sleep(0.5)
    assert watcher.poll() is None, "the lane was free while the dispatcher held it"
    driver = python(DRIVER, tmp_path, marker)
    stdout, _ = driver.communicate(timeout=30)
    assert driver.returncode == 0
    lane, inheritable, names = stdout.split(" ", 2)
    assert (lane, inheritable) == ("sales", "False")
    assert "FDCORE_TABLE" in names and "FDCORE_SECRET_TOKEN" not in names
    assert watcher.wait(30) == 0
    assert out.read_text() == "after-driver"


def test_a_sigkilled_dispatcher_restarts_without_stealing_a_lane(tmp_path: Path) -> None:
    dispatcher = start_dispatcher(tmp_path)
    sock = tmp_path / "dispatcher.sock"
    for lane in ("kept", "taken"):
        assert python(HOLDER, tmp_path, lane).wait(30) == 0
    assert not Lanes(tmp_path).is_free("kept") and not Lanes(tmp_path).is_free("taken")
    dispatcher.send_signal(signal.SIGKILL)
    dispatcher.wait()
    other = Lanes(tmp_path).try_hold("taken")  # the lanes are free now; someone takes one
    assert other is not None
    restarted = start_dispatcher(tmp_path)
    try:
        admitted = next_admitted(sock)
        assert admitted is not None and admitted["lane"] == "kept"
        assert next_admitted(sock) is None  # "taken"'s row was dropped
        assert not Lanes(tmp_path).is_free("kept")  # the new dispatcher holds it again
        fd = claim(sock, "kept", admitted["token"])
        os.close(fd)
    finally:
        restarted.kill()
        restarted.wait()
        os.close(other)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_refusals_over_the_socket_close_every_descriptor_received(tmp_path: Path) -> None:
    set_dispatcher_mode(tmp_path, True)
    dispatcher = Dispatcher(tmp_path)
    lanes = Lanes(tmp_path)
    holding = lanes.try_hold("sales")
    stranger = os.open(tmp_path / "mode.json", os.O_RDONLY)
    assert holding is not None
    try:
        before = open_descriptors()
        for fds, entry in (
            ([holding, stranger], {"queued_at": 1.0, "priority": 1}),  # two descriptors
            ([stranger], {"queued_at": 1.0, "priority": 1}),  # not the lane's file
            ([holding], {"priority": 1}),  # no queue start
        ):
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            message = (
                b'{"op": "enqueue", "lane": "sales", "entry": '
                + repr(entry).replace("'", '"').encode()
                + b"}"
            )
            socket.send_fds(ours, [message], fds)
            serve_one(dispatcher, theirs)
            reply = ours.recv(4096)
            ours.close()
            assert b'"ok": false' in reply
            assert open_descriptors() == before, "a refused descriptor was left open"
        assert dispatcher.queue.rows() == []
        with pytest.raises(AdmissionRefused, match="ADMISSION_NOT_STARTING"):
            dispatcher.claim("sales", "t")
    finally:
        os.close(holding)
        os.close(stranger)
        dispatcher.close()


LANE_SENDER = """
import os, socket, sys
from fdcore_admission.lanes import Lanes
folder, count = sys.argv[1], int(sys.argv[2])
server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
server.bind(os.path.join(folder, "dispatcher.sock"))
server.listen(1)
lane = Lanes(folder).try_hold("sales")
extra = [os.open(os.devnull, os.O_RDONLY) for _ in range(max(count - 1, 0))]
print("ready", flush=True)
conn, _ = server.accept()
conn.recv(4096)
socket.send_fds(conn, [b'{"ok": true, "lane": "sales"}'], ([lane] + extra)[:count])
conn.close()
"""  # a peer answering a claim with ``count`` descriptors, the lane's first; exits after


def claim_from(tmp_path: Path, count: int) -> int:
    sender = python(LANE_SENDER, tmp_path, count)
    try:
        assert sender.stdout is not None and sender.stdout.readline() == "ready\n"
        return claim(tmp_path / "dispatcher.sock", "sales", "t")
    finally:
        assert sender.wait(30) == 0


def test_a_claim_reply_with_several_descriptors_keeps_the_first_and_closes_the_rest(
    tmp_path: Path,
) -> None:
    before = open_descriptors()
    fd = claim_from(tmp_path, 3)
    assert open_descriptors() == before + 1, "a descriptor of the reply was left open"
    lane = os.stat(Lanes(tmp_path).path("sales"))
    assert (os.fstat(fd).st_dev, os.fstat(fd).st_ino) == (lane.st_dev, lane.st_ino)
    assert not os.get_inheritable(fd)
    assert not Lanes(tmp_path).is_free("sales")  # the sender exited: the kept copy holds it
    os.close(fd)
    assert Lanes(tmp_path).is_free("sales")


def test_a_claim_reply_without_a_descriptor_is_refused(tmp_path: Path) -> None:
    before = open_descriptors()
    with pytest.raises(AdmissionRefused, match=r"ADMISSION_DESCRIPTORS.*no descriptor"):
        claim_from(tmp_path, 0)
    assert open_descriptors() == before


def lose_claim_reply(sock: Path, lane: str, token: str) -> None:
    """Send a claim and hang up without reading the reply, as a driver that timed out does."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
        conn.connect(str(sock))
        conn.send(json.dumps({"op": "claim", "lane": lane, "token": token}).encode())


def wait_claimed(folder: Path, lane: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if Lanes(folder).is_free(lane):  # the reply's descriptor closed with the connection
            return
        time.sleep(0.02)
    pytest.fail(f"lane {lane} still held after the lost claim")


@pytest.mark.parametrize("taken_meanwhile", [False, True])
def test_a_driver_whose_claim_reply_was_lost_claims_again_with_its_token(
    tmp_path: Path, dispatcher_process: subprocess.Popen[str], taken_meanwhile: bool
) -> None:
    sock = tmp_path / "dispatcher.sock"
    assert python(HOLDER, tmp_path, "sales").wait(30) == 0
    admitted = next_admitted(sock)
    assert admitted is not None
    lose_claim_reply(sock, "sales", admitted["token"])
    wait_claimed(tmp_path, "sales")
    other = Lanes(tmp_path).try_hold("sales") if taken_meanwhile else None
    try:
        if taken_meanwhile:
            with pytest.raises(AdmissionRefused, match=r"ADMISSION_LANE_BUSY.*claimed before"):
                claim(sock, "sales", admitted["token"])
            return
        fd = claim(sock, "sales", admitted["token"])
        assert not Lanes(tmp_path).is_free("sales") and not os.get_inheritable(fd)
        os.close(fd)
        with pytest.raises(AdmissionRefused, match="ADMISSION_NOT_STARTING"):
            claim(sock, "sales", "another token")
    finally:
        if other is not None:
            os.close(other)
