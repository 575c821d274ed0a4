"""INTERACTION.OUTPUT: input validated before the sink, one deliver per request, receipt validated (section 6)."""

import asyncio
import math
from collections.abc import Awaitable, Callable
from types import MappingProxyType
from typing import Any

import pytest

from interaction_worker import (
    DeliveryContext,
    InteractionWorker,
    Message,
    OutputReceipt,
    OutputRequest,
)
from interaction_worker.errors import InvalidInput, InvalidResult
from interaction_worker.nodes import deliver_output

VALID: dict[str, Any] = {
    "deliveryId": "d-1",
    "message": {"role": "assistant", "content": "Done."},
}


def accepted(request: OutputRequest) -> Any:
    return {"deliveryId": request.delivery_id, "status": "accepted"}


class Collect:
    """A sink that records every delivery and answers with `answer(request)` (or raises `error`)."""

    name = "collect"

    def __init__(
        self,
        answer: Callable[[OutputRequest], Any] = accepted,
        error: BaseException | None = None,
    ) -> None:
        self.answer = answer
        self.error = error
        self.calls: list[tuple[OutputRequest, DeliveryContext]] = []

    async def deliver(self, request: OutputRequest, context: DeliveryContext) -> Any:
        self.calls.append((request, context))
        if self.error is not None:
            raise self.error
        return self.answer(request)


Deliver = Callable[[Any, Collect], Awaitable[OutputReceipt]]


async def via_function(body: Any, sink: Collect) -> OutputReceipt:
    return await deliver_output(body, sink)


async def via_worker(body: Any, sink: Collect) -> OutputReceipt:
    return await InteractionWorker(output=sink).deliver(body)


both = pytest.mark.parametrize(
    "deliver",
    [
        pytest.param(via_function, id="deliver_output"),
        pytest.param(via_worker, id="worker"),
    ],
)


# --- input --------------------------------------------------------------------------------------


def with_message(**fields: Any) -> dict[str, Any]:
    return {"deliveryId": "d-1", "message": fields}


def with_artifacts(artifacts: Any) -> dict[str, Any]:
    return {**VALID, "artifacts": artifacts}


INVALID_INPUTS = [
    pytest.param(None, "OUTPUT input must be an object", id="none"),
    pytest.param([VALID], "OUTPUT input must be an object", id="list"),
    pytest.param("d-1", "OUTPUT input must be an object", id="string"),
    pytest.param(
        {"message": VALID["message"]},
        "deliveryId must be a nonempty string",
        id="no-delivery-id",
    ),
    pytest.param(
        {**VALID, "deliveryId": ""},
        "deliveryId must be a nonempty string",
        id="empty-delivery-id",
    ),
    pytest.param(
        {**VALID, "deliveryId": "\u3000 "},
        "deliveryId must be a nonempty string",
        id="blank-delivery-id",
    ),
    pytest.param(
        {**VALID, "deliveryId": 1},
        "deliveryId must be a nonempty string",
        id="int-delivery-id",
    ),
    pytest.param(
        {**VALID, "deliveryId": "x" * 257},
        "deliveryId must be 1 to 256 characters",
        id="long-delivery-id",
    ),
    pytest.param({"deliveryId": "d-1"}, "message must be an object", id="no-message"),
    pytest.param(
        {"deliveryId": "d-1", "message": "hi"},
        "message must be an object",
        id="string-message",
    ),
    pytest.param(
        {"deliveryId": "d-1", "message": []},
        "message must be an object",
        id="list-message",
    ),
    pytest.param(with_message(content="x"), "Invalid message role", id="no-role"),
    pytest.param(
        with_message(role="bot", content="x"), "Invalid message role", id="unknown-role"
    ),
    pytest.param(
        with_message(role="Assistant", content="x"),
        "Invalid message role",
        id="role-case",
    ),
    pytest.param(
        with_message(role="user"), "message.content is required", id="no-content"
    ),
    pytest.param(
        with_message(role="user", content=math.nan),
        "message.content must be JSON-serializable",
        id="nan-content",
    ),
    pytest.param(
        with_message(role="user", content={"k": {1, 2}}),
        "message.content.k must contain only JSON objects and arrays",
        id="set-in-content",
    ),
    pytest.param(
        with_message(role="user", content="x", name=5),
        "message.name must be a string",
        id="int-name",
    ),
    pytest.param(
        with_message(role="user", content="x", name=None),
        "message.name must be a string",
        id="null-name",
    ),
    pytest.param(
        with_artifacts("a"), "artifacts must be an array", id="string-artifacts"
    ),
    pytest.param(
        with_artifacts(None), "artifacts must be an array", id="null-artifacts"
    ),
    pytest.param(
        with_artifacts([5]), "artifact must be an object", id="number-artifact"
    ),
    pytest.param(
        with_artifacts([{"reference": {"uri": "file:///a"}}]),
        "artifact.name must be a nonempty string",
        id="artifact-without-name",
    ),
    pytest.param(
        with_artifacts([{"name": "a"}]),
        "artifact.reference must be an object",
        id="artifact-without-reference",
    ),
    pytest.param(
        with_artifacts([{"name": "a", "reference": {"uri": " "}}]),
        "artifact.reference.uri must be a nonempty string",
        id="artifact-blank-uri",
    ),
    pytest.param(
        with_artifacts(
            [{"name": "a", "reference": {"uri": "file:///a", "mediaType": 5}}]
        ),
        "artifact.reference.mediaType must be a string",
        id="artifact-media-type",
    ),
    pytest.param(
        with_artifacts(
            [{"name": "a", "reference": {"uri": "file:///a", "digest": None}}]
        ),
        "artifact.reference.digest must be a string",
        id="artifact-digest",
    ),
]


@both
@pytest.mark.parametrize(("body", "message"), INVALID_INPUTS)
async def test_invalid_input_never_reaches_the_sink(
    deliver: Deliver, body: Any, message: str
) -> None:
    sink = Collect()
    with pytest.raises(InvalidInput) as caught:
        await deliver(body, sink)
    assert caught.value.message == message
    assert caught.value.code == "INVALID_INPUT"
    assert sink.calls == []


@pytest.mark.parametrize(
    ("request_model", "message"),
    [
        pytest.param(
            OutputRequest(delivery_id=" ", message=Message(role="user", content="x")),
            "deliveryId must be a nonempty string",
            id="blank-delivery-id",
        ),
        pytest.param(
            OutputRequest(
                delivery_id="d-1", message=Message(role="user", content=math.nan)
            ),
            "message.content must be JSON-serializable",
            id="nan-content",
        ),
        pytest.param(
            OutputRequest(
                delivery_id="d-1", message=Message(role="user", content={"n": math.inf})
            ),
            "message.content.n must be JSON-serializable",
            id="infinite-content",
        ),
    ],
)
async def test_a_request_model_is_validated_too(
    request_model: OutputRequest, message: str
) -> None:
    """pydantic lets these through; the reference's rules refuse them before the sink is called."""
    sink = Collect()
    with pytest.raises(InvalidInput) as direct:
        await deliver_output(request_model, sink)
    assert direct.value.message == message
    with pytest.raises(InvalidInput) as through_worker:
        await InteractionWorker(output=sink).deliver(request_model)
    assert through_worker.value.message == message
    assert sink.calls == []


@both
@pytest.mark.parametrize(
    "content",
    [
        pytest.param("", id="empty-string"),
        pytest.param(None, id="null"),
        pytest.param(False, id="false"),
        pytest.param(0, id="zero"),
        pytest.param({"k": [1, {"n": None}]}, id="object"),
        pytest.param([], id="empty-list"),
        pytest.param(
            [{"type": "text", "text": "x"}, {"type": "whatever"}], id="parts-unchecked"
        ),
        pytest.param([1, "two"], id="mixed-array"),
    ],
)
async def test_any_json_content_is_delivered(deliver: Deliver, content: Any) -> None:
    sink = Collect()
    receipt = await deliver(
        {"deliveryId": "d-1", "message": {"role": "tool", "content": content}}, sink
    )
    assert receipt.to_wire() == {"deliveryId": "d-1", "status": "accepted"}
    [(request, _)] = sink.calls
    assert request.message.content == content


@both
async def test_the_sink_gets_the_validated_request(deliver: Deliver) -> None:
    sink = Collect()
    body = {
        "deliveryId": "d-7",
        "message": {
            "role": "assistant",
            "name": "agent",
            "content": "Report",
            "lang": "en",
        },
        "artifacts": [
            {
                "name": "report",
                "reference": {"uri": "file:///r.pdf", "mediaType": "application/pdf"},
            }
        ],
        "extra": "dropped",
    }
    await deliver(body, sink)
    [(request, context)] = sink.calls
    assert isinstance(request, OutputRequest)
    assert request.to_wire() == {
        "deliveryId": "d-7",
        "message": {
            "role": "assistant",
            "name": "agent",
            "content": "Report",
            "lang": "en",
        },
        "artifacts": [
            {
                "name": "report",
                "reference": {"uri": "file:///r.pdf", "mediaType": "application/pdf"},
            }
        ],
    }
    assert isinstance(context, DeliveryContext)
    assert context.delivery_id == "d-7"


async def test_a_given_context_is_passed_as_is() -> None:
    sink = Collect()
    context = DeliveryContext("d-1", deadline=3.0)
    await deliver_output(VALID, sink, context)
    await InteractionWorker(output=sink).deliver(VALID, context=context)
    assert [c for _, c in sink.calls] == [context, context]
    assert all(c is context for _, c in sink.calls)


@both
async def test_a_request_model_is_accepted(deliver: Deliver) -> None:
    sink = Collect()
    model = OutputRequest(
        delivery_id="m-1", message=Message(role="user", content=["a"])
    )
    receipt = await deliver(model, sink)
    assert receipt.delivery_id == "m-1"
    assert sink.calls[0][0].to_wire() == {
        "deliveryId": "m-1",
        "message": {"role": "user", "content": ["a"]},
    }


# --- receipt ------------------------------------------------------------------------------------


def answer(**fields: Any) -> Callable[[OutputRequest], Any]:
    return lambda request: {"deliveryId": request.delivery_id, **fields}


@both
@pytest.mark.parametrize(
    ("receipt", "message"),
    [
        pytest.param(lambda r: None, "Output receipt must be an object", id="none"),
        pytest.param(
            lambda r: ["accepted"], "Output receipt must be an object", id="list"
        ),
        pytest.param(
            lambda r: {"status": "accepted"},
            "deliveryId must be a nonempty string",
            id="no-delivery-id",
        ),
        pytest.param(answer(status="done"), "Invalid output status", id="bad-status"),
        pytest.param(
            answer(status="Accepted"), "Invalid output status", id="status-case"
        ),
        pytest.param(answer(), "Invalid output status", id="no-status"),
        pytest.param(
            answer(status="rejected"),
            "Interaction error is required",
            id="rejected-without-error",
        ),
        pytest.param(
            answer(status="unknown"),
            "Interaction error is required",
            id="unknown-without-error",
        ),
        pytest.param(
            answer(status="rejected", error=None),
            "Interaction error is required",
            id="null-error",
        ),
        pytest.param(
            answer(
                status="rejected",
                error={"code": "E", "message": "see /var/log/sink.log"},
            ),
            "Unsafe interaction error message",
            id="unsafe-error",
        ),
        pytest.param(
            answer(status="accepted", error={"code": "E", "message": "sk-live123"}),
            "Unsafe interaction error message",
            id="unsafe-error-on-accepted",
        ),
        pytest.param(
            answer(status="rejected", error={"code": "no spaces", "message": "m"}),
            "Invalid error code",
            id="bad-error-code",
        ),
        pytest.param(
            answer(status="accepted", metadata=["a"]),
            "metadata must be an object",
            id="list-metadata",
        ),
        pytest.param(
            answer(status="accepted", metadata="x"),
            "metadata must be an object",
            id="string-metadata",
        ),
        pytest.param(
            answer(status="accepted", metadata=None),
            "metadata must be an object",
            id="null-metadata",
        ),
        pytest.param(
            answer(status="accepted", metadata={"x": math.inf}),
            "metadata.x must be JSON-serializable",
            id="infinite-metadata",
        ),
        pytest.param(
            answer(status="accepted", artifacts={}),
            "artifacts must be an array",
            id="object-artifacts",
        ),
        pytest.param(
            lambda r: OutputReceipt(
                delivery_id=r.delivery_id, status="accepted", metadata={"x": math.nan}
            ),
            "metadata.x must be JSON-serializable",
            id="model-nan-metadata",
        ),
        pytest.param(
            lambda r: {"deliveryId": "other", "status": "done"},
            "Invalid output status",
            id="validation-before-mismatch",
        ),
        pytest.param(
            lambda r: {"deliveryId": "other", "status": "accepted"},
            "Output receipt deliveryId mismatch",
            id="delivery-id-mismatch",
        ),
        pytest.param(
            lambda r: OutputReceipt(delivery_id="other", status="accepted"),
            "Output receipt deliveryId mismatch",
            id="model-delivery-id-mismatch",
        ),
    ],
)
async def test_an_invalid_receipt_is_invalid_result_after_exactly_one_deliver(
    deliver: Deliver, receipt: Callable[[OutputRequest], Any], message: str
) -> None:
    sink = Collect(receipt)
    with pytest.raises(InvalidResult) as caught:
        await deliver(VALID, sink)
    assert caught.value.message == message
    assert caught.value.code == "INVALID_RESULT"
    assert len(sink.calls) == 1


@both
@pytest.mark.parametrize(
    ("receipt", "expected"),
    [
        pytest.param(
            answer(status="accepted"),
            {"deliveryId": "d-1", "status": "accepted"},
            id="accepted",
        ),
        pytest.param(
            answer(
                status="accepted",
                error={
                    "code": "SLOW",
                    "message": "Delivered late",
                    "stack": "x",
                    "retryable": False,
                },
            ),
            {
                "deliveryId": "d-1",
                "status": "accepted",
                "error": {
                    "code": "SLOW",
                    "message": "Delivered late",
                    "retryable": False,
                },
            },
            id="accepted-with-safe-error-projected",
        ),
        pytest.param(
            answer(
                status="rejected", error={"code": "HTTP_400", "message": "Bad request"}
            ),
            {
                "deliveryId": "d-1",
                "status": "rejected",
                "error": {"code": "HTTP_400", "message": "Bad request"},
            },
            id="rejected",
        ),
        pytest.param(
            answer(
                status="unknown",
                error={"code": "SINK_TIMEOUT", "message": "No answer"},
                metadata={},
            ),
            {
                "deliveryId": "d-1",
                "status": "unknown",
                "error": {"code": "SINK_TIMEOUT", "message": "No answer"},
                "metadata": {},
            },
            id="unknown-with-metadata",
        ),
        pytest.param(
            answer(
                status="accepted",
                artifacts=[{"name": "a", "reference": {"uri": "file:///a"}}],
            ),
            {
                "deliveryId": "d-1",
                "status": "accepted",
                "artifacts": [{"name": "a", "reference": {"uri": "file:///a"}}],
            },
            id="artifacts",
        ),
        pytest.param(
            lambda r: OutputReceipt(
                delivery_id=r.delivery_id, status="accepted", metadata={"sink": "x"}
            ),
            {"deliveryId": "d-1", "status": "accepted", "metadata": {"sink": "x"}},
            id="receipt-model",
        ),
        pytest.param(
            lambda r: MappingProxyType(
                {"deliveryId": r.delivery_id, "status": "accepted"}
            ),
            {"deliveryId": "d-1", "status": "accepted"},
            id="read-only-mapping",
        ),
        pytest.param(
            answer(status="accepted", extra="dropped"),
            {"deliveryId": "d-1", "status": "accepted"},
            id="unknown-keys-dropped",
        ),
    ],
)
async def test_a_valid_receipt(
    deliver: Deliver, receipt: Callable[[OutputRequest], Any], expected: dict[str, Any]
) -> None:
    sink = Collect(receipt)
    result = await deliver(VALID, sink)
    assert isinstance(result, OutputReceipt)
    assert result.to_wire() == expected
    assert len(sink.calls) == 1


@both
@pytest.mark.parametrize(
    "error",
    [
        pytest.param(RuntimeError("sink unavailable"), id="runtime-error"),
        pytest.param(ConnectionError("refused at /run/sink.sock"), id="unsafe-text"),
        pytest.param(InvalidResult("Sink broke"), id="wire-error"),
    ],
)
async def test_sink_exceptions_propagate_unchanged(
    deliver: Deliver, error: Exception
) -> None:
    sink = Collect(error=error)
    with pytest.raises(type(error)) as caught:
        await deliver(VALID, sink)
    assert caught.value is error
    assert len(sink.calls) == 1


async def test_each_request_is_one_deliver() -> None:
    sink = Collect(answer(status="rejected"))
    worker = InteractionWorker(output=sink)
    for _ in range(3):
        with pytest.raises(InvalidResult):
            await worker.deliver(VALID)
    assert len(sink.calls) == 3


@both
async def test_a_cancellation_the_sink_raises_itself_is_an_unknown_receipt(
    deliver: Deliver, caplog: pytest.LogCaptureFixture
) -> None:
    # Raised by the sink while this delivery is not being cancelled: the sink's own work was cut.
    sink = Collect(error=asyncio.CancelledError())
    result = await deliver(VALID, sink)
    assert result.to_wire() == {
        "deliveryId": VALID["deliveryId"],
        "status": "unknown",
        "error": {
            "code": "SINK_CANCELLED",
            "message": "The sink's call was cancelled before it answered",
            "retryable": False,
        },
    }
    assert "was cancelled" in caplog.text


async def test_a_delivery_that_is_cancelled_is_cancelled() -> None:
    started = asyncio.Event()

    class Waits:
        async def deliver(
            self, request: OutputRequest, context: DeliveryContext
        ) -> Any:
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(deliver_output(VALID, Waits()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
