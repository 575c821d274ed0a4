"""The JetStream streams of durable mode (wire.md 7): the calls (a work queue), the events and the
dead letters, created when missing and checked when present, and the durable pull consumers that
workers share.

The calls stream captures only the subjects of the kinds a worker that started serves: each worker
adds its own. A kind no worker serves is then refused at once at publish (no stream captures it), as
a core request gets "no responders", instead of being accepted into a work queue nobody reads.

A stream that exists keeps its data: subjects it lacks are added by an update, so a later version
that serves a new subject upgrades it in place, and none is ever removed, since another worker may
serve it; a retention that differs, or subjects another stream already captures, stop the start
with a message that names the difference, since the worker could not then keep its promises (a
limits-retention calls stream would keep every call forever, an overlap would send calls
elsewhere). A consumer whose settings differ is updated.
"""

import logging
from dataclasses import dataclass

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext, api

from ..config import DurableSettings
from ..contracts.wire import DEAD, EVENTS, Kind, Subjects
from ..errors import ServeError

_LOGGER = logging.getLogger("interaction_worker")
# The server's code for subjects that overlap another stream's.
_OVERLAP = 10065


@dataclass(frozen=True)
class Streams:
    calls: api.StreamConfig
    events: api.StreamConfig
    dead: api.StreamConfig


# The event families the events stream captures, under the prefix (`P.<family>.<K>`).
EVENT_FAMILIES = tuple(event.name for event in EVENTS)


def stored_subjects(prefix: str, settings: DurableSettings) -> list[tuple[str, str]]:
    """What durable mode stores, acknowledged: (subject prefix, stream) of each event family and of
    the dead letters."""
    return [
        *((f"{prefix}.{family}.", settings.events_stream) for family in EVENT_FAMILIES),
        (f"{prefix}.{DEAD}.", settings.dead_stream),
    ]


def stream_configs(
    prefix: str,
    settings: DurableSettings,
    served: tuple[Kind, ...],
    *,
    atomic: bool = False,
) -> Streams:
    """The three streams, the calls stream over the subjects of the `served` durable kinds only;
    with `atomic`, the events stream allows atomic batches."""
    p = prefix
    subjects = Subjects(prefix)
    replicas, storage = settings.replicas, api.StorageType.FILE
    return Streams(
        calls=api.StreamConfig(
            name=settings.calls_stream,
            subjects=[subjects.request(kind) for kind in served],
            retention=api.RetentionPolicy.WORK_QUEUE,
            duplicate_window=settings.duplicate_window,
            num_replicas=replicas,
            storage=storage,
        ),
        events=api.StreamConfig(
            name=settings.events_stream,
            subjects=[f"{p}.{family}.>" for family in EVENT_FAMILIES],
            retention=api.RetentionPolicy.LIMITS,
            max_age=settings.events_max_age,
            duplicate_window=min(settings.duplicate_window, settings.events_max_age),
            num_replicas=replicas,
            storage=storage,
            # Its history is read through direct gets, which need no consumer-create right: a
            # reader with that right could aim a push consumer at a request subject
            # (docs/operations.md, "Permissions").
            allow_direct=True,
            allow_atomic=True if atomic else None,
        ),
        dead=api.StreamConfig(
            name=settings.dead_stream,
            subjects=[f"{p}.{DEAD}.>"],
            retention=api.RetentionPolicy.LIMITS,
            duplicate_window=settings.duplicate_window,
            num_replicas=replicas,
            storage=storage,
        ),
    )


def consumer_name(queue: str, kind: Kind) -> str:
    return f"{queue}-{kind}"


def consumer_config(
    queue: str, kind: Kind, subject: str, settings: DurableSettings
) -> api.ConsumerConfig:
    return api.ConsumerConfig(
        durable_name=consumer_name(queue, kind),
        filter_subject=subject,
        ack_policy=api.AckPolicy.EXPLICIT,
        deliver_policy=api.DeliverPolicy.ALL,
        ack_wait=settings.ack_wait,
        # One delivery more than the executed attempts: a message whose worker died during its
        # last attempt comes back once, to be resolved or dead-lettered (wire.md 5, 7).
        max_deliver=settings.max_deliver + 1,
        max_ack_pending=settings.max_ack_pending,
    )


async def ensure_streams(
    js: JetStreamContext,
    prefix: str,
    settings: DurableSettings,
    served: tuple[Kind, ...],
    logger: logging.Logger = _LOGGER,
    *,
    atomic: bool = False,
) -> Streams:
    """Create or check the three streams, the calls stream with the subjects of the `served`
    durable kinds (none served: the calls stream is left as it is, or absent); with `atomic`, the
    events stream allows atomic batches (updated when it does not).

    Raises:
        ServeError: a stream exists with another retention, or its subjects overlap another's, or
            JetStream cannot be reached.
    """
    configs = stream_configs(prefix, settings, served, atomic=atomic)
    for config in (configs.calls, configs.events, configs.dead):
        if config.subjects:
            await _ensure_stream(js, config, logger)
    return configs


async def ensure_consumer(
    js: JetStreamContext,
    stream: str,
    config: api.ConsumerConfig,
    logger: logging.Logger = _LOGGER,
) -> None:
    """Create the durable consumer, or update it when its settings differ from `config`."""
    name = config.durable_name
    assert name is not None
    try:
        try:
            info = await js.consumer_info(stream, name)
        except nats.js.errors.NotFoundError:
            await js.add_consumer(stream, config)
            return
        current = info.config
        wanted = (
            config.ack_wait,
            config.max_deliver,
            config.max_ack_pending,
            config.filter_subject,
        )
        have = (
            current.ack_wait,
            current.max_deliver,
            current.max_ack_pending,
            current.filter_subject,
        )
        if wanted != have:
            logger.warning(
                "durable consumer %s: settings updated to the configuration", name
            )
            await js.add_consumer(stream, config)
    except nats.js.errors.APIError as error:
        raise ServeError(f"durable consumer {name}: {error.description}") from None
    except (nats.errors.Error, TimeoutError) as error:
        raise ServeError(
            f"durable consumer {name}: JetStream did not answer ({type(error).__name__})"
        ) from None


async def _ensure_stream(
    js: JetStreamContext, config: api.StreamConfig, logger: logging.Logger
) -> None:
    name = config.name
    assert name is not None and config.subjects is not None
    try:
        try:
            info = await js.stream_info(name)
        except nats.js.errors.NotFoundError:
            try:
                await js.add_stream(config)
            except nats.js.errors.APIError as error:
                if error.err_code == _OVERLAP:
                    raise ServeError(
                        f"stream {name}: its subjects ({', '.join(config.subjects)}) overlap "
                        "another stream's"
                    ) from None
                raise
            return
        current = info.config
        if current.retention != config.retention:
            raise ServeError(
                f"stream {name} exists with retention {_value(current.retention)}, "
                f"durable mode needs {_value(config.retention)}"
            )
        missing = [s for s in config.subjects if s not in (current.subjects or [])]
        direct = bool(config.allow_direct) and not current.allow_direct
        atomic = bool(config.allow_atomic) and not current.allow_atomic
        if direct:
            logger.warning("stream %s: direct gets allowed", name)
        if atomic:
            logger.info("stream %s: atomic batches allowed", name)
        if missing:
            logger.warning("stream %s: subjects %s added", name, ", ".join(missing))
        if missing or direct or atomic:
            try:
                await js.update_stream(
                    current.evolve(
                        subjects=[*(current.subjects or []), *missing],
                        allow_direct=current.allow_direct or config.allow_direct,
                        allow_atomic=current.allow_atomic or config.allow_atomic,
                    )
                )
            except nats.js.errors.APIError as error:
                if error.err_code == _OVERLAP:
                    raise ServeError(
                        f"stream {name}: the subjects it lacks ({', '.join(missing)}) overlap "
                        "another stream's"
                    ) from None
                raise
    except nats.js.errors.ServiceUnavailableError:
        raise ServeError(
            f"stream {name}: JetStream is not available on the server"
        ) from None
    except nats.js.errors.APIError as error:
        raise ServeError(f"stream {name}: {error.description}") from None
    except (nats.errors.Error, TimeoutError) as error:
        raise ServeError(
            f"stream {name}: JetStream did not answer ({type(error).__name__})"
        ) from None


def _value(value: object) -> str:
    return str(getattr(value, "value", value))
