"""Replaying a recording's requests against the worker serving now, and comparing each outcome with
the recorded one (replay.md 4).

`plan.py` decides what goes out and what each reply is held to; here the requests are sent, at most
`concurrency` at a time, and each reply is judged as it comes. Judging is synchronous, between two
awaits, so the report and the caller's progress callback are never raced.
"""

import asyncio
from collections.abc import Callable, Sequence

import nats.errors
from nats.aio.msg import Msg

from ..client import InteractionClient, NoWorkerError
from .compare import NO_RECORDED_OUTCOME, Found, Ignored
from .compare import compare as compare_outcomes
from .format import Recording
from .plan import PlannedRequest, plan_requests, reply_outcome
from .report import MISSING, Difference, FailedRequest, ReplayReport


async def replay_requests(
    client: InteractionClient,
    recording: Recording,
    *,
    compare: bool = True,
    id_suffix: str | None = None,
    concurrency: int = 16,
    ignore: Sequence[str] = (),
    on_progress: Callable[[ReplayReport], None] | None = None,
) -> ReplayReport:
    """Send the recording's requests to the worker serving `client.prefix`, at most `concurrency`
    at a time, and compare each outcome with the recorded one.

    A request that gets no reply within `client.timeout`, or finds no worker, is an error of the
    report; it never stops the replay. `on_progress` is called after each request, with the report
    so far (its new differences at the end of `differences`).

    Raises:
        ValueError: an `ignore` path that is not a dotted path, or `concurrency` below 1.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    ignored = Ignored(ignore)
    planned = plan_requests(recording, compare=compare, id_suffix=id_suffix)
    report = ReplayReport(total=len(planned))
    waiting = iter(planned)

    async def work() -> None:
        # The senders share one iterator, so requests leave in seq order; judging is synchronous,
        # so the report and the callback are never raced.
        for request in waiting:
            _judge(request, await _send(client, request), ignored, report)
            if on_progress is not None:
                on_progress(report)

    senders = [
        asyncio.create_task(work()) for _ in range(min(concurrency, len(planned)))
    ]
    try:
        # gather, not a TaskGroup: the callback's own exception (a closed stdout) comes out as
        # itself, not wrapped in an ExceptionGroup.
        await asyncio.gather(*senders)
    finally:
        for sender in senders:
            sender.cancel()
        await asyncio.gather(*senders, return_exceptions=True)
    report.differences.sort(key=lambda d: d.seq)
    return report


async def _send(client: InteractionClient, request: PlannedRequest) -> Msg | str:
    """The reply, or why there is none."""
    subject = request.to
    try:
        async with asyncio.timeout(client.timeout):
            return await client.send(subject, request.data, request.headers)
    except TimeoutError:
        return f"no reply on {client.prefix}.{subject} within {client.timeout:g} s"
    except NoWorkerError as error:
        return str(error)
    except nats.errors.Error as error:
        return f"{client.prefix}.{subject}: {error}"


def _judge(
    request: PlannedRequest,
    reply: Msg | str,
    ignored: Ignored,
    report: ReplayReport,
) -> None:
    if isinstance(reply, str):
        report.errors.append(
            FailedRequest(request.seq, request.subject, request.id, reply)
        )
        return
    if not request.compared:
        report.not_compared += 1
        return
    replayed = reply_outcome(request, reply.data, reply.headers)
    if request.recorded is None:
        found: list[Found] = [("", MISSING, replayed.document, NO_RECORDED_OUTCOME)]
    else:
        found = compare_outcomes(request.recorded, replayed, ignored)
    if not found:
        report.identical += 1
        return
    report.different += 1
    report.differences.extend(
        Difference(request.seq, request.subject, request.id, path, old, new, reason)
        for path, old, new, reason in found
    )
