"""The command protocol served as `run module:worker` serves it, on a real nats-server: durable mode
(commands from the calls stream, their `done` events stored), discovery's endpoints, the metrics'
`kind="command"`, replay of recorded commands, and the `command` command line."""

import asyncio
import io
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import anyio
import httpx
import nats
import pytest
from bus_harness import settled
from nats.aio.msg import Msg
from nats.micro.service import ServiceInfo, ServiceStats
from prometheus_client.parser import text_string_to_metric_families

from interaction_worker import InteractionWorker
from interaction_worker.commands import Interaction
from interaction_worker.recording import parse_recording, replay_requests
from interaction_worker.recording.format import RecordingHeader, utc_timestamp
from interaction_worker.recording.recorder import RecordingWriter

pytest_plugins = ["bus_fixtures"]


def worker(
    seen: list[str] | None = None, wording: str = "Explanation: "
) -> InteractionWorker:
    protocol = Interaction.define(
        command_field="type",
        commands={
            "reply": {
                "category": "presentation",
                "fields": {
                    "text": {"required": True, "json_schema": {"type": "string"}}
                },
            },
            "unavailable": {"category": "receipt", "fields": {}},
        },
    )

    def reply(value: dict[str, Any], context: Any) -> str:
        if seen is not None:
            seen.append(context.command_id)
        return wording + str(value["text"])

    dispatcher = Interaction.bind(
        protocol,
        {"reply": reply, "unavailable": lambda value, context: "unavailable"},
    )
    return InteractionWorker(commands=dispatcher)


async def ask(nc: Any, subject: str) -> dict[str, Any]:
    reply = await nc.request(subject, b"", timeout=5)
    answer: dict[str, Any] = json.loads(reply.data)
    return answer


async def test_a_durable_worker_takes_commands_from_the_calls_stream_and_stores_done_events(
    serve_worker: Any,
) -> None:
    name, tag = f"commands-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:10].upper()
    streams = {
        "calls_stream": f"CALLS_{tag}",
        "events_stream": f"EVENTS_{tag}",
        "dead_stream": f"DEAD_{tag}",
    }
    seen: list[str] = []
    handle = await serve_worker(
        worker(seen),
        nats={"name": name},
        durable={"enabled": True, **streams},
        idempotency={"bucket": f"ledger_{tag}"},
    )
    client, p = handle.client, handle.prefix
    nc = client.nc
    js = nc.jetstream()
    try:
        answer = await client.command({"type": "reply", "text": "hi"}, command_id="d-1")
        assert answer == {"id": "reply", "result": "Explanation: hi"}
        catalog = await client.command_catalog()
        assert [entry["id"] for entry in catalog["commands"]] == [
            "reply",
            "unavailable",
        ]
        stored = await js.get_last_msg(f"EVENTS_{tag}", f"{p}.command.done.reply.d-1")
        assert json.loads(stored.data) == answer
        # The calls stream is a work queue: the acknowledged command is gone from it.
        calls = await js.stream_info(f"CALLS_{tag}")
        with anyio.fail_after(5):
            while calls.state.messages:
                await asyncio.sleep(0.05)
                calls = await js.stream_info(f"CALLS_{tag}")
        info = ServiceInfo.from_dict(await ask(nc, f"$SRV.INFO.{name}"))
        stats = ServiceStats.from_dict(await ask(nc, f"$SRV.STATS.{name}"))
    finally:
        await handle.stop()
        cleaner = await nats.connect(handle.nats_url)
        cleaning = cleaner.jetstream()
        for stream in streams.values():
            await cleaning.delete_stream(stream)
        await cleaning.delete_key_value(f"ledger_{tag}")
        await cleaner.close()
    assert seen == ["d-1"]
    queue = f"{p}-workers"
    endpoints = {e.name: (e.subject, e.metadata) for e in info.endpoints}
    assert endpoints["command"] == (
        f"{p}.command",
        {"stream": f"CALLS_{tag}", "consumer": f"{queue}-command"},
    )
    assert endpoints["catalog"] == (f"{p}.command.catalog", {})
    counted = {e.name: (e.num_requests, e.num_errors) for e in stats.endpoints}
    assert counted["command"] == (1, 0)
    assert counted["catalog"] == (1, 0)


async def test_discovery_lists_the_command_endpoints_only_when_commands_are_served(
    serve_worker: Any,
) -> None:
    with_commands, without = (f"commands-{uuid.uuid4().hex[:8]}" for _ in range(2))
    served = await serve_worker(worker(), nats={"name": with_commands})
    plain = await serve_worker(nats={"name": without})
    nc = served.client.nc
    listed = ServiceInfo.from_dict(await ask(nc, f"$SRV.INFO.{with_commands}"))
    assert [e.name for e in listed.endpoints] == [
        "tool",
        "mcp",
        "observe",
        "output",
        "list",
        "command",
        "catalog",
    ]
    bare = ServiceInfo.from_dict(await ask(nc, f"$SRV.INFO.{without}"))
    assert "command" not in [e.name for e in bare.endpoints]
    await plain.stop()


async def test_the_metrics_count_commands_by_outcome_and_refusal(
    serve_worker: Any,
) -> None:
    handle = await serve_worker(worker(), metrics={"listen": "127.0.0.1:0"})
    client = handle.client
    await client.command({"type": "reply", "text": "hi"})
    await client.command({"type": "unavailable"})
    with pytest.raises(Exception, match="INVALID_INPUT"):
        await client.command({"type": "reply"})
    async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
        text = (await http.get(f"{handle.metrics_url}/metrics")).text
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    requests = "interaction_requests_total"
    assert samples[(requests, (("kind", "command"), ("outcome", "success")))] == 2
    assert samples[(requests, (("kind", "command"), ("outcome", "refused")))] == 1
    refusals = (("code", "INVALID_INPUT"), ("kind", "command"))
    assert samples[("interaction_refusals_total", refusals)] == 1
    assert samples[("interaction_dead_letters_total", (("kind", "command"),))] == 1


async def test_recorded_commands_replay_identical_and_a_changed_handler_differs(
    serve_worker: Any, nats_client: Any
) -> None:
    handle = await serve_worker(worker())
    client, p = handle.client, handle.prefix
    out = io.BytesIO()
    writer = RecordingWriter(
        out, RecordingHeader(p, utc_timestamp(0), (f"{p}.>",), "test")
    )
    done = asyncio.Event()

    async def record(msg: Msg) -> None:
        writer.write(msg)
        if msg.subject == f"{p}.dead.command.bad":
            done.set()

    subscription = await nats_client.subscribe(f"{p}.>", cb=record)
    await settled(nats_client)
    await client.command({"type": "reply", "text": "one"}, command_id="one")
    await client.command({"type": "unavailable"}, command_id="two")
    await client.command({"type": "unavailable"})  # no id: not compared
    with pytest.raises(Exception, match="INVALID_INPUT"):
        await client.command({"type": "reply", "x": 1}, command_id="bad")
    with anyio.fail_after(5):
        await done.wait()
    await subscription.unsubscribe()
    recording = parse_recording(out.getvalue().splitlines())

    same = await replay_requests(client, recording)
    assert same.summary() == (
        "replayed 4 requests: 3 identical, 0 different, 1 not compared, 0 errors"
    )
    await handle.stop()
    # Another worker on the same prefix, whose `reply` handler words its answer differently.
    changed = await serve_worker(worker(wording="Changed: "), subjects={"prefix": p})
    different = await replay_requests(changed.client, recording)
    assert [(d.id, d.path) for d in different.differences] == [("one", "result")]
    (difference,) = different.differences
    assert (difference.recorded, difference.replayed) == (
        "Explanation: one",
        "Changed: one",
    )


async def test_the_command_line_sends_a_command_and_prints_the_catalog(
    serve_worker: Any, tmp_path: Any
) -> None:
    handle = await serve_worker(worker())
    # Not the environment's server or credentials: the test's.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NATS_", "INTERACTION_"))
    }

    async def cli(*args: str, broken_pipe: bool = False) -> tuple[int, list[Any], str]:
        reader, writer = os.pipe()
        os.close(reader)  # with `broken_pipe`, stdout's reader is gone before it starts
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "interaction_worker.cli",
            "command",
            *args,
            "--nats-url",
            handle.nats_url,
            "--prefix",
            handle.prefix,
            "--timeout",
            "10",
            "--config",
            os.devnull,  # never a worker.yaml found upwards
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=writer if broken_pipe else subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        os.close(writer)
        out, err = await asyncio.wait_for(process.communicate(), 60)
        out = out or b""
        lines = [json.loads(line) for line in out.decode().splitlines()]
        assert process.returncode is not None
        return process.returncode, lines, err.decode()

    code, lines, _ = await cli('{"type": "reply", "text": "hi"}', "--id", "cli-1")
    assert (code, lines) == (0, [{"id": "reply", "result": "Explanation: hi"}])
    code, lines, _ = await cli('{"type": "reply", "text": "hi", "extra": 1}')
    assert code == 1
    assert lines == [
        {
            "error": {
                "code": "INVALID_INPUT",
                "message": lines[0]["error"]["message"],
                "reason": "UNKNOWN_FIELD",
                "path": "/extra",
            }
        }
    ]
    code, lines, _ = await cli("--catalog")
    assert code == 0
    assert lines[0]["commandField"] == "type"
    assert [entry["id"] for entry in lines[0]["commands"]] == ["reply", "unavailable"]
    code, lines, err = await cli("[1]")
    assert (code, lines) == (2, [])
    assert "command needs a JSON object" in err
    # The reader of stdout went away (`| head -0`): it ends quietly, as every command does.
    code, lines, err = await cli("--catalog", broken_pipe=True)
    assert (code, lines, err) == (141, [], "")
