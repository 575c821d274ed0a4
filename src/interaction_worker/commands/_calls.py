"""How a function given in a declaration or a binding can be called, read once when it is compiled."""

import inspect
from collections.abc import Callable, Iterable
from typing import Any


def arity(function: Callable[..., Any], counts: Iterable[int]) -> int | None:
    """The first of `counts` positional arguments the function can be called with; None for none of them.

    A function without a readable signature (some built-ins) is taken to accept the first count."""
    counts = tuple(counts)
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return counts[0]
    for count in counts:
        try:
            signature.bind(*(None,) * count)
        except TypeError:
            continue
        return count
    return None


def is_async(function: object) -> bool:
    """`async def` (a generator or not), or an object whose `__call__` is: calling it runs nothing."""
    candidates: list[object] = [function]
    if callable(function) and not inspect.isroutine(function):
        candidates.append(function.__call__)
    return any(
        inspect.iscoroutinefunction(c) or inspect.isasyncgenfunction(c)
        for c in candidates
    )
