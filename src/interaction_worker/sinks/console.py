"""A sink that prints each delivery for a person watching the worker."""

import asyncio
import io
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.json import JSON
from rich.panel import Panel
from rich.text import Text

from ..contracts import OutputRequest
from ..nodes import DeliveryContext
from ._receipts import DEFAULT_TIMEOUT, check_timeout

# C0 controls but tab and newline, DEL and C1: a delivery's text must not drive the terminal
# (colours, titles, hyperlinks, cursor moves); each is shown as a visible `\xNN` escape instead.
_CONTROLS = {
    code: f"\\x{code:02x}"
    for code in (*range(0x20), *range(0x7F, 0xA0))
    if code not in (0x09, 0x0A)
}

_WRITE_FAILED = {"code": "SINK_WRITE_FAILED", "message": "Console sink write failed"}


def _printable(text: str) -> str:
    return text.translate(_CONTROLS)


def _printable_data(value: Any) -> Any:
    if isinstance(value, str):
        return _printable(value)
    if isinstance(value, list):
        return [_printable_data(item) for item in value]
    if isinstance(value, dict):
        return {_printable(key): _printable_data(item) for key, item in value.items()}
    return value


def _content(content: Any) -> list[RenderableType]:
    if isinstance(content, str):
        return [Text(_printable(content))]
    if (
        isinstance(content, list)
        and content
        and all(isinstance(p, dict) for p in content)
    ):
        return [
            Text(_printable(part["text"]))
            if part.get("type") == "text" and isinstance(part.get("text"), str)
            else JSON.from_data(_printable_data(part))
            for part in content
        ]
    return [JSON.from_data(_printable_data(content))]


def _block(request: OutputRequest) -> Panel:
    message = request.message
    title = message.role if message.name is None else f"{message.role} ({message.name})"
    parts: list[RenderableType] = [
        Text(f"delivery {_printable(request.delivery_id)}", style="dim")
    ]
    parts.extend(_content(message.content))
    if request.artifacts:
        parts.append(Text("artifacts", style="bold"))
        parts.extend(
            Text(f"  {_printable(a.name)}  {_printable(a.reference.uri)}")
            for a in request.artifacts
        )
    # Text, not str: a str title would be read as rich markup.
    return Panel(Group(*parts), title=Text(_printable(title)), title_align="left")


class ConsoleSink:
    """Prints each delivery as one block: role, delivery id, text or JSON content, artifacts.

    Args:
        console: where to print; by default standard error, because `run` keeps standard output
            for its single `ready <url>` line, which scripts read.
        name: the sink's name in fan-out receipts.
        timeout: what a fan-out (or `run`, for a lone sink) waits for a receipt, in seconds.
    """

    def __init__(
        self,
        *,
        console: Console | None = None,
        name: str = "console",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.name = name
        self.timeout = check_timeout(timeout)
        self.console = console if console is not None else Console(stderr=True)
        self._lock = asyncio.Lock()

    async def deliver(
        self, request: OutputRequest, context: DeliveryContext
    ) -> dict[str, Any]:
        block = _block(request)
        # One delivery at a time, and off the event loop: a terminal or pipe that stalls must not
        # stall every other call the worker is serving.
        async with self._lock:
            try:
                await asyncio.to_thread(self._print, block)
            except OSError:  # e.g. a closed pipe: part of the block may be out
                return {
                    "deliveryId": request.delivery_id,
                    "status": "unknown",
                    "error": dict(_WRITE_FAILED),
                }
        return {"deliveryId": request.delivery_id, "status": "accepted"}

    def _print(self, block: Panel) -> None:
        # Rendered on a private console, written here: rich answers a broken pipe on its own file by
        # pointing standard output at /dev/null and raising SystemExit, which would end the worker.
        target = self.console
        rendered = io.StringIO()
        Console(
            file=rendered,
            width=target.width,
            color_system=target.color_system,  # type: ignore[arg-type]
            force_terminal=target.is_terminal,
            no_color=target.no_color,
        ).print(block)
        if not target.quiet:
            target.file.write(rendered.getvalue())
            target.file.flush()
