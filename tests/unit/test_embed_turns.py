"""The embedder's turns on a lane: the cheapest waiting call first, the impatient before it, a cancelled waiter passed
over; and through the Batcher with the real offline model, a short question overtakes a long text that came first."""

from __future__ import annotations

import asyncio
import time

from memento_embedder.batching import Batcher
from memento_embedder.providers.offline import OfflineProvider
from memento_embedder.turns import ShortestFirst


async def served_order(lane: ShortestFirst, costs: list[float], pause_s: float = 0.0) -> list[int]:
    """Hold the lane, queue a call of each cost (in this order, `pause_s` apart), release: the calls' places in the
    queue, in the order they ran."""
    order: list[int] = []
    hold = asyncio.Event()

    async def holder() -> None:
        async with lane.turn(0):
            await hold.wait()

    async def call(place: int, cost: float) -> None:
        async with lane.turn(cost):
            order.append(place)
            await asyncio.sleep(0)

    first = asyncio.create_task(holder())
    await asyncio.sleep(0)
    calls = []
    for place, cost in enumerate(costs):
        calls.append(asyncio.create_task(call(place, cost)))
        await asyncio.sleep(pause_s)
    await asyncio.sleep(0)
    hold.set()
    await asyncio.gather(first, *calls)
    return order


async def test_the_cheapest_waiting_call_goes_first_ties_in_arrival_order():
    lane = ShortestFirst()
    assert await served_order(lane, [30, 10, 20, 10]) == [1, 3, 2, 0]
    assert lane.waiting() == 0
    async with asyncio.timeout(1):  # free again: taken at once
        async with lane.turn(5):
            pass


async def test_a_call_that_waited_past_its_patience_goes_first():
    lane = ShortestFirst(patience_s=0.05)
    # the 30 has waited longer than the patience when the lane is released: it goes before the cheaper 10
    assert await served_order(lane, [30, 10], pause_s=0.06) == [0, 1]


async def test_a_cancelled_waiter_is_passed_over():
    lane = ShortestFirst()
    ran: list[str] = []
    hold = asyncio.Event()

    async def holder() -> None:
        async with lane.turn(0):
            await hold.wait()

    async def call(name: str, cost: float) -> None:
        async with lane.turn(cost):
            ran.append(name)

    first = asyncio.create_task(holder())
    await asyncio.sleep(0)
    gone = asyncio.create_task(call("gone", 1))
    kept = asyncio.create_task(call("kept", 2))
    await asyncio.sleep(0)
    gone.cancel()
    hold.set()
    await asyncio.gather(first, kept)
    assert ran == ["kept"]
    assert gone.cancelled() and lane.waiting() == 0


async def test_a_short_question_overtakes_a_long_text_queued_before_it():
    batcher = Batcher(OfflineProvider(threads=1), window_s=0.0)
    long_text = " ".join(f"the deploy of service {i} failed because the config was stale" for i in range(25))
    done: dict[str, float] = {}

    async def ask(name: str, text: str) -> None:
        await batcher.embed_queries([text])
        done[name] = time.perf_counter()

    try:
        await batcher.embed_queries(["warm up"])
        # on the model for ~0.1 s: less than the lane's patience, so the long text queued next has not waited past it
        busy = asyncio.create_task(ask("busy", long_text[: len(long_text) // 5]))
        await asyncio.sleep(0.02)
        long_wait = asyncio.create_task(ask("long", long_text))
        await asyncio.sleep(0.01)
        short = asyncio.create_task(ask("short", "which service failed?"))
        await asyncio.gather(busy, long_wait, short)
        assert done["short"] < done["long"], "the short question waited for the long text queued before it"
    finally:
        await batcher.aclose()
