"""The free slots a durable binding's consumers share (docs/wire.md 7): a fair semaphore that hands
several permits at once, in the order they were asked for."""

import asyncio
from collections import deque


class Slots:
    """Free slots, handed to the consumers in the order they asked (a fair semaphore that gives
    several permits at once)."""

    def __init__(self, total: int) -> None:
        self.free = total
        self._turns: deque[tuple[int, asyncio.Future[int]]] = deque()

    @property
    def waiting(self) -> bool:
        return bool(self._turns)

    async def take(self, most: int, *, first: bool = False) -> int:
        """At least one slot and at most `most`, once it is this caller's turn (`first`: before
        every caller waiting, for a message fetched already)."""
        if self.free > 0 and not self._turns:
            taken = min(most, self.free)
            self.free -= taken
            return taken
        turn: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if first:
            self._turns.appendleft((most, turn))
        else:
            self._turns.append((most, turn))
        try:
            return await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.give(turn.result())  # handed over, then cancelled: they go back
            raise

    def give(self, count: int) -> None:
        self.free += count
        while self.free > 0 and self._turns:
            most, turn = self._turns.popleft()
            if turn.done():
                continue  # its caller was cancelled while waiting
            taken = min(most, self.free)
            self.free -= taken
            turn.set_result(taken)
