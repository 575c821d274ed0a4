"""The SDK's OAuth log lines without what its exceptions carry.

The SDK logs a failed OAuth flow with its traceback, and its exceptions quote what the authorization
server answered (a token endpoint's error body, the `state` it sent back): nothing a log should
keep. The filter keeps each line, and of its exception only the class's name."""

import logging

_LOGGERS = ("mcp.client.auth.oauth2", "mcp.client.streamable_http")


class Redacted(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            name = type(record.exc_info[1]).__name__
            record.msg = f"{record.getMessage()} ({name})"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        return True


_FILTER = Redacted()


def quiet_sdk_logs() -> None:
    """Install the filter on the SDK's loggers (again: a no-op)."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
