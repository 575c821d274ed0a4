"""The package's exceptions.

    InteractionWorkerError          one subclass per wire error code (wire.md section 4)
    ├── InvalidJson                 INVALID_JSON       400
    ├── InvalidInput                INVALID_INPUT      400
    │   └── CommandInvalid          a command the protocol rejected: with its `reason` and `path`
    ├── PermissionDenied            PERMISSION_DENIED  403
    ├── NotFound                    NOT_FOUND          404
    ├── InProgress                  IN_PROGRESS        409
    ├── IdReused                    ID_REUSED          409
    ├── McpUnauthorized             MCP_UNAUTHORIZED   401
    ├── InvalidResult               INVALID_RESULT     502
    ├── ResultTooLarge              RESULT_TOO_LARGE   502
    ├── Unavailable                 UNAVAILABLE        503
    ├── ShuttingDown                SHUTTING_DOWN      503
    ├── Overloaded                  OVERLOADED         503
    ├── Timeout                     TIMEOUT            504
    └── Internal                    INTERNAL           500
    McpClientError                  raised by an McpClient (docs/configuration.md 2)
    ├── McpUnavailable              not connected: nothing was sent
    ├── McpTimeout                  no answer in time
    ├── McpConnectionLost           lost after sending: the call may have happened
    ├── McpProtocolError            the server answered with an error
    └── McpDenied                   the server refused the credentials: nothing ran
    RegistrationError               an invalid or duplicate tool, server or sink
    ConfigurationError              an invalid setting (sandbox policy, limits, configuration file)

The bus turns an `InteractionWorkerError` into an error reply and a dead letter; any other exception
becomes INTERNAL with its fixed message, so no exception text reaches a client unchecked.
"""

from typing import ClassVar

from .contracts import is_safe_message, js_trim


class InteractionWorkerError(Exception):
    """An error with a wire code. Its message passes the safety rule, or is the code's fixed message."""

    code: ClassVar[str] = "INTERNAL"
    status: ClassVar[int] = 500
    default_message: ClassVar[str] = "Internal error"

    def __init__(self, message: str | None = None) -> None:
        if message is None or not js_trim(message) or not is_safe_message(message):
            message = self.default_message
        super().__init__(message)
        self.message = message

    def details(self) -> dict[str, str]:
        """What the error reply and the dead letter carry beside the code and the message."""
        return {}


class InvalidJson(InteractionWorkerError):
    code = "INVALID_JSON"
    status = 400
    default_message = "Invalid JSON"


class InvalidInput(InteractionWorkerError):
    code = "INVALID_INPUT"
    status = 400
    default_message = "Invalid input"


class CommandInvalid(InvalidInput):
    """A command the protocol rejected (docs/commands.md): `reason` is the protocol's code
    (`UNKNOWN_FIELD`, ...), `path` a JSON Pointer into the command."""

    def __init__(self, message: str, *, reason: str, path: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.path = path

    def details(self) -> dict[str, str]:
        return {"reason": self.reason, "path": self.path}


class PermissionDenied(InteractionWorkerError):
    code = "PERMISSION_DENIED"
    status = 403
    default_message = "Permission denied"


class NotFound(InteractionWorkerError):
    code = "NOT_FOUND"
    status = 404
    default_message = "Not found"


class InProgress(InteractionWorkerError):
    code = "IN_PROGRESS"
    status = 409
    default_message = "The same id is still being executed"


class IdReused(InteractionWorkerError):
    code = "ID_REUSED"
    status = 409
    default_message = "The id was already used for a different request"


class McpUnauthorized(InteractionWorkerError):
    """An MCP server refused the worker's credentials, or wants more scope (docs/configuration.md,
    "MCP servers behind OAuth"); the message says how to sign in, never a token."""

    code = "MCP_UNAUTHORIZED"
    status = 401
    default_message = "The MCP server refused the credentials"


class InvalidResult(InteractionWorkerError):
    code = "INVALID_RESULT"
    status = 502
    default_message = "Invalid result"


class ResultTooLarge(InteractionWorkerError):
    code = "RESULT_TOO_LARGE"
    status = 502
    default_message = "The result is larger than the server's max_payload"


class Unavailable(InteractionWorkerError):
    code = "UNAVAILABLE"
    status = 503
    default_message = "Service unavailable"


class ShuttingDown(InteractionWorkerError):
    code = "SHUTTING_DOWN"
    status = 503
    default_message = "The worker is shutting down"


class Overloaded(InteractionWorkerError):
    code = "OVERLOADED"
    status = 503
    default_message = "The worker's pending limit is reached"


class Timeout(InteractionWorkerError):
    code = "TIMEOUT"
    status = 504
    default_message = "Timed out"


class Internal(InteractionWorkerError):
    code = "INTERNAL"
    status = 500
    default_message = "Internal error"


ERROR_CLASSES: tuple[type[InteractionWorkerError], ...] = (
    InvalidJson,
    InvalidInput,
    PermissionDenied,
    NotFound,
    InProgress,
    IdReused,
    McpUnauthorized,
    InvalidResult,
    ResultTooLarge,
    Unavailable,
    ShuttingDown,
    Overloaded,
    Timeout,
    Internal,
)


class McpClientError(Exception):
    """A failure of an MCP client, classified by what it means for the call's side effect."""


class McpUnavailable(McpClientError):
    """The server is not connected; the request was not sent."""


class McpTimeout(McpClientError):
    """The server did not answer within its timeout; the request was cancelled."""


class McpConnectionLost(McpClientError):
    """The connection was lost after the request was sent: the call may have happened."""


class McpProtocolError(McpClientError):
    """The server answered with a JSON-RPC error."""


class McpDenied(McpClientError):
    """The server refused the credentials (HTTP 401 or 403) and nothing could cure it: the request
    did not run. The message names the server and what to do; `scope` is the scope it asked for
    that the tokens lack, if that was the reason."""

    def __init__(self, message: str, *, scope: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.scope = scope


class RegistrationError(ValueError):
    """A tool, MCP server or sink cannot be registered (invalid or duplicate name)."""


class ServeError(Exception):
    """`serve` could not start: the NATS server cannot be reached (one line, no secret)."""


class ConfigurationError(ValueError):
    """A setting is invalid; the message names the key and the rule."""
