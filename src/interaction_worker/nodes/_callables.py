"""What kind of callable an object registered in code offers, asked once at registration."""

import inspect
from collections.abc import Callable


def is_coroutine_function(function: object) -> bool:
    """An `async def` function or method, or an object whose `__call__` is one: awaiting its call works."""
    return _is(inspect.iscoroutinefunction, function)


def is_async(function: object) -> bool:
    """`async def`, generator or not: calling it without `await` runs nothing."""
    return _is(inspect.iscoroutinefunction, function) or _is(
        inspect.isasyncgenfunction, function
    )


def _is(test: Callable[[object], bool], function: object) -> bool:
    if test(function):
        return True
    if not callable(function) or inspect.isroutine(function):
        return False
    return test(function.__call__)
