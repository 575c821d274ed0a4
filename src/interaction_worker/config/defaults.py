"""The serving path's defaults, each written once: the file's settings (`model.py`, `parsing.py`), the
bindings' options (`subscribers/binding_options.py`) and the service's options take them from here, so
what an absent key means in the file is what an absent keyword means in code (docs/configuration.md 1).
"""

PREFIX = "interaction"
REPLY_PREFIXES: tuple[str, ...] = ("_INBOX.",)
TOOL_TIMEOUT = 60.0
MAX_PENDING = 1000
# nats-server's default: what the FastStream router assumes, having no connection to ask yet.
MAX_PAYLOAD = 1024 * 1024


def queue_group(prefix: str, queue: str | None) -> str:
    """The queue group the workers of `prefix` share when none is named."""
    return queue or f"{prefix}-workers"
