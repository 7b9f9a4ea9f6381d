"""service.turns: callers waiting for a document process are served one key after another, each
key's in arrival order; one that leaves while it waits, or as it is handed its turn, holds nothing."""

from __future__ import annotations

import asyncio

import pytest

from service.turns import Turns


async def take(turns: Turns, owner: str | None, name: str, served: list[str], release: asyncio.Event) -> None:
    async with turns.turn(owner):
        served.append(name)
        await release.wait()


async def serve_in_turn(arrivals: list[tuple[str | None, str]]) -> list[str]:
    """Who is served in what order, when ``arrivals`` come (in that order) while the turn is held,
    each holding it until the next is let go."""
    turns, served = Turns(), []
    releases = {name: asyncio.Event() for _, name in arrivals}
    holder = asyncio.Event()
    first = asyncio.create_task(take(turns, "a", "held", served, holder))
    await asyncio.sleep(0)
    tasks = []
    for owner, name in arrivals:
        tasks.append(asyncio.create_task(take(turns, owner, name, served, releases[name])))
        await asyncio.sleep(0)
    holder.set()
    for _ in arrivals:
        await asyncio.sleep(0.01)
        releases[served[-1]].set()
    await asyncio.gather(first, *tasks)
    return served[1:]


def test_keys_are_served_in_turn_each_in_arrival_order() -> None:
    """Key a's three files came before key b's one: b's is served after a's first, not its last."""
    arrivals = [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1"), ("c", "c1"), ("b", "b2")]
    assert asyncio.run(serve_in_turn(arrivals)) == ["a1", "b1", "c1", "a2", "b2", "a3"]


def test_without_keys_callers_are_served_in_arrival_order() -> None:
    arrivals: list[tuple[str | None, str]] = [(None, "1"), (None, "2"), (None, "3")]
    assert asyncio.run(serve_in_turn(arrivals)) == ["1", "2", "3"]


@pytest.mark.parametrize("when", ["while waiting", "as handed the turn"])
def test_a_caller_that_leaves_holds_no_turn(when: str) -> None:
    async def scenario() -> list[str]:
        turns, served = Turns(), []
        held, never, after = asyncio.Event(), asyncio.Event(), asyncio.Event()
        after.set()
        first = asyncio.create_task(take(turns, "a", "first", served, held))
        await asyncio.sleep(0)
        leaving = asyncio.create_task(take(turns, "b", "leaving", served, never))
        staying = asyncio.create_task(take(turns, "c", "staying", served, after))
        await asyncio.sleep(0)
        if when == "while waiting":
            leaving.cancel()
            held.set()
        else:
            held.set()
            await asyncio.sleep(0)  # the turn is handed to the leaving caller, which has not run yet
            leaving.cancel()
        await asyncio.gather(first, staying)
        with pytest.raises(asyncio.CancelledError):
            await leaving
        async with turns.turn("d"):  # free again: taken at once
            served.append("d")
        return served

    assert asyncio.run(scenario()) == ["first", "staying", "d"]


def test_with_two_turns_another_key_takes_the_first_that_frees() -> None:
    """DeepL's two document workers: key a holds both and has two more waiting; b's is next."""

    async def scenario() -> list[str]:
        turns, served = Turns(capacity=2), []
        releases = {name: asyncio.Event() for name in ("a1", "a2", "a3", "a4", "b1")}
        tasks = []
        for owner, name in (("a", "a1"), ("a", "a2"), ("a", "a3"), ("a", "a4"), ("b", "b1")):
            tasks.append(asyncio.create_task(take(turns, owner, name, served, releases[name])))
            await asyncio.sleep(0)
        assert served == ["a1", "a2"]
        for name in ("a1", "a2", "b1", "a3", "a4"):
            releases[name].set()
            await asyncio.sleep(0.01)
        await asyncio.gather(*tasks)
        return served

    assert asyncio.run(scenario()) == ["a1", "a2", "b1", "a3", "a4"]
