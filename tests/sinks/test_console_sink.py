"""ConsoleSink: one readable block per delivery, never interleaved, always to the given console."""

import asyncio
import io
import re
import sys
from typing import Any

from rich.console import Console

from interaction_worker import DeliveryContext, OutputRequest
from interaction_worker.nodes import deliver_output
from interaction_worker.sinks import ConsoleSink


def _request(delivery_id: str, content: Any, **extra: Any) -> OutputRequest:
    body = {
        "deliveryId": delivery_id,
        "message": {"role": "assistant", "content": content},
        **extra,
    }
    return OutputRequest.model_validate(body)


def _sink() -> tuple[ConsoleSink, io.StringIO]:
    out = io.StringIO()
    return ConsoleSink(console=Console(file=out, width=100)), out


async def test_prints_role_id_and_text_and_accepts() -> None:
    sink, out = _sink()
    request = _request("d-1", "Hello, world")
    receipt = await sink.deliver(request, DeliveryContext("d-1"))
    assert receipt == {"deliveryId": "d-1", "status": "accepted"}
    printed = out.getvalue()
    assert "assistant" in printed
    assert "delivery d-1" in printed
    assert "Hello, world" in printed


async def test_through_deliver_output_the_receipt_is_accepted() -> None:
    sink, out = _sink()
    body = {"deliveryId": "d-2", "message": {"role": "assistant", "content": "hi"}}
    receipt = await deliver_output(body, sink)
    assert receipt.to_wire() == {"deliveryId": "d-2", "status": "accepted"}
    assert "hi" in out.getvalue()


async def test_json_content_and_artifacts_are_shown() -> None:
    sink, out = _sink()
    artifact = {"name": "report", "reference": {"uri": "s3://bucket/report.pdf"}}
    request = _request("d-3", {"total": 42}, artifacts=[artifact])
    await sink.deliver(request, DeliveryContext("d-3"))
    printed = out.getvalue()
    assert '"total": 42' in printed
    assert "report" in printed and "s3://bucket/report.pdf" in printed


async def test_text_parts_are_shown_as_text() -> None:
    sink, out = _sink()
    parts = [{"type": "text", "text": "part one"}, {"type": "json", "data": [1]}]
    await sink.deliver(_request("d-4", parts), DeliveryContext("d-4"))
    printed = out.getvalue()
    assert "part one" in printed and '"data"' in printed


async def test_markup_and_terminal_controls_are_printed_inert() -> None:
    sink, out = _sink()
    text = "[bold red]not markup[/] \x1b]0;title\x07 \x9b2J"
    request = _request("d-5", text)
    await sink.deliver(request, DeliveryContext("d-5"))
    printed = out.getvalue()
    assert "[bold red]not markup[/]" in printed
    assert "\x1b" not in printed and "\x07" not in printed and "\x9b" not in printed
    assert "\\x1b]0;title\\x07" in printed and "\\x9b2J" in printed


async def test_concurrent_deliveries_print_whole_blocks() -> None:
    sink, out = _sink()
    requests = [
        _request(f"d-{n}", f"first line of {n}\nsecond line of {n}") for n in range(50)
    ]
    receipts = await asyncio.gather(
        *(sink.deliver(r, DeliveryContext(r.delivery_id)) for r in requests)
    )
    assert all(r["status"] == "accepted" for r in receipts)

    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in out.getvalue().splitlines():
        if line.startswith("╭"):
            assert current is None, "a block began inside another"
            current = []
        assert current is not None, "a line outside any block"
        current.append(line)
        if line.startswith("╰"):
            blocks.append(current)
            current = None
    assert current is None
    assert len(blocks) == 50
    seen = []
    for block in blocks:
        numbers = set(re.findall(r"(?:d-|of )(\d+)", "\n".join(block)))
        assert len(numbers) == 1, block
        (number,) = numbers
        text = "\n".join(block)
        assert f"delivery d-{number}" in text
        assert f"first line of {number}" in text and f"second line of {number}" in text
        seen.append(int(number))
    assert sorted(seen) == list(range(50))


class _BrokenPipe(io.StringIO):
    def write(self, s: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


async def test_a_broken_pipe_gives_unknown_receipts_and_never_exits() -> None:
    # rich itself would answer BrokenPipeError with SystemExit: the sink must not let it.
    sink = ConsoleSink(console=Console(file=_BrokenPipe(), width=100))
    for delivery_id in ("d-6", "d-7"):
        request = _request(delivery_id, "x")
        receipt = await sink.deliver(request, DeliveryContext(delivery_id))
        assert receipt == {
            "deliveryId": delivery_id,
            "status": "unknown",
            "error": {
                "code": "SINK_WRITE_FAILED",
                "message": "Console sink write failed",
            },
        }


async def test_a_terminal_console_keeps_its_colours() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system="standard")
    sink = ConsoleSink(console=console)
    await sink.deliver(_request("d-8", "coloured"), DeliveryContext("d-8"))
    assert "\x1b[" in out.getvalue() and "coloured" in out.getvalue()


async def test_a_quiet_console_prints_nothing() -> None:
    out = io.StringIO()
    sink = ConsoleSink(console=Console(file=out, quiet=True))
    receipt = await sink.deliver(_request("d-9", "x"), DeliveryContext("d-9"))
    assert receipt["status"] == "accepted"
    assert out.getvalue() == ""


def test_the_default_console_writes_to_stderr() -> None:
    sink = ConsoleSink()
    assert sink.console.file is sys.stderr
    assert sink.name == "console"
    assert ConsoleSink(name="screen").name == "screen"
