"""The console's page in a real browser (headless Chromium, driven by Playwright), against
`interaction-worker run` and `interaction-worker console` as a user starts them: a call sent from the
form shows its result and observation, a bad one its dead letter, two pages receive the same
deliveries, and the page comes back after the worker (with its embedded server) and the console
restart.

The screenshot and the fan-out figure go to `INTERACTION_CONSOLE_ARTIFACTS` when it names a
directory, else to the test's tmp_path; their paths are printed.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip(
        "Chromium is not installed (apt-get install chromium): the browser tests need it",
        allow_module_level=True,
    )
playwright_api = pytest.importorskip(
    "playwright.sync_api",
    reason="playwright is not installed (the dev extra): the browser tests need it",
)

pytestmark = pytest.mark.slow

START = 20.0  # seconds for a process to be ready, on a loaded 2-core machine
FANOUT_DELIVERIES = 5
CONFIG = """\
workspace: .
output:
  policy: all
  sinks:
    - {type: console}
    - {type: nats, name: ui, subject: "ui.deliveries.{key}"}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Processes:
    """The worker and the console as subprocesses of the test, stopped at teardown."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.started: list[subprocess.Popen[str]] = []

    def start(self, *args: str, ready: str) -> tuple[subprocess.Popen[str], str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("INTERACTION_")}
        # The directory's own worker.yaml (empty: the defaults), never one found upwards.
        config = self.cwd / "worker.yaml"
        if not config.exists():
            config.write_text("", encoding="utf-8")
        env["INTERACTION_CONFIG"] = str(config)
        proc = subprocess.Popen(
            [sys.executable, "-m", "interaction_worker.cli", *args],
            cwd=self.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.started.append(proc)
        assert proc.stdout is not None
        deadline = time.monotonic() + START
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith(ready):
                return proc, line.removeprefix(ready).strip()
        pytest.fail(f"`{' '.join(args)}` was not ready within {START:g} s")

    def stop(self, proc: subprocess.Popen[str]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=START)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def close(self) -> None:
        for proc in reversed(self.started):
            self.stop(proc)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    found = Processes(tmp_path)
    try:
        yield found
    finally:
        found.close()


def artifacts(tmp_path: Path) -> Path:
    given = os.environ.get("INTERACTION_CONSOLE_ARTIFACTS")
    folder = Path(given) if given else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_the_page_shows_calls_dead_letters_fan_out_and_comes_back_after_restarts(
    processes: Processes, tmp_path: Path
) -> None:
    (tmp_path / "worker.yaml").write_text(CONFIG, encoding="utf-8")
    (tmp_path / "README.md").write_text("# A project\n", encoding="utf-8")
    nats_port = str(free_port())
    worker_args = ("run", "--port", nats_port, "--data-dir", ".interaction")
    worker, _ = processes.start(*worker_args, ready="ready ")
    console, url = processes.start(
        "console", "--listen", "127.0.0.1:0", ready="console "
    )
    listen = url.removeprefix("http://").rstrip("/")
    out = artifacts(tmp_path)

    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(15_000)
            page.goto(url)
            page.wait_for_selector("#page-state.ok")
            page.wait_for_selector("#nats-state.ok")

            # A call from the form: its result and its observation, under its key. The form
            # offers the worker's first tool, read_text, with its required argument.
            page.wait_for_function(
                "() => document.getElementById('call-name').value !== ''"
            )
            assert page.input_value("#call-name") == "read_text"
            assert page.input_value("#call-arguments") == '{"path":""}'
            page.fill("#call-arguments", '{"path": "README.md"}')
            page.fill("#call-id", "browser-1")
            page.click("#call-form button")
            tool = "section[data-family=tool]"
            page.wait_for_selector(f'{tool} tr[data-key="browser-1"][data-kind=result]')
            page.wait_for_selector(
                f'{tool} tr[data-key="browser-1"][data-kind=observation]'
            )
            assert (
                page.get_attribute(f"{tool} tr[data-kind=result]", "data-status")
                == "success"
            )

            # A bad call: refused, so a dead letter and no event.
            page.fill("#call-name", "no_such_tool")
            page.fill("#call-id", "browser-bad")
            page.click("#call-form button")
            page.wait_for_selector(
                'section[data-family=dead] tr[data-key="browser-bad"]'
            )
            assert page.locator(f'{tool} tr[data-key="browser-bad"]').count() == 0
            page.click('section[data-family=dead] tr[data-key="browser-bad"]')
            assert "no_such_tool" in page.text_content("#detail-json")

            # The fan-out: a second page, and deliveries sent from the first.
            second = browser.new_page()
            second.set_default_timeout(15_000)
            second.goto(url)
            second.wait_for_selector("#nats-state.ok")
            keys = [f"fan-{n}" for n in range(FANOUT_DELIVERIES)]
            for key in keys:
                page.fill("#deliver-id", key)
                page.click("#deliver-form button")
                page.wait_for_selector(
                    f'section[data-family=output] tr[data-key="{key}"]'
                )
            arrivals = []
            for shown in (page, second):
                for key in keys:
                    shown.wait_for_selector(
                        f'section[data-family=delivery] tr[data-key="{key}"]'
                    )
                arrivals.append(
                    shown.eval_on_selector_all(
                        "section[data-family=delivery] tbody tr",
                        "rows => Object.fromEntries(rows.map(r => [r.dataset.key, Number(r.dataset.arrived)]))",
                    )
                )
            assert set(arrivals[0]) == set(arrivals[1]) == set(keys)
            gaps = [abs(arrivals[0][k] - arrivals[1][k]) for k in keys]
            figure = {
                "deliveries": len(keys),
                "max_ms": max(gaps),
                "mean_ms": sum(gaps) / len(gaps),
            }
            (out / "console-fanout.json").write_text(
                json.dumps(figure), encoding="utf-8"
            )
            print(f"fan-out to two pages: {json.dumps(figure)}")
            second.close()

            page.click(f'{tool} tr[data-key="browser-1"][data-kind=result]')
            shot = out / "console.png"
            page.screenshot(path=str(shot))
            print(f"screenshot: {shot}")

            # The worker restarts, and its embedded server with it: the console reconnects.
            processes.stop(worker)
            page.wait_for_selector("#nats-state.bad")
            worker, _ = processes.start(*worker_args, ready="ready ")
            page.wait_for_selector("#nats-state.ok", timeout=START * 1000)
            page.fill("#call-name", "read_text")
            page.fill("#call-id", "after-worker")
            page.click("#call-form button")
            page.wait_for_selector(
                f'{tool} tr[data-key="after-worker"][data-kind=observation]'
            )

            # The console restarts on its port: the page's stream reconnects by itself.
            processes.stop(console)
            page.wait_for_selector("#page-state.warn")
            console, _ = processes.start(
                "console", "--listen", listen, ready="console "
            )
            page.wait_for_selector("#page-state.ok", timeout=START * 1000)
            page.wait_for_selector("#nats-state.ok")
            page.fill("#call-id", "after-console")
            page.click("#call-form button")
            page.wait_for_selector(
                f'{tool} tr[data-key="after-console"][data-kind=observation]'
            )
        finally:
            browser.close()


def test_the_form_offers_the_tools_the_worker_serves_and_no_other(
    processes: Processes, tmp_path: Path
) -> None:
    (tmp_path / "worker.yaml").write_text(
        "tools: {commands: {enabled: [pwd, wc]}}\n", encoding="utf-8"
    )
    processes.start("run", "--port", str(free_port()), ready="ready ")
    _, url = processes.start("console", "--listen", "127.0.0.1:0", ready="console ")

    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.set_default_timeout(15_000)
            page.goto(url)
            page.wait_for_function(
                "() => document.getElementById('call-name').value !== ''"
            )
            offered = page.eval_on_selector_all(
                "#tool-names option", "options => options.map(o => o.value)"
            )
            assert offered == ["wc", "pwd"]  # the worker's order
            assert page.input_value("#call-name") == "wc"
            assert page.input_value("#call-arguments") == '{"path":""}'
            # Another tool chosen: its arguments follow while the user has not written any.
            page.fill("#call-name", "pwd")
            assert page.input_value("#call-arguments") == "{}"
            page.fill("#call-id", "served-1")
            page.click("#call-form button")
            page.wait_for_selector(
                'section[data-family=tool] tr[data-key="served-1"][data-kind=result]'
                "[data-status=success]"
            )
        finally:
            browser.close()
