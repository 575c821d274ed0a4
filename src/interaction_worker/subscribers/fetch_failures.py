"""What a durable consumer loop meets while its stream elects a leader or its server restarts, and how
one line says it (docs/operations.md): expected, so an `Outage` line once it is over, not a traceback."""

import nats.errors
import nats.js.errors

# What a consumer loop meets while its stream elects a leader or its server restarts: one line once it
# is over (`Outage`), not a traceback per fetch.
EXPECTED_FETCH_ERRORS = (
    nats.js.errors.ServiceUnavailableError,
    nats.errors.NoRespondersError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.StaleConnectionError,
    nats.errors.UnexpectedEOF,
    nats.errors.FlushTimeoutError,
)


def expected_failure(error: BaseException) -> bool:
    """Whether a fetch failed as it does while a stream elects a leader or a server restarts."""
    if isinstance(error, EXPECTED_FETCH_ERRORS):
        return True
    return isinstance(error, nats.js.errors.APIError) and error.code == 503


def failure_said(error: BaseException) -> str:
    if isinstance(
        error, nats.js.errors.ServiceUnavailableError | nats.errors.NoRespondersError
    ):
        return "no leader to answer (a stream electing one, or a server restarting)"
    if isinstance(error, nats.js.errors.APIError):
        return (
            f"JetStream answered {error.code}: {error.description or 'no description'}"
        )
    return f"the NATS connection failed ({type(error).__name__})"
