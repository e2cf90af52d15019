// Herald operator dashboard: polls this node's JSON API and renders it.
// Plain DOM, no framework, no build step. Every value reaches the page
// through textContent (never innerHTML): rule errors, recipients and
// payloads are user data.
"use strict";

// Every endpoint the page calls, written as the server's mux patterns.
// dashboard_test.go reads these strings and checks each against the API,
// so a path may appear nowhere else in this file.
const API = {
  status: "GET /v1/status",
  alerts: "GET /v1/alerts",
  ack: "POST /v1/alerts/{id}/ack",
  runs: "GET /v1/runs",
  deliveries: "GET /v1/deliveries",
  tasks: "GET /v1/tasks",
  stats: "GET /v1/stats",
};

const POLL_MS = 5000;
const PROBE_MS = 60000; // how soon to look again for an endpoint this node lacks
const LIST_LIMIT = 100;

// Panels whose endpoint may not exist on this node's version: hidden on 404.
const optional = { tasks: { missing: false, probeAt: 0 }, stats: { missing: false, probeAt: 0 } };

const S = { status: null, alerts: null, runs: null, deliveries: null, statusError: "", loadedAt: null };
const ackErrors = new Map(); // alert id -> message of the last failed ack
const acking = new Set();
const openDeliveries = new Set();
const seq = {};
let timer = 0;

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// ---- the API token ----
// A node with tokens answers 401 without one. The page asks once and keeps
// the token for this tab only (sessionStorage: gone when the tab closes,
// never sent to another origin); a 401 asks again.

const TOKEN_KEY = "herald.token";
let tokenPrompt = null; // one dialog for every call that got a 401 at once
let tokenDeclined = false; // cancelled: ask again only from the header button

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

// askToken shows the token dialog with the server's reason and resolves to
// the token typed, or "" when the person cancels.
function askToken(reason) {
  if (tokenPrompt) return tokenPrompt;
  tokenPrompt = new Promise((resolve) => {
    const dlg = $("token-dialog");
    $("token-reason").textContent = reason || "";
    $("token-input").value = "";
    const done = (value) => {
      $("token-form").onsubmit = null;
      dlg.onclose = null;
      if (dlg.open) dlg.close();
      tokenPrompt = null;
      resolve(value);
    };
    $("token-form").onsubmit = (e) => {
      e.preventDefault();
      const v = $("token-input").value.trim();
      if (!v) return;
      sessionStorage.setItem(TOKEN_KEY, v);
      tokenDeclined = false;
      done(v);
    };
    dlg.onclose = () => { tokenDeclined = true; done(""); };
    dlg.showModal();
    $("token-input").focus();
  });
  return tokenPrompt;
}

function signIn() {
  sessionStorage.removeItem(TOKEN_KEY);
  tokenDeclined = false;
  askToken("Enter an API token of this cluster.").then((t) => { if (t) poll(); });
}

// call sends one request to an endpoint of API and returns its JSON body;
// an error answer becomes an ApiError carrying the server's reason. A 401
// from a node with tokens asks for a token and tries once more with it.
async function call(name, opts = {}) {
  let [method, path] = API[name].split(" ");
  for (const [k, v] of Object.entries(opts.params || {})) path = path.replace("{" + k + "}", encodeURIComponent(v));
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(opts.query || {})) if (v !== "" && v != null) q.set(k, v);
  const url = q.toString() ? path + "?" + q : path;
  let resp;
  try {
    const headers = { Accept: "application/json" };
    if (token()) headers.Authorization = "Bearer " + token();
    resp = await fetch(url, { method, headers, cache: "no-store" });
  } catch (e) {
    throw new ApiError(0, "cannot reach the node (" + e.message + ")");
  }
  const text = await resp.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (_) { /* reported below */ }
  if (!resp.ok) {
    const why = body && body.error ? body.error : text.trim().slice(0, 300) || resp.statusText;
    if (resp.status === 401 && body && body.auth === "token" && !opts.retried) {
      sessionStorage.removeItem(TOKEN_KEY);
      if (!tokenDeclined && await askToken(why)) return call(name, { ...opts, retried: true });
    }
    throw new ApiError(resp.status, `${method} ${path} → ${resp.status}: ${why}`);
  }
  if (body === null) throw new ApiError(resp.status, `${method} ${path}: the answer is not JSON`);
  return body;
}

// ---- DOM helpers ----

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid != null && kid !== false) el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}

const $ = (id) => document.getElementById(id);

function fill(id, ...nodes) { $(id).replaceChildren(...nodes.flat(Infinity).filter((n) => n != null && n !== "")); }

function badge(text, cls) { return h("span", { class: "badge " + (cls || "") }, text); }

function empty(text) { return h("div", { class: "empty" }, text); }

// table renders rows with cols [{label, cell(row), cls}]; rowAttrs(row)
// gives a row's attributes; after(row) may return an extra row below it.
function table(cols, rows, rowAttrs, after) {
  const body = h("tbody");
  for (const r of rows) {
    body.append(h("tr", rowAttrs ? rowAttrs(r) : null, cols.map((c) => h("td", { class: c.cls }, c.cell(r)))));
    const extra = after && after(r);
    if (extra) body.append(extra);
  }
  return h("table", null, h("thead", null, h("tr", null, cols.map((c) => h("th", { class: c.cls }, c.label)))), body);
}

// Panel errors are shown above the last data that loaded, not instead of it.
function panelError(panel, msg) {
  const el = $(panel + "-panel").querySelector(".err");
  el.textContent = msg ? "Could not refresh: " + msg : "";
  el.hidden = !msg;
}

// Times read the same in every locale (2026-12-01 09:00:00): 12/01 is a
// different day in the US and in China.
const p2 = (n) => String(n).padStart(2, "0");
const dateOf = (d) => `${d.getFullYear()}-${p2(d.getMonth() + 1)}-${p2(d.getDate())}`;
const clockOf = (d) => `${p2(d.getHours())}:${p2(d.getMinutes())}:${p2(d.getSeconds())}`;
const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";

// when shows an RFC 3339 time in the browser's zone, the wire value in its
// tooltip.
function when(s) {
  if (!s || s.startsWith("0001-01-01")) return h("span", { class: "muted" }, "—");
  const d = new Date(s);
  if (isNaN(d)) return String(s);
  return h("time", { datetime: s, title: s }, dateOf(d) + " " + clockOf(d));
}

function short(hash, n = 10) {
  if (!hash) return h("span", { class: "muted" }, "—");
  return h("code", { title: hash }, hash.length > n ? hash.slice(0, n) : hash);
}

function todayLocal() { return dateOf(new Date()); }

// ---- loaders: each fetches one endpoint and renders its panel ----

// latest runs fn and drops its answer if a newer call of the same name has
// started meanwhile (a filter change races the poll).
async function latest(name, fn) {
  const n = (seq[name] = (seq[name] || 0) + 1);
  try {
    const data = await fn();
    return n === seq[name] ? data : undefined;
  } catch (e) {
    if (n === seq[name]) throw e;
    return undefined;
  }
}

async function loadStatus() {
  try {
    const st = await latest("status", () => call("status"));
    if (st === undefined) return;
    S.status = st;
    S.statusError = "";
    S.loadedAt = new Date();
    renderStatus();
  } catch (e) {
    S.statusError = e.message;
  }
}

async function loadAlerts() {
  try {
    const body = await latest("alerts", () => call("alerts"));
    if (body === undefined) return;
    S.alerts = body.alerts || [];
    panelError("alerts", "");
    renderAlerts();
  } catch (e) {
    panelError("alerts", e.message);
  }
}

async function loadRuns() {
  try {
    const body = await latest("runs", () => call("runs", { query: { limit: 50 } }));
    if (body === undefined) return;
    S.runs = body;
    panelError("runs", "");
    renderRuns();
  } catch (e) {
    panelError("runs", e.message);
  }
}

async function loadDeliveries() {
  const query = { rule: $("f-rule").value, state: $("f-state").value, limit: LIST_LIMIT };
  try {
    const body = await latest("deliveries", () => call("deliveries", { query }));
    if (body === undefined) return;
    S.deliveries = body;
    panelError("deliveries", "");
    renderDeliveries();
  } catch (e) {
    panelError("deliveries", e.message);
  }
}

// loadOptional fetches an endpoint that older or newer nodes may lack: a
// 404 or 405 hides its panel and it is asked again only after PROBE_MS.
async function loadOptional(name, query, render) {
  const o = optional[name];
  if (o.missing && Date.now() < o.probeAt) return;
  try {
    const body = await latest(name, () => call(name, { query }));
    if (body === undefined) return;
    o.missing = false;
    $(name + "-panel").hidden = false;
    panelError(name, "");
    render(body);
  } catch (e) {
    if (e.status === 404 || e.status === 405) {
      o.missing = true;
      o.probeAt = Date.now() + PROBE_MS;
      $(name + "-panel").hidden = true;
    } else {
      panelError(name, e.message);
    }
  }
}

function loadTasks() {
  return loadOptional("tasks", { state: $("t-state").value, limit: 50 }, renderTasks);
}

function loadStats() {
  return loadOptional("stats", { date: $("s-date").value || todayLocal() }, renderStats);
}

// ---- renderers ----

function renderStatus() {
  const st = S.status;
  const role = st.state || "unknown";
  fill("node",
    "Viewing ", h("b", null, st.node_id || "?"), " ", badge(role, role === "leader" ? "info" : ""),
    st.leader_id && st.leader_id !== st.node_id ? [" · leader ", h("b", null, st.leader_id)] : "",
    " · term " + (st.term ?? "?") + " · applied " + (st.applied_index ?? "?"));
  renderCluster(st);
  renderRules(st);
  renderChannels(st);
  addRuleOptions((st.rules || []).map((r) => r.name));
}

function memberLink(addr) {
  if (!addr) return h("span", { class: "muted" }, "—");
  let base = addr.includes("://") ? addr : location.protocol + "//" + (addr.startsWith(":") ? location.hostname + addr : addr);
  return h("a", { href: base.replace(/\/$/, "") + "/ui/", title: "open this member's dashboard" }, addr);
}

function renderCluster(st) {
  const members = st.members || [];
  if (!members.length) {
    fill("cluster", empty("No members known. Is this node bootstrapped or joined?"));
    return;
  }
  // A member's rule-set hash is shown when the status carries it; this
  // node's own hash always is. Differing hashes mean a rules file has not
  // reached every node.
  const hashOf = (m) => m.rules_hash || (m.id === st.node_id ? st.rules_hash : "");
  const hashes = new Set(members.map(hashOf).filter(Boolean));
  fill("cluster", table([
    { label: "Member", cell: (m) => [h("b", null, m.id), " ",
      m.leader ? badge("leader", "info") : "", m.id === st.node_id ? badge("you are here", "ok") : ""] },
    { label: "Vote", cell: (m) => (m.voter ? "voter" : badge("non-voter", "warn")) },
    { label: "Raft", cell: (m) => h("code", null, m.raft_addr || "—") },
    { label: "HTTP", cell: (m) => memberLink(m.http_addr) },
    { label: "Rule set", cell: (m) => [short(hashOf(m)), hashes.size > 1 && hashOf(m) ? [" ", badge("differs", "bad")] : ""] },
  ], members));
}

function renderRules(st) {
  const rules = [...(st.rules || [])].sort((a, b) => (!!b.error - !!a.error) || a.name.localeCompare(b.name));
  fill("rules-hash", st.rules_hash ? ["rule set ", short(st.rules_hash, 12)] : "");
  if (!rules.length) {
    fill("rules", empty("No rules loaded. Put .lua rule files in this node's rules directory."));
    return;
  }
  fill("rules", table([
    { label: "Rule", cell: (r) => h("b", null, r.name || "(unnamed)") },
    { label: "File", cell: (r) => h("code", null, r.file || "—") },
    { label: "Hash", cell: (r) => short(r.hash) },
    { label: "Status", cls: "msg", cell: (r) => r.error
      ? h("div", { class: "rule-error" }, "✗ Error: last good version running", h("span", { class: "why mono" }, r.error))
      : badge("ok", "ok") },
  ], rules, (r) => ({ class: r.error ? "error-row" : null, "data-rule": r.name })));
}

function renderChannels(st) {
  const chans = st.channels || [];
  if (!chans.length) {
    fill("channels", empty("No channels configured on this node."));
    return;
  }
  fill("channels", table([
    { label: "Channel", cell: (c) => h("b", null, c.name) },
    { label: "Plugin", cell: (c) => h("code", null, c.plugin || "—") },
    { label: "Health", cell: (c) => (c.healthy ? badge("healthy", "ok") : badge("unhealthy", "bad")) },
    { label: "Error", cls: "msg", cell: (c) => c.error || "" },
  ], chans));
}

function renderAlerts() {
  const alerts = [...S.alerts].sort((a, b) => a.acked - b.acked);
  const open = alerts.filter((a) => !a.acked).length;
  $("alerts-count").textContent = alerts.length ? `${open} open · ${alerts.length} total` : "";
  if (!alerts.length) {
    fill("alerts", empty("No alerts. All quiet."));
    return;
  }
  fill("alerts", table([
    { label: "Alert", cls: "msg", cell: (a) => [a.message, h("div", { class: "muted mono" }, a.cause)] },
    { label: "Rule", cell: (a) => a.rule || "—" },
    { label: "Count", cls: "num", cell: (a) => a.count },
    { label: "First", cell: (a) => when(a.first) },
    { label: "Last", cell: (a) => when(a.last) },
    { label: "", cell: (a) => [
      a.acked ? badge("acknowledged", "")
        : h("button", { type: "button", "data-ack": a.id, disabled: acking.has(a.id), onclick: () => ack(a.id) },
          acking.has(a.id) ? "Acking…" : "Ack"),
      ackErrors.has(a.id) ? h("span", { class: "ack-error" }, ackErrors.get(a.id)) : ""] },
  ], alerts, (a) => ({ class: a.acked ? "acked" : null, "data-alert": a.id })));
}

async function ack(id) {
  acking.add(id);
  renderAlerts();
  try {
    await call("ack", { params: { id } });
    ackErrors.delete(id);
  } catch (e) {
    ackErrors.set(id, "Ack failed: " + e.message);
  }
  acking.delete(id);
  await loadAlerts();
  if (S.alerts) renderAlerts(); // again: a failed refresh must still show the ack's error
  renderTiles();
}

const runBadge = { planned: "ok", planning: "info", failed: "bad", skipped: "warn" };

function renderRuns() {
  const runs = [...(S.runs.runs || [])].reverse();
  $("runs-count").textContent = runs.length ? `newest ${runs.length} of ${S.runs.total}` : "";
  addRuleOptions(runs.map((r) => r.rule));
  if (!runs.length) {
    fill("runs", empty("No runs yet. A run appears when a rule's schedule or a task comes due."));
    return;
  }
  fill("runs", table([
    { label: "Rule", cell: (r) => h("b", null, r.rule) },
    { label: "Slot", cell: (r) => when(r.slot) },
    { label: "State", cell: (r) => [badge(r.state, runBadge[r.state]), r.late ? badge("late", "warn") : ""] },
    { label: "Planned", cls: "num", cell: (r) => r.planned ?? 0 },
    { label: "Error", cls: "msg", cell: (r) => r.error || "" },
  ], runs, (r) => ({ title: r.key })));
}

const deliveryBadge = { sent: "ok", pending: "", claimed: "info", failed: "bad", expired: "bad", cancelled: "warn" };

function renderDeliveries() {
  const ds = [...(S.deliveries.deliveries || [])].reverse();
  $("deliveries-count").textContent = ds.length ? `newest ${ds.length} of ${S.deliveries.total}` : "";
  addRuleOptions(ds.map((d) => d.rule));
  if (!ds.length) {
    const filtered = $("f-rule").value || $("f-state").value;
    fill("deliveries", empty(filtered ? "No deliveries match these filters." : "No deliveries yet."));
    return;
  }
  const cols = [
    { label: "Rule", cell: (d) => d.rule },
    { label: "Recipient", cell: (d) => h("b", null, d.recipient) },
    { label: "Channel", cell: (d) => d.channel },
    { label: "State", cell: (d) => badge(d.state, deliveryBadge[d.state]) },
    { label: "Attempts", cls: "num", cell: (d) => d.attempts ?? 0 },
    { label: "Last error", cls: "msg", cell: (d) => (d.code ? "[" + d.code + "] " : "") + (d.last_error || "") },
    { label: "Sent at", cell: (d) => when(d.sent_at) },
  ];
  const toggle = (id) => () => {
    if (!openDeliveries.delete(id)) openDeliveries.add(id);
    renderDeliveries();
  };
  fill("deliveries", table(cols, ds,
    (d) => ({ class: "clickable", "data-delivery": d.id, title: "click for details", onclick: toggle(d.id) }),
    (d) => openDeliveries.has(d.id) && h("tr", { class: "detail" }, h("td", { colspan: cols.length }, deliveryDetail(d)))));
}

function deliveryDetail(d) {
  let payload = d.payload;
  try { payload = JSON.stringify(d.payload, null, 2); } catch (_) { /* shown as is */ }
  const kv = [
    ["id", h("code", null, d.id)], ["run", h("code", null, d.run_key)], ["slot", when(d.slot)],
    ["priority", d.priority], ["not before", when(d.not_before)], ["deadline", when(d.deadline)],
    ["next attempt", when(d.next_at)], ["ended", when(d.ended_at)], ["provider id", d.provider_id || "—"],
    ["claim", d.state === "claimed" && d.claim ? [`attempt in flight by ${d.claim.leader} (term ${d.claim.term}) until `, when(d.claim.expires_at)] : "—"],
  ];
  return [h("dl", { class: "kv" }, kv.map(([k, ...v]) => [h("dt", null, k), h("dd", null, v)])), h("pre", null, payload)];
}

function addRuleOptions(names) {
  const sel = $("f-rule");
  const have = new Set([...sel.options].map((o) => o.value));
  const add = [...new Set(names)].filter((n) => n && !have.has(n)).sort();
  for (const n of add) sel.append(h("option", { value: n }, n));
}

const taskBadge = { pending: "info", fired: "ok", cancelled: "warn" };

function deliveryCounts(counts) {
  const parts = Object.entries(counts || {}).sort().map(([st, n]) => badge(`${n} ${st}`, deliveryBadge[st]));
  return parts.length ? parts : h("span", { class: "muted" }, "—");
}

function renderTasks(body) {
  const tasks = body.tasks || [];
  const state = $("t-state").value;
  $("tasks-count").textContent = tasks.length ? `${tasks.length}${body.next ? "+" : ""} ${state || "in all"}, soonest first` : "";
  if (!tasks.length) {
    fill("tasks", empty(state ? `No ${state} tasks.` : "No API tasks."));
    return;
  }
  fill("tasks", table([
    { label: "Key", cls: "msg", cell: (t) => h("code", { title: t.data ? "data: " + JSON.stringify(t.data) : null }, t.key) },
    { label: "Rule", cell: (t) => t.rule },
    { label: "Due", cell: (t) => when(t.due_at) },
    { label: "State", cell: (t) => [badge(t.state, taskBadge[t.state]), t.late ? badge("late", "warn") : ""] },
    { label: "Deliveries", cell: (t) => deliveryCounts(t.deliveries) },
  ], tasks, (t) => ({ "data-task": t.key })));
}

const STAT_COUNTS = [["runs", "runs"], ["late_runs", "late"], ["skipped_runs", "skipped"], ["planned", "planned"],
  ["sent", "sent"], ["pending", "pending"], ["failed", "failed"], ["expired", "expired"], ["cancelled", "cancelled"]];
const STAT_BAD = new Set(["skipped_runs", "failed", "expired"]);

const pct = (x) => (x == null ? "—" : (Math.floor(x * 1000) / 10) + "%");
const secs = (x, sent) => (!sent ? "—" : x < 60 ? x.toFixed(1) + " s" : (x / 60).toFixed(1) + " min");

function renderStats(body) {
  const rules = body.rules || [];
  if (!rules.length) {
    fill("stats", empty(body.date === todayLocal() ? "Nothing planned or sent today yet." : "Nothing was planned for " + body.date + "."));
    return;
  }
  const t = body.total || {};
  const tile = (label, value, cls, title) => h("div", { class: "tile " + (cls || ""), title }, h("div", { class: "label" }, label), h("div", { class: "value" }, value));
  fill("stats",
    h("div", { class: "tiles" },
      STAT_COUNTS.map(([k, label]) => tile(label, t[k] ?? 0, t[k] > 0 && STAT_BAD.has(k) ? "bad" : k === "late_runs" && t[k] > 0 ? "warn" : "")),
      tile("success", pct(t.success_rate), t.success_rate < 1 ? "bad" : "ok"),
      tile("avg delay", secs(t.slot_to_sent_avg_seconds, t.sent), "", "from slot to sent; p95 " + secs(t.slot_to_sent_p95_seconds, t.sent))),
    table([
      { label: "Rule", cell: (r) => h("b", null, r.rule) },
      ...STAT_COUNTS.map(([k, label]) => ({ label: label[0].toUpperCase() + label.slice(1), cls: "num", cell: (r) => (r[k] > 0 && STAT_BAD.has(k) ? h("span", { class: "rule-error" }, r[k]) : r[k] ?? 0) })),
      { label: "Success", cls: "num", cell: (r) => pct(r.success_rate) },
      { label: "Slot → sent avg / p95", cls: "num", cell: (r) => secs(r.slot_to_sent_avg_seconds, r.sent) + " / " + secs(r.slot_to_sent_p95_seconds, r.sent) },
      { label: "Failures", cls: "msg", cell: (r) => Object.entries(r.failures || {}).sort((a, b) => b[1] - a[1]).map(([why, n]) => h("div", null, `${n} × ${why}`)) },
    ], rules));
}

function renderTiles() {
  const st = S.status;
  const tiles = [];
  const tile = (label, value, cls, title) =>
    tiles.push(h("div", { class: "tile " + (cls || ""), title }, h("div", { class: "label" }, label), h("div", { class: "value" }, value)));
  if (st) {
    tile("Node", st.node_id || "?", "", st.state);
    tile("Leader", st.leader_id || "none", st.leader_id ? "" : "bad", st.leader_id ? "" : "no leader: nothing is sent until one is elected");
    tile("Term", st.term ?? "?");
    const rules = st.rules || [];
    const broken = rules.filter((r) => r.error).length;
    tile("Rules", broken ? `${broken} of ${rules.length} broken` : `${rules.length} ok`, broken ? "bad" : "ok");
    const chans = st.channels || [];
    const sick = chans.filter((c) => !c.healthy).length;
    tile("Channels", `${chans.length - sick} / ${chans.length} healthy`, sick ? "bad" : "ok");
  }
  if (S.alerts) {
    const open = S.alerts.filter((a) => !a.acked).length;
    tile("Open alerts", open, open ? "bad" : "ok");
  }
  fill("tiles", ...tiles);
}

function renderLive() {
  const dot = $("live-dot");
  const banner = $("banner");
  const at = S.loadedAt ? clockOf(S.loadedAt) : "";
  if (S.statusError) {
    dot.className = "dot bad";
    $("updated").textContent = at ? "stale since " + at : "no data";
    banner.textContent = "This node's API is not answering: " + S.statusError + (at ? ` — showing data from ${at}.` : "");
    banner.hidden = false;
  } else {
    dot.className = "dot ok";
    $("updated").textContent = "updated " + at;
    const warnings = (S.status && S.status.warnings) || [];
    banner.textContent = warnings.join(" · ");
    banner.hidden = warnings.length === 0;
  }
}

// ---- polling ----

async function poll() {
  clearTimeout(timer);
  await Promise.all([
    loadStatus(), loadAlerts(), loadRuns(), loadDeliveries(),
    loadTasks(),
    loadStats(),
  ]);
  renderTiles();
  renderLive();
  timer = setTimeout(poll, document.hidden ? POLL_MS * 6 : POLL_MS);
}

// Filters live in the URL fragment so a reload or a shared link keeps them.
function readFilters() {
  const p = new URLSearchParams(location.hash.slice(1));
  const rule = p.get("rule") || "";
  if (rule) addRuleOptions([rule]);
  $("f-rule").value = rule;
  $("f-state").value = p.get("state") || "";
}

function filtersChanged() {
  const p = new URLSearchParams();
  if ($("f-rule").value) p.set("rule", $("f-rule").value);
  if ($("f-state").value) p.set("state", $("f-state").value);
  history.replaceState(null, "", p.toString() ? "#" + p : location.pathname);
  loadDeliveries();
}

document.addEventListener("DOMContentLoaded", () => {
  $("sign-in").addEventListener("click", signIn);
  $("token-cancel").addEventListener("click", () => $("token-dialog").close());
  $("footer").textContent = `Times are shown in ${zone}; hover one for its RFC 3339 value. Refreshes every ${POLL_MS / 1000} s.`;
  readFilters();
  $("f-rule").addEventListener("change", filtersChanged);
  $("f-state").addEventListener("change", filtersChanged);
  $("delivery-filters").addEventListener("submit", (e) => e.preventDefault());
  $("task-filters").addEventListener("submit", (e) => e.preventDefault());
  $("t-state").addEventListener("change", loadTasks);
  $("s-date").value = todayLocal();
  $("s-date").addEventListener("change", loadStats);
  $("stats-filters").addEventListener("submit", (e) => e.preventDefault());
  document.addEventListener("visibilitychange", () => { if (!document.hidden) poll(); });
  poll();
});
