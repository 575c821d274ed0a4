"""Browsers on the committed deploy files (docs/operations.md, "Browsers"): the page of examples/ui in
headless Chromium, served from the origin server.conf allows, connected as the `ui` user to the
committed `websocket` block (TLS with a certificate made by trustme, which Chromium trusts by its
public key) of the three-node cluster, with a worker serving deploy/worker.yaml. Two pages get the same
deliveries in the same order; a page opened late gets the history first, without duplicates; a page
stays up across a restart of its server; a page that publishes a call or subscribes to dead letters or
results gets the server's refusal, and the call never runs; and the fan-out figure of
docs/benchmarks.md, printed, never asserted.

The screenshot and the figure go to `INTERACTION_UI_ARTIFACTS` when it names a directory, else to a
temporary one; their paths are printed.
"""

import asyncio
import base64
import hashlib
import http.server
import json
import os
import queue
import shutil
import signal
import ssl
import statistics
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from nats_conf import parse
from test_deploy_cluster import (
    DEPLOY,
    REPO,
    Cluster,
    Inbox,
    User,
    Workers,
    logged_violations,
    start_cluster,
)

from interaction_worker.client import (
    InteractionClient,
    InteractionRequestError,
    NoWorkerError,
)
from interaction_worker.testing import NatsServerFactory

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

UI = REPO / "examples" / "ui"
CLIENT = UI / "node_modules" / "nats.ws" / "esm" / "nats.js"
STAMP = UI / "node_modules" / ".installed"
# The names a browser uses: the page's origin (the one server.conf allows) and the server's host.
ORIGIN = parse((DEPLOY / "nats" / "server.conf").read_text())["websocket"][
    "allowed_origins"
][0]
PAGE_HOST = ORIGIN.removeprefix("https://")
NATS_HOST = "nats.example.com"
# deploy/worker.yaml's sinks: live deliveries of the nats sink, stored ones of the jetstream sink.
LIVE, STORED, STREAM = "deliveries.*", "stored.deliveries.*", "DELIVERIES"
BOUND = 30.0  # seconds for anything to happen, on a loaded 2-core machine
FANOUT_PAGES, FANOUT_DELIVERIES = 5, 1000
# Every delivery the page reports, with when it arrived (ms since the epoch, sub-millisecond).
RECORDER = """
window.arrivals = [];
window.addEventListener("delivery", (event) => {
  window.arrivals.push([event.detail.key, performance.timeOrigin + performance.now()]);
});
window.states = [];
document.addEventListener("DOMContentLoaded", () => {
  const status = document.getElementById("status");
  new MutationObserver(() => window.states.push(status.className)).observe(
    status, { attributes: true, attributeFilter: ["class"] });
});
"""
T = TypeVar("T")


def installed_client() -> None:
    """The example's pinned nats.ws, installed with `npm ci` as the Makefile does, unless it is."""
    lock = UI / "package-lock.json"
    if (
        CLIENT.exists()
        and STAMP.exists()
        and STAMP.stat().st_mtime >= lock.stat().st_mtime
    ):
        return
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(
            "npm is not installed: the UI example's browser client cannot be installed"
        )
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=UI,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        ping = subprocess.run([npm, "ping"], cwd=UI, capture_output=True, timeout=60)
        if ping.returncode != 0:
            pytest.skip(
                "the npm registry cannot be reached: nats.ws cannot be installed"
            )
        pytest.fail(f"npm ci failed in examples/ui:\n{done.stdout}{done.stderr}")
    STAMP.touch()


class Bus:
    """An event loop on a thread of its own for the NATS clients, beside Playwright's sync API."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = BOUND) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


def spki(cert_pem: bytes) -> str:
    """What Chromium's --ignore-certificate-errors-spki-list takes: base64 of the SHA-256 of the
    certificate's public key (the flag matches a leaf's key; it does not make a CA trusted)."""
    key = x509.load_pem_x509_certificate(cert_pem).public_key()
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


class PageServer:
    """examples/ui over HTTPS on a loopback port, as the page's origin serves it. For pages that no
    test drives, `/unattended.html` is the example's index.html with `harness` (a script) after
    its own, and what such a page POSTs is queued in `reports`."""

    def __init__(self, ca: trustme.CA) -> None:
        self.leaf = ca.issue_cert(PAGE_HOST)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.leaf.configure_cert(context)
        self.harness = ""
        self.reports: queue.Queue[tuple[str, Any]] = queue.Queue()
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(UI), **kwargs)

            def do_GET(self) -> None:
                if not self.path.startswith("/unattended.html"):
                    super().do_GET()
                    return
                page = (UI / "index.html").read_text()
                harness = f'<script type="module">{server.harness}</script>\n</body>'
                self.answer(200, page.replace("</body>", harness).encode(), "text/html")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                server.reports.put(
                    (self.path, json.loads(self.rfile.read(length) or b"null"))
                )
                self.answer(204, b"", "text/plain")

            def answer(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@dataclass
class Deployment:
    root: Path
    factory: NatsServerFactory
    cluster: Cluster
    workers: Workers
    bus: Bus
    operator: User
    reader: User  # the `ui` user over TCP, to read what the stream holds
    page_server: PageServer
    browser_flags: list[str]
    browser: Any  # playwright's Browser
    idle: Any  # a blank page, whose waits let Playwright read the browser's events meanwhile
    artifacts: Path

    @property
    def ui_password(self) -> str:
        return self.cluster.passwords["ui"]

    def deliver(self, *ids: str, concurrency: int = 16) -> None:
        """Deliveries sent as the operator's console sends them, `concurrency` at a time; each
        accepted by every sink."""

        async def send(client: InteractionClient, delivery_id: str) -> None:
            receipt = await client.deliver(body(delivery_id))
            assert receipt.status == "accepted", receipt.to_wire()

        async def send_all() -> None:
            client = self.client(BOUND)
            slots = asyncio.Semaphore(concurrency)

            async def one(delivery_id: str) -> None:
                async with slots:
                    await send(client, delivery_id)

            await asyncio.gather(*(one(i) for i in ids))

        self.wait(send_all(), 2 * BOUND + len(ids) * 0.2)

    def deliver_until_accepted(self, prefix: str) -> str:
        """One delivery while the cluster may be electing leaders: sent under a new id
        (`prefix-1`, `prefix-2`, ...) until every sink accepted one; a receipt is final for its id
        (the ledger keeps it), hence the new ids. The id accepted."""

        async def attempts() -> str:
            client = self.client(5.0)
            deadline = time.monotonic() + 2 * BOUND
            for attempt in range(1, 1000):
                delivery_id = f"{prefix}-{attempt}"
                try:
                    receipt = await client.deliver(body(delivery_id))
                except (InteractionRequestError, NoWorkerError, TimeoutError):
                    receipt = None
                if receipt is not None and receipt.status == "accepted":
                    return delivery_id
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
            raise AssertionError(f"no delivery of {prefix} was accepted")

        return self.wait(attempts(), 3 * BOUND)

    def client(self, timeout: float) -> InteractionClient:
        return InteractionClient(
            self.operator.nc, inbox_prefix="_INBOX.OPERATOR", timeout=timeout
        )

    def wait(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """`coroutine` on the bus's loop, waited for without blocking Playwright: it reads the
        browser's events only while the test calls it, and a browser whose events go unread
        stalls its pages."""
        done = asyncio.run_coroutine_threadsafe(coroutine, self.bus.loop)
        deadline = time.monotonic() + timeout
        while not done.done() and time.monotonic() < deadline:
            self.idle.wait_for_timeout(20)
        return done.result(timeout=0)

    def open(
        self,
        *,
        subjects: str = STORED,
        stream: str = STREAM,
        history: int = 50,
        ready: bool = True,
    ) -> Any:
        # A context (a window) of its own: the page is the one shown in it, never a background tab.
        page = self.browser.new_context(
            viewport={"width": 1000, "height": 720}
        ).new_page()
        page.set_default_timeout(BOUND * 1000)
        page.add_init_script(RECORDER)
        page.goto(
            f"{ORIGIN}/?server=wss://{NATS_HOST}&subjects={subjects}"
            f"&stream={stream}&history={history}"
        )
        page.fill("#password", self.ui_password)
        page.click("#connect button")
        if ready:
            page.wait_for_selector("body[data-ready=true]")
        return page


def body(delivery_id: str) -> dict[str, Any]:
    content = TEXTS.get(delivery_id, f"Delivery {delivery_id}")
    if delivery_id.startswith("race-"):
        content = (
            f"Indexing the workspace: {int(delivery_id[5:]) + 1} of 10 folders read."
        )
    return {
        "deliveryId": delivery_id,
        "message": {"role": "assistant", "content": content},
    }


TEXTS = {
    "late-1": "I read README.md: the worker serves tool calls, MCP requests and deliveries over NATS.",
    "late-2": "Three tools matched your search; the first is grep.",
    "late-3": "Done: the report is in reports/2026-12.md.",
    "late-4": "Anything else? I can also summarise the open issues.",
}


def keys(page: Any) -> list[str]:
    found: list[str] = page.eval_on_selector_all(
        "#deliveries li", "rows => rows.map(row => row.dataset.key)"
    )
    return found


def sources(page: Any) -> list[str]:
    found: list[str] = page.eval_on_selector_all(
        "#deliveries li", "rows => rows.map(row => row.dataset.source)"
    )
    return found


def wait_for_keys(page: Any, expected: list[str]) -> None:
    page.wait_for_function(
        "expected => expected.every(k => document.querySelector(`#deliveries li[data-key='${k}']`))",
        arg=expected,
    )


def stored_keys(deployment: Deployment) -> list[str]:
    """The stored deliveries' keys in stream order, read as the operator's tests read history."""
    from interaction_worker.console.history import StreamHistory

    async def read() -> list[str]:
        history = StreamHistory(deployment.reader.nc, STREAM, "stored.deliveries.>")
        last = await history.last_sequence()
        if last is None:
            return []
        return [
            m.subject.rsplit(".", 1)[1]
            async for m in history.read(until=last, batch=500)
        ]

    return deployment.bus.run(read())


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    installed_client()
    root = tmp_path_factory.mktemp("deploy")
    given = os.environ.get("INTERACTION_UI_ARTIFACTS")
    artifacts = Path(given) if given else root / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    bus = Bus()
    factory = NatsServerFactory(root)
    with pytest.MonkeyPatch.context() as env, playwright_api.sync_playwright() as p:
        cluster = bus.run(start_cluster(factory, root, env), timeout=2 * BOUND)
        workers = Workers(root, cluster)
        page_server: PageServer | None = None
        browser = None
        connected: list[User] = []
        try:
            workers.start(cluster.servers[1])
            bus.run(workers.until_ready(), timeout=2 * BOUND)
            operator = bus.run(User("operator").connect(cluster, cluster.servers[2]))
            reader = bus.run(User("ui").connect(cluster, cluster.servers[2]))
            connected += [operator, reader]
            page_server = PageServer(cluster.ca)
            trusted = [
                spki(b"".join(p.bytes() for p in page_server.leaf.cert_chain_pems[:1])),
                spki((root / "ws-cert.pem").read_bytes()),
            ]
            flags = [
                # The page's origin and the server's name, on this machine's loopback ports.
                f"--host-resolver-rules=MAP {PAGE_HOST}:443 127.0.0.1:{page_server.port},"
                f"MAP {NATS_HOST}:443 127.0.0.1:{cluster.websocket_ports[0]}",
                f"--ignore-certificate-errors-spki-list={','.join(trusted)}",
                # Several pages in one headless browser, none of them throttled as hidden.
                "--disable-background-timer-throttling",
                "--disable-renderer-backgrounding",
                "--disable-backgrounding-occluded-windows",
            ]
            browser = p.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox", *flags]
            )
            yield Deployment(
                root,
                factory,
                cluster,
                workers,
                bus,
                operator,
                reader,
                page_server,
                flags,
                browser,
                browser.new_page(),
                artifacts,
            )
        finally:
            if browser is not None:
                browser.close()
            if page_server is not None:
                page_server.close()
            for user in connected:
                bus.run(user.nc.close())
            workers.stop()
            factory.close()
            bus.close()


def test_two_pages_get_the_same_deliveries_in_the_same_order(
    deployment: Deployment,
) -> None:
    first, second = deployment.open(history=0), deployment.open(history=0)
    sent = [f"pair-{n}" for n in range(20)]
    deployment.deliver(*sent)
    for page in (first, second):
        wait_for_keys(page, sent)
    assert keys(first) == keys(second)
    assert sorted(keys(first)) == sorted(sent)
    assert set(sources(first)) == {"live"}
    # The order the stream stored them in, which is the order the worker published them in.
    stored = [k for k in stored_keys(deployment) if k.startswith("pair-")]
    assert keys(first) == stored
    first.close()
    second.close()


def test_a_page_opened_late_gets_the_history_first_without_duplicates(
    deployment: Deployment,
) -> None:
    deployment.deliver("late-1", "late-2", concurrency=1)
    page = deployment.open(ready=False)
    # Deliveries while the page connects and reads the history: each shown once, wherever it
    # came from.
    racing = [f"race-{n}" for n in range(10)]
    deployment.deliver(*racing)
    page.wait_for_selector("body[data-ready=true]")
    deployment.deliver("late-3")
    wait_for_keys(page, ["late-1", "late-2", *racing, "late-3"])
    shown, came_from = keys(page), sources(page)
    assert len(shown) == len(set(shown))
    stored = stored_keys(deployment)
    history = [k for k, s in zip(shown, came_from, strict=True) if s == "history"]
    # The history first, in the stream's order, and the last 50 of it.
    assert came_from[: len(history)] == ["history"] * len(history)
    assert history == [k for k in stored if k in history]
    assert {"late-1", "late-2"} <= set(history)
    assert shown[-1] == "late-3" and came_from[-1] == "live"
    assert set(shown) <= set(stored)
    page.close()
    # docs/ui-example.png: a page opened now, the last few stored, then one live.
    shot = deployment.open(history=5)
    deployment.deliver("late-4")
    wait_for_keys(shot, ["late-4"])
    screenshot = deployment.artifacts / "ui-example.png"
    shot.locator("body").screenshot(path=str(screenshot))
    print(f"\nscreenshot: {screenshot}")
    shot.close()


def test_a_page_that_sends_a_call_or_reads_dead_letters_or_results_is_refused(
    deployment: Deployment,
) -> None:
    dead, results = Inbox(), Inbox()

    async def watch() -> None:
        await deployment.operator.nc.subscribe("interaction.dead.>", cb=dead.on_message)
        await deployment.operator.nc.subscribe(
            "interaction.tool.result.>", cb=results.on_message
        )
        await deployment.operator.nc.flush()

    deployment.bus.run(watch())
    page = deployment.open(
        subjects="interaction.dead.>,interaction.tool.result.>", stream="", history=0
    )
    call = {"call": {"id": "from-a-browser", "name": "count", "arguments": {}}}
    page.evaluate(
        """call => window.natsConnection.publish(
               "interaction.tool.call", new TextEncoder().encode(JSON.stringify(call)))""",
        call,
    )
    page.wait_for_function("() => document.querySelectorAll('#errors li').length >= 3")
    refused = page.eval_on_selector_all(
        "#errors li",
        "rows => rows.map(row => [row.dataset.operation, row.dataset.subject])",
    )
    assert sorted(refused) == [
        ["publish", "interaction.tool.call"],
        ["subscription", "interaction.dead.>"],
        ["subscription", "interaction.tool.result.>"],
    ]
    assert page.inner_text("#status").startswith(
        "connected"
    )  # refused, not disconnected
    # The call never ran: no execution, no result, no dead letter (nothing reached the workers).
    time.sleep(1.0)
    assert "from-a-browser" not in [c for c, _ in deployment.workers.executions()]
    assert not [m for m in results.messages if m.subject.endswith("from-a-browser")]
    assert not [m for m in dead.messages if m.subject.endswith("from-a-browser")]
    assert {
        ("ui", "Publish", "interaction.tool.call"),
        ("ui", "Subscription", "interaction.dead.>"),
        ("ui", "Subscription", "interaction.tool.result.>"),
    } <= logged_violations(deployment.cluster)
    page.close()


# Each unattended page connects, says so, and reports the fan-out's deliveries once it has them all.
HARNESS = """
const arrivals = [];
window.addEventListener("delivery", (event) => {
  if (!event.detail.key.startsWith("fan-")) return;
  arrivals.push([event.detail.key, performance.timeOrigin + performance.now()]);
  if (arrivals.length === COUNT) {
    fetch("/arrivals", {method: "POST", body: JSON.stringify(arrivals)});
  }
});
new MutationObserver(() => {
  if (document.body.dataset.ready) fetch("/ready", {method: "POST", body: "null"});
}).observe(document.body, {attributes: true, attributeFilter: ["data-ready"]});
document.getElementById("password").value = PASSWORD;
document.getElementById("connect").requestSubmit();
"""


class Unattended:
    """Headless Chromium with pages of its own, which no test drives: unlike a browser driven by
    Playwright, it reports nothing about each page (every WebSocket frame, for one) to anyone."""

    def __init__(self, deployment: Deployment, urls: list[str]) -> None:
        folder = deployment.root / f"chromium-{time.monotonic_ns()}"
        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--remote-debugging-port=0",
                f"--user-data-dir={folder}",
                *deployment.browser_flags,
                "--enable-logging=stderr",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(deployment.root / "chromium.log").open("ab"),
        )
        # Chromium writes the port it took here; each page is a target opened through it.
        port_file = folder / "DevToolsActivePort"
        deadline = time.monotonic() + BOUND
        while not (port_file.exists() and port_file.read_text().strip()):
            assert time.monotonic() < deadline, "headless Chromium did not start"
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        for url in urls:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/json/new?{urllib.parse.quote(url, safe='')}",
                method="PUT",
            )
            with urllib.request.urlopen(request, timeout=BOUND) as answer:
                assert answer.status == 200

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def reports(deployment: Deployment, path: str, count: int, within: float) -> list[Any]:
    server = deployment.page_server
    found: list[Any] = []
    deadline = time.monotonic() + within
    while len(found) < count:
        try:
            kind, body = server.reports.get(
                timeout=max(0.1, deadline - time.monotonic())
            )
        except queue.Empty:
            log = deployment.root / "chromium.log"
            pytest.fail(f"{len(found)} of {count} pages reported {path}; see {log}")
        if kind == path:
            found.append(body)
    return found


def test_the_fan_out_to_five_pages(deployment: Deployment) -> None:
    """docs/benchmarks.md: each delivery's largest gap between the pages that show it. Printed."""
    server = deployment.page_server
    server.harness = HARNESS.replace("COUNT", str(FANOUT_DELIVERIES)).replace(
        "PASSWORD", json.dumps(deployment.ui_password)
    )
    url = f"{ORIGIN}/unattended.html?server=wss://{NATS_HOST}&subjects={LIVE}&stream=&history=0"
    browser = Unattended(deployment, [url] * FANOUT_PAGES)
    try:
        reports(deployment, "/ready", FANOUT_PAGES, BOUND)
        sent = [f"fan-{n:04d}" for n in range(FANOUT_DELIVERIES)]
        began = time.time()
        deployment.deliver(*sent, concurrency=32)
        receipts_done = time.time()
        arrivals = reports(deployment, "/arrivals", FANOUT_PAGES, 2 * BOUND)
    finally:
        browser.close()
    orders = [[key for key, _ in arrived] for arrived in arrivals]
    assert all(order == orders[0] for order in orders)  # the same order on every page
    assert sorted(orders[0]) == sent
    at = [dict(arrived) for arrived in arrivals]
    gaps = sorted(
        max(page[k] for page in at) - min(page[k] for page in at) for k in sent
    )
    figure = {
        "pages": FANOUT_PAGES,
        "deliveries": FANOUT_DELIVERIES,
        "sent_in_s": round(receipts_done - began, 2),
        # The pages' clocks and the test's are the machine's: when the slowest page had shown the
        # last delivery, after the last receipt came back.
        "last_page_done_after_s": round(
            max(arrived[-1][1] for arrived in arrivals) / 1000 - receipts_done, 2
        ),
        "largest_gap_ms": round(gaps[-1], 2),
        "p99_gap_ms": round(gaps[int(0.99 * len(gaps)) - 1], 2),
        "median_gap_ms": round(statistics.median(gaps), 2),
    }
    path = deployment.artifacts / "ui-fanout.json"
    path.write_text(json.dumps(figure) + "\n")
    print(f"\nfan-out to {FANOUT_PAGES} pages: {json.dumps(figure)} ({path})")


def test_a_page_stays_up_across_a_restart_of_its_server(deployment: Deployment) -> None:
    page = deployment.open()
    deployment.deliver("before-restart")
    wait_for_keys(page, ["before-restart"])
    cluster, factory = deployment.cluster, deployment.factory
    # The page's server (the name it dialled is nats-1's WebSocket port) goes away, and comes back
    # on the same port.
    node = cluster.servers[0]
    node.process.send_signal(signal.SIGKILL)
    node.process.wait(timeout=10)
    page.wait_for_function("() => window.states.includes('reconnecting')")
    away = deployment.deliver_until_accepted("while-away")
    cluster.servers[0] = factory(
        *cluster.start_args[0], workdir=deployment.root / "nats-1"
    )
    page.wait_for_selector("#status.connected")
    after = deployment.deliver_until_accepted("after-restart")
    # Connected again (to its server, or first to a node it learnt of), it showed what was stored
    # while it was away, then the next one; each once.
    wait_for_keys(page, ["before-restart", away, after])
    shown = keys(page)
    assert len(shown) == len(set(shown))
    assert shown.index("before-restart") < shown.index(away) < shown.index(after)
    page.close()
