"""The wire thread: a second event loop, in its own thread, for the calls whose time is recorded.

Why. ``latency_ms`` is the time from sending a request to the last byte of its reply. Measured on the
run's event loop it also counts every callback that loop runs before it notices the reply: scoring
other cases, rendering judge prompts, parsing judge verdicts, storing results. On the 2-core bench
machine at concurrency 8 with a judge on that added ≈ 45 ms to the median of a 6 ms agent and over a
second to the first cases (docs/targets.md, bench/README.md "Latency"). The target's requests (and the
command target's processes) therefore run on this loop, which does nothing else: it sleeps in
``select`` until bytes arrive, and its timestamps are taken within one interpreter switch of their
arrival. ``sys.setswitchinterval`` is lowered to ``SWITCH_INTERVAL_S`` while a wire thread runs, which
bounds that switch (CPython hands the GIL to a waiting thread after the interval; default 5 ms).

Cancellation crosses the threads: when the awaiting coroutine on the run's loop is cancelled (the
attempt's timeout, the run stopping), the wire-side task is cancelled and waited for, so a timed-out
HTTP request's connection is closed (not returned to the keep-alive pool) before any retry starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

SWITCH_INTERVAL_S = 0.0005
"""The interpreter's thread switch interval while a wire thread runs (CPython's default is 0.005 s)."""
CLEANUP_SECONDS = 5.0
"""How long a cancelled call waits for the wire side to close its connection or kill its process."""

_live: weakref.WeakSet[WireLoop] = weakref.WeakSet()
"""Wire loops whose thread runs (``close_all``)."""
_switch_lock = threading.Lock()
_switch_users = 0
_switch_saved = 0.005


def _lower_switch_interval() -> None:
    global _switch_users, _switch_saved
    with _switch_lock:
        if _switch_users == 0:
            _switch_saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_saved, SWITCH_INTERVAL_S))
        _switch_users += 1


def _restore_switch_interval() -> None:
    global _switch_users
    with _switch_lock:
        _switch_users -= 1
        if _switch_users == 0:
            sys.setswitchinterval(_switch_saved)


class WireLoop:
    """An event loop in a daemon thread, started on first use; ``call`` runs a coroutine there."""

    def __init__(self, name: str = "evalgate-wire") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def loop(self) -> asyncio.AbstractEventLoop:
        """The wire loop, started if needed."""
        with self._lock:
            if self._loop is None:
                ready = threading.Event()
                loop = asyncio.new_event_loop()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    try:
                        loop.run_forever()
                    finally:
                        loop.close()

                self._thread = threading.Thread(target=serve, name=self.name, daemon=True)
                _live.add(self)
                _lower_switch_interval()
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    async def call(self, factory: Callable[[], Awaitable[T]]) -> T:
        """``await factory()`` on the wire loop. Cancelling the caller cancels the wire-side task and
        waits (up to ``CLEANUP_SECONDS``) for it to finish before the cancellation propagates."""
        wire = self.loop()
        home = asyncio.get_running_loop()
        done: asyncio.Future[T] = home.create_future()
        box: dict[str, asyncio.Task[T]] = {}

        def settle(task: asyncio.Task[T]) -> None:  # on the home loop
            if done.done():
                if not task.cancelled():
                    task.exception()  # retrieved: the caller is gone
                return
            if task.cancelled():
                done.cancel()
            elif task.exception() is not None:
                done.set_exception(task.exception())  # type: ignore[arg-type]
            else:
                done.set_result(task.result())

        def start() -> None:  # on the wire loop
            task = wire.create_task(_run(factory))
            box["task"] = task
            task.add_done_callback(lambda t: _call_soon(home, settle, t))

        wire.call_soon_threadsafe(start)
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            wire.call_soon_threadsafe(_cancel, box)  # runs after start(): the wire loop is FIFO
            await asyncio.wait({done}, timeout=CLEANUP_SECONDS)
            if done.done() and not done.cancelled():
                done.exception()  # retrieved: the caller is gone
            raise

    def close(self) -> None:
        """Stop the loop (cancelling what still runs there) and join the thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        _live.discard(self)
        with contextlib.suppress(RuntimeError):  # already closed
            loop.call_soon_threadsafe(_shutdown, loop)
        thread.join(CLEANUP_SECONDS)
        _restore_switch_interval()

    async def aclose(self) -> None:
        """``close`` without blocking the calling loop."""
        if self._loop is not None:
            await asyncio.to_thread(self.close)


def close_all() -> int:
    """Close every wire loop still running (for embedders and tests that do not close their
    ``Runtime``); returns how many were."""
    loops = list(_live)
    for wire in loops:
        wire.close()
    return len(loops)


async def _run(factory: Callable[[], Awaitable[T]]) -> T:
    return await factory()


def _cancel(box: dict[str, Any]) -> None:
    task = box.get("task")
    if task is not None:
        task.cancel()


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the home loop already closed (the run ended)
        loop.call_soon_threadsafe(callback, *args)


def _shutdown(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel every task still on ``loop``, let them finish, then stop it."""
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()

    async def finish() -> None:
        await asyncio.gather(*tasks, return_exceptions=True)
        loop.stop()

    loop.create_task(finish())
