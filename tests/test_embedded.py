import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import anyio
import nats
import nats.errors
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from interaction_worker.embedded import (
    DataDirInUse,
    EmbeddedNatsServer,
    EmbeddedServerError,
    ForeignDataDir,
    find_nats_server,
    read_embedded_credentials,
)
from interaction_worker.testing import NatsServerFactory

# Starting a process on a loaded 2-core CI machine can take seconds.
START_BOUND = 30


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _connect(
    url: str,
    *,
    token: str | None = None,
    user: str | None = None,
    password: str | None = None,
) -> Client:
    """Connect with no retries: a refused client fails at once instead of after minutes."""

    async def quiet(exc: Exception) -> None:
        pass  # the failure reaches the caller as an exception; don't log it twice

    nc = Client()
    try:
        with anyio.fail_after(10):
            await nc.connect(
                url,
                error_cb=quiet,
                allow_reconnect=False,
                max_reconnect_attempts=1,
                reconnect_time_wait=0,
                connect_timeout=2,
                token=token,
                user=user,
                password=password,
            )
    except BaseException:
        # nats-py leaves the socket of a refused connect open (a ResourceWarning at GC time).
        await nc.close()
        raise
    return nc


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


async def test_token_client_round_trips_a_message(tmp_path: Path) -> None:
    with anyio.fail_after(START_BOUND):
        async with EmbeddedNatsServer(tmp_path / "data", port=0) as server:
            nc = await _connect(server.url, **server.credentials)
            got: list[bytes] = []
            received = anyio.Event()

            async def on_msg(msg: Msg) -> None:
                got.append(msg.data)
                received.set()

            await nc.subscribe("embedded.echo", cb=on_msg)
            await nc.publish("embedded.echo", b"hello")
            await received.wait()
            await nc.drain()
    assert got == [b"hello"]


async def test_jetstream_is_enabled(tmp_path: Path) -> None:
    with anyio.fail_after(START_BOUND):
        async with EmbeddedNatsServer(tmp_path / "data", port=0) as server:
            nc = await _connect(server.url, **server.credentials)
            info = await nc.jetstream().account_info()
            await nc.close()
    assert info.streams == 0
    assert (tmp_path / "data" / "nats" / "jetstream").is_dir()


@pytest.mark.parametrize(
    "password", [None, "wrong"], ids=["no-password", "wrong-password"]
)
async def test_client_without_the_token_is_refused(
    tmp_path: Path, password: str | None
) -> None:
    with anyio.fail_after(START_BOUND):
        async with EmbeddedNatsServer(tmp_path / "data", port=0) as server:
            with pytest.raises(nats.errors.Error, match="Authorization Violation"):
                await _connect(server.url, user="worker", password=password)


async def test_secrets_are_private_and_not_on_the_command_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with anyio.fail_after(START_BOUND):
        async with EmbeddedNatsServer(data, port=0) as server:
            cmdline = await anyio.Path(f"/proc/{server.pid}/cmdline").read_bytes()
            assert _mode(data) == 0o700
            for name in ("token", "nats-server.conf", "url"):
                assert _mode(data / name) == 0o600, name
            assert (data / "token").read_text().strip() == server.token
            assert server.token in (data / "nats-server.conf").read_text()
            assert server.token.encode() not in cmdline
            assert (data / "url").read_text().strip() == server.url
            assert server.token not in server.url
            assert read_embedded_credentials(data) == (server.url, server.token)


async def test_second_start_reuses_the_token(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with anyio.fail_after(2 * START_BOUND):
        async with EmbeddedNatsServer(data, port=0) as first:
            first_token = first.token
        async with EmbeddedNatsServer(data, port=0) as second:
            nc = await _connect(second.url, user="worker", password=first_token)
            await nc.close()
    assert second.token == first_token


async def test_stop_leaves_no_process_and_is_idempotent(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = EmbeddedNatsServer(data, port=0)
    with anyio.fail_after(START_BOUND):
        await server.start()
        pid = server.pid
        assert _pid_exists(pid)
        await server.stop()
        await server.stop()
    assert not _pid_exists(pid)
    assert read_embedded_credentials(data) is None  # the URL file goes with the server
    assert not list(data.glob("*.ports"))


async def test_explicit_port_is_used(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    with anyio.fail_after(START_BOUND):
        async with EmbeddedNatsServer(tmp_path / "data", port=port) as server:
            assert server.url == f"nats://127.0.0.1:{port}"


async def test_port_in_use_is_one_clear_error(tmp_path: Path, busy_port: int) -> None:
    server = EmbeddedNatsServer(tmp_path / "data", port=busy_port)
    with anyio.fail_after(START_BOUND), pytest.raises(EmbeddedServerError) as err:
        await server.start()
    assert str(err.value) == f"port {busy_port} is in use"


async def test_a_directory_of_the_users_files_is_no_data_directory(
    tmp_path: Path,
) -> None:
    """`--data-dir .` in a project: the lock, token, url and nats-server.conf written there
    would replace files of those names; nothing is written, nothing started."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("# mine\n")
    (project / "url").write_text(
        "https://example.test/\n"
    )  # a name a worker writes too
    server = EmbeddedNatsServer(project, port=0)
    with anyio.fail_after(START_BOUND), pytest.raises(ForeignDataDir) as err:
        await server.start()
    assert str(err.value).startswith(
        "the data directory holds files that no worker wrote"
    )
    assert sorted(p.name for p in project.iterdir()) == ["README.md", "url"]
    assert (project / "url").read_text() == "https://example.test/\n"
    # A directory a console made (its token alone) is one a worker may use.
    console_made = tmp_path / "console"
    console_made.mkdir(mode=0o700)
    (console_made / "console-token").write_text("t" * 43 + "\n")
    with anyio.fail_after(START_BOUND):
        async with EmbeddedNatsServer(console_made, port=0) as started:
            assert started.url.startswith("nats://127.0.0.1:")


async def test_default_port_falls_back_when_4222_is_taken(tmp_path: Path) -> None:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", 4222))
            sock.listen()
        except OSError:
            pass  # somebody else holds it, which serves this test just as well
        with anyio.fail_after(START_BOUND):
            async with EmbeddedNatsServer(tmp_path / "data") as server:
                assert not server.url.endswith(":4222")
                nc = await _connect(server.url, **server.credentials)
                await nc.close()


async def test_early_exit_is_reported_in_one_line(tmp_path: Path) -> None:
    server = EmbeddedNatsServer(tmp_path / "data", port=0, binary="/bin/false")
    for _ in range(2):  # a failed start leaves the data directory unlocked
        with anyio.fail_after(START_BOUND), pytest.raises(EmbeddedServerError) as err:
            await server.start()
        assert str(err.value).startswith("nats-server exited with code 1")
        assert "\n" not in str(err.value)


async def test_one_server_per_data_dir_in_a_session_of_its_own(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with anyio.fail_after(2 * START_BOUND):
        async with EmbeddedNatsServer(data, port=0) as first:
            # The terminal's Ctrl-C signals its foreground process group, not this session.
            assert os.getsid(first.pid) == first.pid != os.getsid(0)
            second = EmbeddedNatsServer(data, port=0)
            with pytest.raises(DataDirInUse) as err:
                await second.start()
            assert err.value.pid == os.getpid()
            assert f"in use by process {os.getpid()};" in str(err.value)
            assert read_embedded_credentials(data) == (first.url, first.token)
        async with EmbeddedNatsServer(data, port=0) as third:
            assert read_embedded_credentials(data) == (third.url, third.token)


async def test_missing_binary_is_one_clear_error(tmp_path: Path) -> None:
    server = EmbeddedNatsServer(
        tmp_path / "data", port=0, binary=str(tmp_path / "nope")
    )
    with pytest.raises(
        EmbeddedServerError, match="^cannot run nats-server: No such file"
    ):
        await server.start()


async def test_data_dir_with_quotes_and_backslashes_works(tmp_path: Path) -> None:
    # The conf lexer knows only a few escapes; a path must survive quoting.
    data = tmp_path / 'da ta"\\x é' / "data"
    with anyio.fail_after(START_BOUND):
        async with EmbeddedNatsServer(data, port=0) as server:
            nc = await _connect(server.url, **server.credentials)
            await nc.jetstream().account_info()
            await nc.close()
    assert (data / "nats" / "jetstream").is_dir()


async def test_unusable_data_dir_is_one_clear_error(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    server = EmbeddedNatsServer(not_a_dir, port=0)
    with pytest.raises(
        EmbeddedServerError, match="^cannot prepare the data directory: Not a"
    ):
        await server.start()


def test_the_wheel_binary_is_found() -> None:
    assert os.access(find_nats_server(), os.X_OK)


def test_no_credentials_without_a_data_dir(tmp_path: Path) -> None:
    assert read_embedded_credentials(tmp_path / "missing") is None


async def test_factory_server_with_user_and_password(
    nats_server_factory: NatsServerFactory,
) -> None:
    server = nats_server_factory("--user", "a", "--pass", "b")
    nc = await _connect(server.url, user="a", password="b")
    await nc.close()
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await _connect(server.url, user="a", password="wrong")
