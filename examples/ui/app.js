// A product's page that shows the worker's deliveries straight from NATS, over WebSocket, with the
// official browser client (nats.ws, its ESM bundle, no build step): the last N deliveries from the
// jetstream sink's stream, read with direct gets (no consumer), then each new one as it arrives on
// the sinks' subjects, without duplicates, reconnecting by itself. README.md says how to open it.
import { connect, createInbox, DebugEvents, Events, JSONCodec, StringCodec } from "./node_modules/nats.ws/esm/nats.js";

// Answers to this page's own requests (the direct gets) come under this prefix, the one the `ui`
// user may read (docs/operations.md, "Browsers").
const INBOX_PREFIX = "_INBOX.UI";
const MAX_ROWS = 500; // rows shown; older ones are dropped
const MAX_HELD = 5000; // live deliveries held while the history loads
const IDLE_MS = 3000; // a direct get unanswered this long is taken as done

const json = JSONCodec();
const text = StringCodec();
const $ = (id) => document.getElementById(id);

const page = {
  nc: null,
  options: null,
  seen: new Set(), // keys shown, at most MAX_ROWS * 2
  lastSequence: 0, // the last stream sequence read, for the catch-up after a reconnect
  held: null, // live deliveries that arrived while the history was loading
};

function setStatus(state, words) {
  const status = $("status");
  status.className = state;
  status.textContent = words ?? state;
}

function showError(words, context = {}) {
  const item = document.createElement("li");
  item.textContent = words;
  item.dataset.operation = context.operation ?? "";
  item.dataset.subject = context.subject ?? "";
  $("errors").append(item);
  window.dispatchEvent(new CustomEvent("nats-error", { detail: { words, ...context } }));
}

// A delivery's subject key K (docs/wire.md 2): the same for every sink, so a delivery read from the
// stream and heard live is shown once.
function keyOf(msg) {
  return msg.headers?.get("Interaction-Key") || msg.subject.split(".").pop();
}

function show(msg, source, sequence) {
  const key = keyOf(msg);
  if (page.seen.has(key)) return;
  page.seen.add(key);
  if (page.seen.size > MAX_ROWS * 2) page.seen.delete(page.seen.values().next().value);
  let delivery;
  try {
    delivery = json.decode(msg.data);
  } catch {
    delivery = { deliveryId: key, message: { role: "?", content: text.decode(msg.data) } };
  }
  const message = delivery.message ?? {};
  const row = document.createElement("li");
  row.dataset.key = key;
  row.dataset.source = source;
  if (sequence) row.dataset.sequence = String(sequence);
  const label = document.createElement("span");
  label.className = "source";
  label.textContent = source;
  const meta = document.createElement("span");
  meta.className = "meta";
  meta.textContent = `${message.role ?? ""} · ${delivery.deliveryId ?? key}`;
  const content = document.createElement("div");
  content.className = "content";
  content.textContent =
    typeof message.content === "string" ? message.content : JSON.stringify(message.content, null, 2);
  row.append(label, meta, document.createElement("span"), content);
  const list = $("deliveries");
  list.append(row);
  while (list.children.length > MAX_ROWS) list.firstElementChild.remove();
  window.dispatchEvent(
    new CustomEvent("delivery", { detail: { key, deliveryId: delivery.deliveryId, source, sequence } }),
  );
}

// One direct get (`$JS.API.DIRECT.GET.<stream>`): the stored messages answered, and the status that
// ended the answer (204: end of a batch, 404: nothing there), with the messages still pending.
async function directGet(stream, request) {
  const inbox = createInbox(INBOX_PREFIX);
  const sub = page.nc.subscribe(inbox);
  let timer;
  const idle = () => {
    clearTimeout(timer);
    timer = setTimeout(() => sub.unsubscribe(), IDLE_MS);
  };
  idle();
  page.nc.publish(`$JS.API.DIRECT.GET.${stream}`, json.encode(request), { reply: inbox });
  const stored = [];
  let status = 0;
  let pending = 0;
  try {
    for await (const msg of sub) {
      idle();
      if (msg.headers?.get("Nats-Sequence")) {
        stored.push(msg);
        if (request.batch === undefined) break;
        continue;
      }
      status = msg.headers?.code ?? 0;
      pending = Number(msg.headers?.get("Nats-Num-Pending") || 0);
      break;
    }
  } finally {
    clearTimeout(timer);
    sub.unsubscribe();
  }
  if (status && status !== 204 && status !== 404) {
    const why = status === 503 ? " (no responders: no such stream, or direct gets not allowed)" : "";
    throw new Error(`the stream answered ${status}${why}`);
  }
  return { stored, status, pending };
}

// The stream's last `count` messages after `after`, in order, shown as history.
async function readHistory(after, count) {
  const { stream } = page.options;
  if (!stream || count <= 0) return;
  const last = await directGet(stream, { last_by_subj: ">" });
  if (last.stored.length === 0) return;
  const until = Number(last.stored[0].headers.get("Nats-Sequence"));
  let from = Math.max(after + 1, until - count + 1, 1);
  while (from <= until) {
    const answer = await directGet(stream, { seq: from, batch: count, next_by_subj: ">" });
    for (const msg of answer.stored) {
      const sequence = Number(msg.headers.get("Nats-Sequence"));
      if (sequence > until) return;
      show(msg, "history", sequence);
      page.lastSequence = Math.max(page.lastSequence, sequence);
      from = sequence + 1;
    }
    if (answer.stored.length === 0 || answer.status === 404 || answer.pending === 0) return;
  }
}

function onLive(error, msg) {
  if (error) {
    // A refused subscription is also a status error, shown once there.
    if (!error.isPermissionError?.()) showError(error.message);
    return;
  }
  if (page.held) {
    if (page.held.length >= MAX_HELD) page.held.shift();
    page.held.push(msg);
  } else {
    show(msg, "live");
  }
}

async function watchStatus(nc) {
  for await (const status of nc.status()) {
    if (status.type === Events.Disconnect) setStatus("reconnecting", "reconnecting…");
    else if (status.type === DebugEvents.Reconnecting) setStatus("reconnecting", "reconnecting…");
    else if (status.type === Events.Reconnect) {
      setStatus("connected", `connected to ${nc.getServer()}`);
      // What was stored while the page was away, then on as before.
      readHistory(page.lastSequence, page.options.history).catch((e) => showError(e.message));
    } else if (status.type === Events.Error) {
      const context = status.permissionContext;
      const words = context
        ? `the server refused the ${context.operation} to ${context.subject} (${status.data})`
        : String(status.data);
      showError(words, context);
    }
  }
}

async function start(options) {
  page.options = options;
  setStatus("connecting", "connecting…");
  const nc = await connect({
    servers: options.server,
    user: options.user,
    pass: options.password,
    inboxPrefix: INBOX_PREFIX,
    name: "interaction-worker ui example",
    waitOnFirstConnect: true,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 1000,
  });
  page.nc = nc;
  window.natsConnection = nc; // for the browser's console
  setStatus("connected", `connected to ${nc.getServer()}`);
  watchStatus(nc);
  nc.closed().then((error) => setStatus("closed", error ? `closed: ${error.message}` : "closed"));
  // Live first, held while the history loads, so that nothing falls between the two.
  page.held = [];
  for (const subject of options.subjects) nc.subscribe(subject, { callback: onLive });
  await nc.flush();
  try {
    await readHistory(0, options.history);
  } catch (error) {
    showError(`history: ${error.message}`);
  }
  const held = page.held;
  page.held = null;
  for (const msg of held) show(msg, "live");
  document.body.dataset.ready = "true";
}

function fromForm(form) {
  const data = new FormData(form);
  return {
    server: String(data.get("server")).trim(),
    user: String(data.get("user")).trim(),
    password: String(data.get("password")),
    subjects: String(data.get("subjects")).split(",").map((s) => s.trim()).filter(Boolean),
    stream: String(data.get("stream")).trim(),
    history: Number(data.get("history") || 0),
  };
}

// Every field but the password may come from the page's address: ?server=…&subjects=…&stream=…
const form = $("connect");
for (const [name, value] of new URLSearchParams(location.search)) {
  if (name !== "password" && form.elements[name]) form.elements[name].value = value;
}
form.addEventListener("submit", (event) => {
  event.preventDefault();
  form.classList.add("hidden");
  start(fromForm(form)).catch((error) => {
    setStatus("failed", `cannot connect: ${error.message}`);
    form.classList.remove("hidden");
  });
});
