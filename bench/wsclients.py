"""Bench clients for bench/fanout.py: websockets that keep every frame with its arrival time, HTTP as a
browser (session cookie, CSRF, htmx headers), the per-round report, and an optional py-spy recording of
a server during the timed rounds. Not app code."""

from __future__ import annotations

import asyncio
import functools
import re
import signal
import subprocess
import time

from benchlib import BIN, pct

# What a frame is looked for by: a text in it, a pattern, or both (the text first: a cheap test).
Needle = str | re.Pattern | tuple[str, re.Pattern]


def matches(needle: Needle, text: str) -> bool:
    if isinstance(needle, tuple):
        return needle[0] in text and needle[1].search(text) is not None
    return needle in text if isinstance(needle, str) else needle.search(text) is not None


@functools.cache
def _timed_connection() -> type:
    """websockets' client connection that notes when each text frame arrived: when the client's loop
    read it off the socket and parsed it, not when the socket's reader task got to it (with 1,000
    sockets in one client process, those tasks run one after the other: tens of milliseconds of the
    client's own, not the server's)."""
    from collections import deque

    from websockets.asyncio.client import ClientConnection
    from websockets.frames import Opcode

    class TimedConnection(ClientConnection):
        def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
            super().__init__(*args, **kwargs)
            self.arrivals: deque[float] = deque()

        def process_event(self, event) -> None:  # noqa: ANN001
            if self.response is not None and event.opcode is Opcode.TEXT:
                self.arrivals.append(time.perf_counter())  # unfragmented: one frame per message
            super().process_event(event)

    return TimedConnection


class Socket:
    """One websocket client: keeps every frame with its arrival time."""

    def __init__(self) -> None:
        self.frames: list[tuple[float, str]] = []
        self.ws = None
        self.task: asyncio.Task | None = None
        self.closed = ""  # why the server ended it, if it did
        self.closing = False

    retries = 0  # handshakes retried, over all sockets
    extensions = ""  # what the server's handshake answered to the client's permessage-deflate offer
    missed = 0  # frames not received in time, over all rounds
    dropped = 0  # sockets the server ended

    async def open(self, url: str, cookie: str, origin: str) -> Socket:
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake

        headers = {"Cookie": f"sessionid={cookie}", "Origin": origin}
        for attempt in range(3):  # a busy server may drop a handshake: count it, retry
            try:
                self.ws = await connect(
                    url,
                    additional_headers=headers,
                    max_size=None,
                    ping_interval=None,
                    open_timeout=120,
                    create_connection=_timed_connection(),
                )
                break
            except (OSError, InvalidHandshake):
                Socket.retries += 1
                if attempt == 2:
                    raise
                await asyncio.sleep(0.5)
        Socket.extensions = self.ws.response.headers.get("Sec-WebSocket-Extensions") or "none"
        self.task = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        try:
            arrivals = self.ws.arrivals
            async for frame in self.ws:
                at = arrivals.popleft() if arrivals else time.perf_counter()
                self.frames.append((at, frame if isinstance(frame, str) else frame.decode()))
            if not self.closing:
                self.closed = f"closed by the server ({self.ws.close_code})"
        except Exception as exc:  # noqa: BLE001 - recorded: a dropped socket misses frames
            self.closed = repr(exc)

    def first(self, needle: Needle, after: float, start: int = 0) -> tuple[float | None, int]:
        """When the first frame from `start` on, received after `after`, matched; and where to go on from."""
        frames = self.frames
        for i in range(start, len(frames)):
            at, text = frames[i]
            if at >= after and matches(needle, text):
                return at, i
        return None, len(frames)

    async def close(self) -> None:
        self.closing = True
        if self.ws is not None:
            await self.ws.close()
        if self.task is not None:
            await asyncio.gather(self.task, return_exceptions=True)


async def open_sockets(n: int, url: str, cookie: str, origin: str, batch: int = 50) -> list[Socket]:
    sockets: list[Socket] = []
    for i in range(0, n, batch):
        sockets += await asyncio.gather(*(Socket().open(url, cookie, origin) for _ in range(min(batch, n - i))))
    return sockets


async def wait_all(sockets: list[Socket], needle: Needle, after: float, timeout: float) -> list[float | None]:
    """When each socket received its first frame matching `needle` after `after` (None: not within timeout).
    Each poll reads only the frames that came since the last one: the client stays cheap while it waits."""
    deadline = time.monotonic() + timeout
    got: list[float | None] = [None] * len(sockets)
    seen = [0] * len(sockets)
    while True:
        for i, s in enumerate(sockets):
            if got[i] is None:
                got[i], seen[i] = s.first(needle, after, seen[i])
        if all(g is not None for g in got) or time.monotonic() >= deadline:
            return got
        await asyncio.sleep(0.05)


async def settle(sockets: list[Socket], quiet: float = 2.0, limit: float = 180) -> None:
    """Wait until no socket has received a frame for `quiet` seconds (the last round's tail is over)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        last = max((s.frames[-1][0] for s in sockets if s.frames), default=0)
        if time.perf_counter() - last >= quiet:
            return
        await asyncio.sleep(0.2)
    print(f"  (warning: frames still arriving after {limit:.0f} s; the next round overlaps this one's tail)")


class Web:
    """HTTP as a browser: session cookie, CSRF token from a page, htmx headers."""

    def __init__(self, base: str, cookie: str) -> None:
        import httpx

        self.client = httpx.AsyncClient(base_url=base, cookies={"sessionid": cookie}, timeout=120)

    async def post(self, path: str, data: dict, page: str) -> int:
        if "csrftoken" not in self.client.cookies:
            (await self.client.get(page)).raise_for_status()
        headers = {
            "X-CSRFToken": self.client.cookies["csrftoken"],
            "HX-Request": "true",
            "Referer": str(self.client.base_url),
        }
        response = await self.client.post(path, data=data, headers=headers)
        if response.status_code >= 400:
            raise RuntimeError(f"POST {path}: HTTP {response.status_code}: {response.text[:300]}")
        return response.status_code


def report(
    label: str,
    sent: float,
    got: list[float | None],
    target: str,
    sockets: list[Socket] | None = None,
    needle: tuple[str, re.Pattern] | None = None,
) -> list[float]:
    ms = [(g - sent) * 1000 for g in got if g is not None]
    missed = sum(g is None for g in got)
    Socket.missed += missed
    print(
        f"{label:<44}{len(got):>7}{pct(ms, 0.5):>9.0f}{pct(ms, 0.95):>9.0f}{max(ms, default=float('nan')):>9.0f}"
        f"{missed:>8}   {target}"
    )
    if missed and sockets:  # what a socket that missed it received since the round began
        s = sockets[got.index(None)]
        seen = [
            f"+{(at - sent) * 1000:.0f} ms{' (has the text looked for)' if needle and needle[0] in text else ''} "
            f"{text[:90]!r}"
            for at, text in s.frames
            if at >= sent
        ]
        print(f"  (a socket that missed it, open={s.ws is not None and not s.closed}, got: {seen[:12]})")
    return ms


async def close_all(sockets: list[Socket], connect_s: float) -> None:
    dropped = [s.closed for s in sockets if s.closed]
    Socket.dropped += len(dropped)
    await asyncio.gather(*(s.close() for s in sockets))
    why = f" ({dropped[0]})" if dropped else ""
    print(
        f"  (connecting {len(sockets)} sockets took {connect_s:.1f} s, {Socket.retries} handshakes retried; "
        f"{len(dropped)} ended by the server{why}; extensions negotiated: {Socket.extensions})"
    )
    Socket.retries = 0


class Profile:
    """`py-spy record` of one process while the timed rounds run (bench/fanout.py --profile PREFIX):
    collapsed stacks in PREFIX-<name>.txt, read with bench/pyspy_top.py or bench/pyspy_split.py."""

    def __init__(self, prefix: str, name: str, pid: int) -> None:
        self.path = f"{prefix}-{name}.txt"
        cmd = [str(BIN / "py-spy"), "record", "--pid", str(pid), "--rate", "250", "--format", "raw", "-o", self.path]
        self.proc = subprocess.Popen(cmd + ["--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        print(f"  (py-spy profile: {self.path})")
