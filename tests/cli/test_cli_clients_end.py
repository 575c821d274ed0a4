"""Client commands end cleanly (docs/cli.md, exit codes): a connection lost while a command waits
for its reply is one line and exit code 1, against a core worker and against a durable one (its
stream has accepted the call) alike, at once rather than after `--timeout`; Ctrl-C is exit code 130
and nothing printed; numbers that cannot be what an option needs are usage errors; `--version`.

The commands run in subprocesses against a private nats-server that the test kills. What serves
the subjects is the test itself: a subscriber that takes calls and never answers (a core worker
busy with them) and a stream that captures calls (a durable fleet whose workers are gone).
"""

import asyncio
import signal
import time
from importlib.metadata import version
from pathlib import Path

import nats
import pytest
from cli_reference import commands
from test_cli import child_env, cli_command
from test_cli_first_hour import in_process

import interaction_worker.cli
from interaction_worker.testing import NatsServerFactory

# Far longer than the test: a command still waiting for its reply when the connection goes must
# not sit this out.
CLIENT_TIMEOUT = "120"
BOUND = 60.0  # seconds for anything the test waits for (a loaded 2-core machine)


async def start(args: list[str], cwd: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *cli_command(),
        *args,
        cwd=cwd,
        env=child_env(cwd=cwd),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def ended(proc: asyncio.subprocess.Process) -> tuple[int, str, str]:
    out, err = await asyncio.wait_for(proc.communicate(), BOUND)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_a_lost_connection_ends_a_waiting_client_in_one_line_and_ctrl_c_in_silence(
    nats_server_factory: NatsServerFactory, tmp_path: Path
) -> None:
    server = nats_server_factory()
    nc = await nats.connect(server.url, allow_reconnect=False)
    taken: list[str] = []
    every_call = asyncio.Event()

    async def busy(msg: object) -> None:
        taken.append("call")
        if len(taken) == 2:
            every_call.set()

    await nc.subscribe("core.tool.call", cb=busy)  # never answers
    await nc.subscribe("core.output.deliver", cb=busy)
    js = nc.jetstream()
    await js.add_stream(name="CALLS", subjects=["durable.tool.call"])
    where = ["--nats-url", server.url, "--timeout", CLIENT_TIMEOUT]
    core, durable, interrupted = [
        await start(args, tmp_path)
        for args in (
            ["call", "pwd", "--id", "core-1", "--prefix", "core", *where],
            ["call", "pwd", "--id", "durable-1", "--prefix", "durable", *where],
            ["deliver", "--text", "hi", "--id", "d-1", "--prefix", "core", *where],
        )
    ]
    try:
        await asyncio.wait_for(every_call.wait(), BOUND)
        deadline = time.monotonic() + BOUND
        while (await js.stream_info("CALLS")).state.messages < 1:
            assert time.monotonic() < deadline, (
                "the durable call never reached its stream"
            )
            await asyncio.sleep(0.05)

        interrupted.send_signal(signal.SIGINT)
        assert await ended(interrupted) == (130, "", "")

        await nc.close()
        server.process.kill()  # the server goes away, as a crashed host's does
        lost = time.monotonic()
        on_core, on_durable = await asyncio.gather(ended(core), ended(durable))
        waited = time.monotonic() - lost
    finally:
        for proc in (core, durable, interrupted):
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    line = "interaction-worker: connection to NATS lost while waiting for the reply to call"
    assert on_core == (1, "", f"{line} core-1\n")
    assert on_durable == (1, "", f"{line} durable-1\n")
    assert waited < 10, f"the clients waited {waited:.1f} s after the server went"


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--port", "99999"],
        ["run", "--port", "-1"],
        ["call", "pwd", "--timeout", "-1"],
        ["call", "pwd", "--timeout", "0"],
        ["tools", "--timeout", "nan"],
        ["record", "--out", "r.jsonl", "--timeout", "0"],
    ],
)
def test_numbers_an_option_cannot_take_are_usage_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    done = in_process(argv, capsys, cwd=tmp_path)

    assert done.code == 2
    option = argv[-2]
    (line,) = done.err.splitlines()
    assert f"argument {option}: must be" in line
    assert list(tmp_path.iterdir()) == []  # refused before anything ran


def test_version_prints_the_installed_version(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    done = in_process(["--version"], capsys, cwd=tmp_path)

    assert (done.code, done.out) == (
        0,
        f"interaction-worker {version('interaction-worker')}\n",
    )


def test_the_package_docstring_names_every_command() -> None:
    listed = interaction_worker.cli.__doc__ or ""
    missing = [words for words in commands() if f"\n    {words} " not in listed]
    assert not missing, f"not in the docstring of interaction_worker.cli: {missing}"
