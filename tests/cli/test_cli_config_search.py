"""`run` and the client commands find the same worker.yaml, the nearest safe one upwards, and so the
same data directory (docs/configuration.md 3), and the search is as safe as git's: it stops at the
home directory (whose own file is read), at a filesystem boundary and at the first directory the
user does not own, and refuses, naming it, a file another user owns or others may write.

The tests run as root, who owns every directory on the way up: the searches here are bounded by
`SearchBounds` in process (a home directory inside the test's, another user's uid) and by HOME in
subprocesses, so that nothing above the test's own directory is ever looked at. Giving a file to
another user needs root; those tests are skipped without it.
"""

import contextlib
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import cli, finish, project_dir, spawn

from interaction_worker.client import find_project
from interaction_worker.config import SearchBounds, UnsafeFile, find_upwards

FILE = "worker.yaml"
OTHER = 54321  # a uid that is not the test's: "another user"

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="giving a file to another user needs root"
)


def tree(root: Path, *parts: str) -> Path:
    path = root.joinpath(*parts)
    path.mkdir(parents=True)
    return path


def write(directory: Path, text: str = "max_pending: 7\n", mode: int = 0o644) -> Path:
    path = directory / FILE
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def give(uid: int, *paths: Path) -> None:
    for path in paths:
        os.chown(path, uid, -1)


def test_the_nearest_file_is_found_up_to_the_home_directory(tmp_path: Path) -> None:
    home = tree(tmp_path, "home")
    deeper = tree(home, "project", "src", "deeper")
    bounds = SearchBounds(os.geteuid(), home)
    write(tmp_path)  # above home: never looked at

    assert find_upwards(FILE, deeper, bounds=bounds) is None
    at_home = write(home)
    assert find_upwards(FILE, deeper, bounds=bounds) == at_home
    nearer = write(home / "project")
    assert find_upwards(FILE, deeper, bounds=bounds) == nearer
    assert find_upwards(FILE, home, bounds=bounds) == at_home


@needs_root
def test_the_search_stops_at_a_directory_the_user_does_not_own(tmp_path: Path) -> None:
    # Everything belongs to OTHER, the searching user, but `theirs`: a directory of someone else
    # on the way up (as /tmp is, or another user's project above one's own checkout).
    theirs = tree(tmp_path, "theirs")
    mine = tree(theirs, "mine", "sub")
    above = write(theirs)
    give(OTHER, above, theirs / "mine", mine)
    bounds = SearchBounds(OTHER, None)

    assert find_upwards(FILE, mine, bounds=bounds) is None
    give(OTHER, theirs)
    assert find_upwards(FILE, mine, bounds=bounds) == above


@needs_root
def test_a_file_of_another_user_is_refused_naming_it(tmp_path: Path) -> None:
    planted = write(tree(tmp_path, "shared"))
    give(OTHER, planted)
    below = tree(tmp_path, "shared", "project")

    with pytest.raises(UnsafeFile) as refused:
        find_project(
            None, env={}, cwd=below, bounds=SearchBounds(os.geteuid(), tmp_path)
        )
    assert str(refused.value).startswith(
        f"refusing {planted}: it belongs to another user (uid {OTHER});"
    )


def test_a_file_or_data_directory_others_may_write_is_refused(tmp_path: Path) -> None:
    bounds = SearchBounds(os.geteuid(), tmp_path)
    config = write(tmp_path, mode=0o664)
    with pytest.raises(UnsafeFile, match="group or others may write it .mode 664"):
        find_project(None, env={}, cwd=tmp_path, bounds=bounds)
    config.chmod(0o644)
    assert (
        find_project(None, env={}, cwd=tmp_path, bounds=bounds).settings.max_pending
        == 7
    )

    config.unlink()
    data_dir = tree(tmp_path, ".interaction")
    data_dir.chmod(0o777)
    with pytest.raises(UnsafeFile, match="--data-dir"):
        find_project(None, env={}, cwd=tmp_path, bounds=bounds)
    data_dir.chmod(0o700)
    assert find_project(None, env={}, cwd=tmp_path, bounds=bounds).data_dir == data_dir


@contextlib.contextmanager
def mounted(where: Path) -> Iterator[None]:
    """A tmpfs at `where`: another filesystem below the test's directory."""
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_the_search_stops_at_a_filesystem_boundary(tmp_path: Path) -> None:
    above = write(tmp_path)
    bounds = SearchBounds(os.geteuid(), tmp_path)
    boundary = tree(tmp_path, "mnt")
    assert find_upwards(FILE, boundary, bounds=bounds) == above
    with mounted(boundary):
        below = tree(boundary, "project")
        assert find_upwards(FILE, below, bounds=bounds) is None
        mine = write(boundary)
        assert find_upwards(FILE, below, bounds=bounds) == mine


def test_run_and_a_client_in_a_subdirectory_agree_on_the_file_and_data_directory(
    tmp_path: Path,
) -> None:
    """Both read the project's worker.yaml from its subdirectory, and so use the data directory
    beside it; `run` says which file it reads. No server is needed to show it: `run` on a port in
    use stops once it has locked the data directory it found, and a client that reaches no
    server names the data directory it looked in."""
    root = project_dir(tmp_path / "project")
    write(root, "subjects:\n  prefix: found\n")
    deeper = tree(root, "src", "deeper")
    home = {"HOME": str(root)}  # the search goes no higher than the project
    with socket.socket() as taken, socket.socket() as closed:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        closed.bind(("127.0.0.1", 0))
        nowhere = f"nats://127.0.0.1:{closed.getsockname()[1]}"
        port = taken.getsockname()[1]
        jobs = [
            spawn(["run", "--port", str(port)], deeper, home, search=True),
            spawn(["call", "pwd", "--nats-url", nowhere], deeper, home, search=True),
        ]
        run, call = (finish(job) for job in jobs)

    assert run.code == 1, run.err
    assert (
        f"INFO interaction_worker: configuration: {root / FILE} (the nearest {FILE})"
        in (run.err)
    )
    assert run.error_lines() == [f"interaction-worker: port {port} is in use"]
    assert (root / ".interaction" / "lock").exists()
    assert not (deeper / ".interaction").exists()
    assert call.code == 1
    assert f"no embedded server recorded in {root / '.interaction'})" in call.err


@pytest.mark.slow  # `run` imports for about three seconds of CPU before it refuses
@needs_root
def test_a_planted_file_is_refused_by_run_which_starts_nothing(
    tmp_path: Path,
) -> None:
    """A worker.yaml another user left in a shared directory above the project names an MCP
    server command: `run` refuses the file before starting anything. (The clients' refusal, and
    a file others may write: `find_project` above, in process.)"""
    marker = tmp_path / "the planted command ran"
    shared = tree(tmp_path, "shared")
    planted = write(
        shared,
        "mcp:\n  servers:\n    x:\n      transport: stdio\n"
        f"      command: touch\n      args: [{str(marker)!r}]\n",
    )
    give(OTHER, planted)
    project = tree(shared, "project")
    with socket.socket() as closed:  # should a run start anyway, it fails, never hangs
        closed.bind(("127.0.0.1", 0))
        nowhere = f"nats://127.0.0.1:{closed.getsockname()[1]}"
    run = cli(
        "run",
        "--nats-url",
        nowhere,
        cwd=project,
        env={"HOME": str(tmp_path)},
        search=True,
    )

    assert run.code == 2, run.err
    (line,) = run.error_lines()
    assert line.startswith(
        f"interaction-worker: refusing {planted}: it belongs to another user"
    )
    assert not marker.exists()
