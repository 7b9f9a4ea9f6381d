"""``service.routes.common.unless_disconnected``: a route's work, cancelled if its client hangs up."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from service.errors import ClientDisconnected
from service.routes.common import unless_disconnected


class Client:
    """The ASGI receive channel of a request whose body has been read: it answers
    ``http.disconnect`` once ``hang_up`` is called."""

    def __init__(self) -> None:
        self.gone = asyncio.Event()

    def hang_up(self) -> None:
        self.gone.set()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}


def test_the_work_s_result_comes_back_and_nothing_is_left_running() -> None:
    async def scenario() -> None:
        client = Client()
        assert await unless_disconnected(client, asyncio.sleep(0.01, result="done")) == "done"  # type: ignore[arg-type]
        await asyncio.sleep(0)
        assert asyncio.all_tasks() == {asyncio.current_task()}  # the watcher is gone
        client.hang_up()  # too late to matter
        await asyncio.sleep(0.01)

    asyncio.run(scenario())


def test_a_client_that_hangs_up_cancels_the_work_and_is_told_apart() -> None:
    cancelled = asyncio.Event()

    async def work() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    async def scenario() -> None:
        client = Client()
        asyncio.get_running_loop().call_later(0.01, client.hang_up)
        with pytest.raises(ClientDisconnected):
            await unless_disconnected(client, work())  # type: ignore[arg-type]
        assert cancelled.is_set()
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]  # its own cancellation taken back
        await asyncio.sleep(0.01)  # the request goes on: nothing cancels it later

    asyncio.run(scenario())


def test_a_cancellation_from_outside_stays_one() -> None:
    async def route(client: Client) -> None:
        await unless_disconnected(client, asyncio.sleep(10))  # type: ignore[arg-type]

    async def scenario() -> None:
        task = asyncio.create_task(route(Client()))
        await asyncio.sleep(0.01)
        task.cancel()  # a shutdown
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())


def test_a_hang_up_as_the_work_finishes_does_not_cancel_what_the_route_does_next() -> None:
    async def scenario() -> None:
        client = Client()

        async def work() -> str:
            client.hang_up()  # the watcher's disconnect arrives while the result is on its way
            await asyncio.sleep(0)
            return "done"

        result = await unless_disconnected(client, work())  # type: ignore[arg-type]
        await asyncio.sleep(0.01)  # where the route would write its response
        assert result == "done"

    asyncio.run(scenario())
