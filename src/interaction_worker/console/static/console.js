// The console's page: the worker's events as they arrive (Server-Sent Events from /events), one
// table per family, a detail view, filters, and a form that sends a call and a delivery.
//
// Everything that comes from the bus is written with textContent, never as HTML: an event's body is
// whatever a client or a tool produced.
"use strict";

(() => {
  const MAX_ROWS = 500; // per table: the oldest rows go first, so a long-open page stays small
  const OK = new Set(["success", "accepted", "delivered"]);
  const BAD = new Set(["failed", "rejected"]);
  const ERROR = new Set(["error"]);

  const events = new Map(); // seq -> event, only for the rows still shown
  const statuses = new Set();
  let instance = null;
  let source = null;
  let selected = null;

  const $ = (id) => document.getElementById(id);
  const tables = {};
  for (const section of document.querySelectorAll("section.family")) {
    tables[section.dataset.family] = {
      body: section.querySelector("tbody"),
      count: section.querySelector(".count"),
    };
  }

  function statusClass(status) {
    if (OK.has(status)) return "ok";
    if (BAD.has(status)) return "bad";
    if (ERROR.has(status)) return "error";
    return "warn";
  }

  function setBadge(element, text, cls) {
    element.textContent = text;
    element.className = "badge " + cls;
  }

  function clock(ms) {
    const d = new Date(ms);
    const pad = (n, w) => String(n).padStart(w, "0");
    return `${pad(d.getHours(), 2)}:${pad(d.getMinutes(), 2)}:${pad(d.getSeconds(), 2)}.${pad(d.getMilliseconds(), 3)}`;
  }

  function short(value, length) {
    const text = typeof value === "string" ? value : JSON.stringify(value);
    if (text === undefined) return "";
    return text.length > length ? text.slice(0, length - 1) + "…" : text;
  }

  function summary(event) {
    const body = event.body && typeof event.body === "object" ? event.body : {};
    const parts = [];
    switch (event.family) {
      case "dead":
        if (body.error) parts.push(`${body.error.code}: ${body.error.message}`);
        if (body.subject) parts.push(`on ${body.subject}`);
        break;
      case "delivery":
        if (body.message) parts.push(short(body.message.content, 120));
        break;
      case "output":
        if (body.metadata && body.metadata.sinks) parts.push("sinks: " + Object.keys(body.metadata.sinks).join(", "));
        if (body.error) parts.push(body.error.code);
        break;
      default:
        if (body.source) parts.push(body.source);
        if (body.message && body.message.name) parts.push(body.message.name);
        if (body.error && body.error.code) parts.push(body.error.code);
        if (event.kind === "result" && body.content !== undefined) parts.push(short(body.content, 80));
    }
    if (!parts.length && event.text) parts.push(short(event.text, 80));
    return parts.join(" · ");
  }

  function cell(row, text, cls) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    row.appendChild(td);
    return td;
  }

  function addEvent(event) {
    const table = tables[event.family];
    if (!table || events.has(event.seq)) return;
    const row = document.createElement("tr");
    // When the row arrived, on the page's own clock (two pages compare it for the fan-out).
    row.dataset.arrived = String(performance.timeOrigin + performance.now());
    row.dataset.seq = String(event.seq);
    row.dataset.key = event.key;
    row.dataset.status = event.status;
    row.dataset.family = event.family;
    row.dataset.kind = event.kind;
    row.className = "fresh" + (event.replayed ? " replayed" : "");
    cell(row, clock(event.receivedAt), "time");
    cell(row, event.family === "delivery" ? event.subject : event.kind, "kind");
    cell(row, event.key, "key").title = event.key;
    const status = document.createElement("span");
    status.className = "status " + statusClass(event.status);
    status.textContent = event.status + (event.code ? ` ${event.code}` : "");
    cell(row, "", "state").appendChild(status);
    cell(row, summary(event), "summary");
    row.addEventListener("click", () => select(event.seq, row));
    events.set(event.seq, event);
    table.body.prepend(row);
    while (table.body.rows.length > MAX_ROWS) {
      const last = table.body.rows[table.body.rows.length - 1];
      events.delete(Number(last.dataset.seq));
      last.remove();
    }
    table.count.textContent = String(table.body.rows.length);
    if (event.status && !statuses.has(event.status)) {
      statuses.add(event.status);
      const option = document.createElement("option");
      option.value = option.textContent = event.status;
      $("filter-status").appendChild(option);
    }
    applyFilter(row);
  }

  function select(seq, row) {
    const event = events.get(seq);
    if (!event) return;
    if (selected) selected.classList.remove("selected");
    selected = row;
    row.classList.add("selected");
    $("detail-empty").hidden = true;
    $("detail-body").hidden = false;
    $("detail-subject").textContent = event.subject;
    $("detail-time").textContent = new Date(event.receivedAt).toISOString() + (event.replayed ? " (from the stream)" : "");
    $("detail-size").textContent = `${event.size} bytes` + (event.truncated ? " (cut)" : "");
    const headers = $("detail-headers").tBodies[0];
    headers.replaceChildren();
    for (const [name, value] of Object.entries(event.headers || {})) {
      const tr = document.createElement("tr");
      cell(tr, name);
      cell(tr, value);
      headers.appendChild(tr);
    }
    $("detail-json").textContent = "body" in event ? JSON.stringify(event.body, null, 2) : event.text;
  }

  function applyFilter(row) {
    const key = $("filter-key").value.trim();
    const status = $("filter-status").value;
    row.hidden = (key && !row.dataset.key.includes(key)) || (status && row.dataset.status !== status);
  }

  function applyFilters() {
    for (const table of Object.values(tables)) {
      for (const row of table.body.rows) applyFilter(row);
    }
  }

  function clearAll() {
    events.clear();
    for (const table of Object.values(tables)) {
      table.body.replaceChildren();
      table.count.textContent = "0";
    }
  }

  function connect() {
    source = new EventSource("/events");
    source.addEventListener("hello", (message) => {
      const hello = JSON.parse(message.data);
      // Another console process numbers its events afresh and sends its whole history.
      if (hello.instance !== instance && !hello.resume) clearAll();
      instance = hello.instance;
      setBadge($("page-state"), "page: live", "ok");
    });
    source.addEventListener("status", (message) => {
      const status = JSON.parse(message.data);
      const up = status.nats === "connected";
      setBadge($("nats-state"), `NATS: ${status.nats}` + (status.detail ? ` (${status.detail})` : ""), up ? "ok" : "bad");
      if (up) loadTools(); // on every connection: the worker may have changed what it serves
    });
    source.addEventListener("message", (message) => addEvent(JSON.parse(message.data)));
    source.addEventListener("gap", (message) => {
      const gap = JSON.parse(message.data);
      const notice = $("gap");
      notice.textContent = `This page fell behind and missed ${gap.missed} events; reload to see the history.`;
      notice.hidden = false;
    });
    source.addEventListener("error", () => {
      setBadge($("page-state"), "page: reconnecting", "warn");
      if (source.readyState === EventSource.CLOSED) {
        // The browser gives up after an answer that is not a stream (the console restarting
        // behind a proxy, a 401): try again from scratch.
        source.close();
        setTimeout(connect, 2000);
      }
    });
  }

  async function post(path, body, outcome) {
    outcome.textContent = "…";
    try {
      const response = await fetch(path, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
        credentials: "same-origin",
      });
      const answer = await response.json();
      outcome.textContent = JSON.stringify(answer, null, 2);
      outcome.className = "outcome " + (answer.error ? "bad" : "ok");
    } catch (error) {
      outcome.textContent = String(error);
      outcome.className = "outcome bad";
    }
  }

  $("call-form").addEventListener("submit", (submit) => {
    submit.preventDefault();
    let args;
    try {
      args = JSON.parse($("call-arguments").value || "{}");
    } catch (error) {
      $("call-outcome").textContent = "arguments: " + error.message;
      return;
    }
    const body = { name: $("call-name").value, arguments: args };
    if ($("call-id").value) body.id = $("call-id").value;
    post("/api/call", body, $("call-outcome"));
  });

  $("deliver-form").addEventListener("submit", (submit) => {
    submit.preventDefault();
    const body = { role: $("deliver-role").value, text: $("deliver-text").value };
    if ($("deliver-id").value) body.id = $("deliver-id").value;
    post("/api/deliver", body, $("deliver-outcome"));
  });

  $("filters").addEventListener("submit", (submit) => submit.preventDefault());
  $("filter-key").addEventListener("input", applyFilters);
  $("filter-status").addEventListener("change", applyFilters);

  // The form offers the tools the worker serves and its sandbox grants (P.tool.list), and no other:
  // the first of them, with arguments shaped by its input schema, until the user types their own.
  const tools = new Map(); // name -> inputSchema
  let filled = ""; // the arguments the form last wrote itself
  let picked = ""; // the tool the form last chose itself

  function example(schema) {
    const properties = (schema && schema.properties) || {};
    const value = {};
    for (const name of (schema && schema.required) || []) {
      const type = (properties[name] || {}).type;
      value[name] = { string: "", integer: 0, number: 0, boolean: false, array: [], object: {} }[type] ?? null;
    }
    return JSON.stringify(value);
  }

  function offer(name) {
    const args = $("call-arguments");
    if (!tools.has(name) || args.value !== filled) return; // the user's own arguments stay
    filled = example(tools.get(name));
    args.value = filled;
  }

  async function loadTools() {
    let answer;
    try {
      answer = await (await fetch("/api/tools", { credentials: "same-origin" })).json();
    } catch (error) {
      answer = { error: { message: String(error) } };
    }
    tools.clear();
    $("tool-names").replaceChildren();
    for (const tool of answer.tools || []) {
      tools.set(tool.name, tool.inputSchema);
      const option = document.createElement("option");
      option.value = tool.name;
      $("tool-names").appendChild(option);
    }
    const name = $("call-name");
    if (answer.error) {
      $("call-hint").textContent = `The worker's tools could not be listed: ${answer.error.message}`;
    } else if (!tools.size) {
      $("call-hint").textContent = "The worker serves no tool its sandbox grants.";
    } else {
      $("call-hint").textContent = "";
      // The first tool, unless the user chose one; one the form chose that is no longer served goes.
      if (name.value === "" || (name.value === picked && !tools.has(picked))) {
        picked = name.value = tools.keys().next().value;
      }
    }
    offer(name.value);
  }

  $("call-name").addEventListener("input", () => offer($("call-name").value));

  connect();
})();
