// Herald operator dashboard: polls this node's JSON API and renders it.
// Plain DOM, no framework, no build step, nothing from another host.
// Every value reaches the page through textContent (never innerHTML):
// rule errors, recipients and payloads are user data. The words are in
// i18n.js, times in clock.js, charts in charts.js, panels in panels.js.
"use strict";

// Every endpoint the page calls, written as the server's mux patterns.
// dashboard_test.go reads these strings and checks each against the API,
// so a path may appear nowhere else in the dashboard's files.
const API = {
  status: "GET /v1/status",
  alerts: "GET /v1/alerts",
  ack: "POST /v1/alerts/{id}/ack",
  runs: "GET /v1/runs",
  deliveries: "GET /v1/deliveries",
  tasks: "GET /v1/tasks",
  stats: "GET /v1/stats",
  fire: "POST /v1/rules/{name}/fire",
  pause: "POST /v1/rules/{name}/pause",
  resume: "POST /v1/rules/{name}/resume",
  retry: "POST /v1/deliveries/{id}/retry",
  recall: "POST /v1/deliveries/recall",
  approve: "POST /v1/runs/{key}/approve",
  reject: "POST /v1/runs/{key}/reject",
  audit: "GET /v1/audit",
};

const POLL_MS = 5000;
const PROBE_MS = 60000; // how soon to look again for an endpoint this node lacks
const LIST_LIMIT = 100;
const WALL_MS = 10000; // how long wall mode shows each view

// Panels whose endpoint may not exist on this node's version: hidden on 404.
const optional = { tasks: { missing: false, probeAt: 0 }, stats: { missing: false, probeAt: 0 } };

const S = { status: null, alerts: null, runs: null, deliveries: null, stats: null, person: null, audit: null, statusError: "", loadedAt: null, role: null };
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
// an error answer becomes an ApiError carrying the server's reason, led
// by what the status means in the page's language. A 401 from a node with
// tokens asks for a token and tries once more with it.
async function call(name, opts = {}) {
  let [method, path] = API[name].split(" ");
  for (const [k, v] of Object.entries(opts.params || {})) path = path.replace("{" + k + "}", encodeURIComponent(v));
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(opts.query || {})) if (v !== "" && v != null) q.set(k, v);
  const url = q.toString() ? path + "?" + q : path;
  const init = { method, headers: { Accept: "application/json" }, cache: "no-store" };
  if (opts.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(opts.body);
  }
  let resp;
  try {
    if (token()) init.headers.Authorization = "Bearer " + token();
    resp = await fetch(url, init);
  } catch (e) {
    throw new ApiError(0, t("cannot reach", { why: e.message }));
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
    const meaning = WORDS.en["http " + resp.status] ? ` (${t("http " + resp.status)})` : "";
    throw new ApiError(resp.status, `${method} ${path} → ${resp.status}: ${why}${meaning}`);
  }
  if (body === null) throw new ApiError(resp.status, `${method} ${path}: ${t("not json")}`);
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
    body.append(h("tr", rowAttrs ? rowAttrs(r) : null, cols.map((c) => h("td", { class: c.cls, "data-label": c.label }, c.cell(r)))));
    const extra = after && after(r);
    if (extra) body.append(extra);
  }
  return h("table", null, h("thead", null, h("tr", null, cols.map((c) => h("th", { class: c.cls }, c.label)))), body);
}

// Panel errors are shown above the last data that loaded, not instead of it.
function panelError(panel, msg) {
  const el = $(panel + "-panel").querySelector(".err");
  el.textContent = msg ? t("could not refresh") + msg : "";
  el.hidden = !msg;
}

// when shows an RFC 3339 time in the display zone with its offset, the
// wire value in its tooltip.
function when(s) {
  if (isZero(s)) return h("span", { class: "muted" }, "—");
  const d = new Date(s);
  if (isNaN(d)) return String(s);
  return h("time", { datetime: s, title: s + " · " + zoneName() }, stamp(d));
}

function short(hash, n = 10) {
  if (!hash) return h("span", { class: "muted" }, "—");
  return h("code", { title: hash }, hash.length > n ? hash.slice(0, n) : hash);
}

// person shows a recipient as 李娜 (lina), or the userid alone.
function person(id, name) {
  if (!name || name === id) return h("b", { class: "who" }, id);
  return h("span", { class: "who" }, h("b", null, name), " ", h("span", { class: "muted" }, "(" + id + ")"));
}

// ---- actions: confirm, do, say what happened ----

// roleAllows: what the token's role lets it do. Until the node says
// which role the page holds, every action is offered and the API's 401
// or 403 says otherwise.
const ROLE_RANK = { read: 0, operate: 1, admin: 2 };
function roleAllows(need) {
  if (!S.role || !(S.role in ROLE_RANK)) return true;
  return ROLE_RANK[S.role] >= ROLE_RANK[need];
}

function toast(msg, bad) {
  const el = $("toast");
  el.textContent = msg;
  el.className = "toast " + (bad ? "bad" : "ok");
  el.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { el.hidden = true; }, bad ? 15000 : 6000);
}

// confirmThen asks question in the page's modal; on yes it runs act
// (given the reason typed, when asked for one), shows its answer, and
// refreshes the page.
function confirmThen(question, act, askReason) {
  const box = $("confirm");
  $("confirm-q").textContent = question;
  $("confirm-reason-box").hidden = !askReason;
  $("confirm-reason").value = "";
  box.hidden = false;
  $("confirm-yes").focus();
  return new Promise((resolve) => {
    const done = async (yes) => {
      $("confirm-yes").onclick = $("confirm-no").onclick = null;
      box.hidden = true;
      if (!yes) return resolve(false);
      try {
        toast(await act($("confirm-reason").value.trim()), false);
        resolve(true);
      } catch (e) {
        toast(t("action failed", { why: e.message }), true);
        resolve(false);
      }
      poll();
    };
    $("confirm-yes").onclick = () => done(true);
    $("confirm-no").onclick = () => done(false);
  });
}

function actionButton(label, attrs, onclick) {
  return h("button", Object.assign({ type: "button", class: "act", onclick }, attrs), label);
}

function fireButton(rule) {
  if (!roleAllows("operate")) return "";
  return actionButton(t("fire"), { "data-fire": rule }, () => confirmThen(t("fire q", { rule }), async () => {
    const res = await call("fire", { params: { name: rule } });
    return t(res.paused ? "fire ok paused" : "fire ok", { rule, run: res.run });
  }));
}

// pauseButton pauses a running rule (asking why) or resumes a paused one.
function pauseButton(rule, paused) {
  if (!roleAllows("operate")) return "";
  if (paused) {
    return actionButton(t("resume"), { "data-resume": rule }, () => confirmThen(t("resume q", { rule }), async () => {
      await call("resume", { params: { name: rule }, body: {} });
      return t("resume ok", { rule });
    }));
  }
  return actionButton(t("pause"), { "data-pause": rule }, () => confirmThen(t("pause q", { rule }), async (reason) => {
    await call("pause", { params: { name: rule }, body: reason ? { reason } : {} });
    return t("pause ok", { rule });
  }, true));
}

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
    if (st.display_timezone && st.display_timezone !== clock.cluster) {
      clock.cluster = st.display_timezone;
      zoneChanged(false);
    }
    // After the zone: the first day shown is the cluster's day in its zone.
    if (syncClock(st.now)) {
      // The days the page opened on were the browser's guess: now the
      // cluster's, unless a person has picked one meanwhile.
      for (const id of ["s-date", "p-date"]) if (!$(id).dataset.picked) $(id).value = todayInZone();
    }
    if (st.role) S.role = st.role;
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

async function loadPerson() {
  const who = $("p-query").value.trim();
  if (!who) {
    S.person = null;
    fill("person", empty(t("type a name")));
    return;
  }
  try {
    const body = await latest("person", () => call("deliveries", { query: { recipient: who, date: $("p-date").value, tz: zoneName(), limit: 1000 } }));
    if (body === undefined) return;
    S.person = { who, body };
    panelError("person", "");
    renderPerson();
  } catch (e) {
    panelError("person", e.message);
  }
}

// loadOptional fetches an endpoint that older or newer nodes may lack: a
// 404 or 405 hides its panel and it is asked again only after PROBE_MS.
async function loadOptional(name, query, render, panels) {
  const o = optional[name];
  if (o.missing && Date.now() < o.probeAt) return;
  try {
    const body = await latest(name, () => call(name, { query }));
    if (body === undefined) return;
    o.missing = false;
    for (const p of panels) { $(p + "-panel").hidden = false; panelError(p, ""); }
    render(body);
  } catch (e) {
    if (e.status === 404 || e.status === 405) {
      o.missing = true;
      o.probeAt = Date.now() + PROBE_MS;
      for (const p of panels) $(p + "-panel").hidden = true;
    } else {
      for (const p of panels) panelError(p, e.message);
    }
  }
}

function loadTasks() {
  return loadOptional("tasks", { state: $("t-state").value, limit: 50 }, renderTasks, ["tasks"]);
}

function loadStats() {
  return loadOptional("stats", { date: $("s-date").value || todayInZone() }, (body) => {
    S.stats = body;
    renderStats(body);
    renderDay(body);
  }, ["stats", "day"]);
}

// loadAudit shows the audit trail to an admin token only (the API refuses
// the others: the trail says who holds which token).
async function loadAudit() {
  const show = S.role === "admin";
  $("audit-panel").hidden = !show;
  if (!show) { S.audit = null; return; }
  try {
    const body = await latest("audit", () => call("audit", { query: { limit: 50 } }));
    if (body === undefined) return;
    S.audit = body;
    panelError("audit", "");
    renderAudit(body);
  } catch (e) {
    panelError("audit", e.message);
  }
}

function renderAll() {
  translateStatic();
  $("footer").textContent = t("footer", { zone: zoneLabel(), s: POLL_MS / 1000 });
  $("day-zone").textContent = zoneLabel();
  if (S.status) renderStatus();
  if (S.alerts) renderAlerts();
  if (S.runs) renderRuns();
  if (S.deliveries) renderDeliveries();
  if (S.stats) { renderStats(S.stats); renderDay(S.stats); }
  if (S.audit) renderAudit(S.audit);
  if (S.person) renderPerson(); else fill("person", empty(t("type a name")));
  renderTiles();
  renderLive();
  renderLangSwitch();
}

// ---- polling ----

async function poll() {
  clearTimeout(timer);
  // The first poll reads the cluster's clock before asking for "today".
  if (!clock.synced) await loadStatus();
  await Promise.all([loadStatus(), loadAlerts(), loadRuns(), loadDeliveries(), loadTasks(), loadStats(),
    S.person ? loadPerson() : null]);
  await loadAudit(); // after status: it says whether this token may read the trail
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
  if (p.get("who")) $("p-query").value = p.get("who");
  setWall(p.has("wall"));
}

function writeFilters() {
  const p = new URLSearchParams();
  if ($("f-rule").value) p.set("rule", $("f-rule").value);
  if ($("f-state").value) p.set("state", $("f-state").value);
  if ($("p-query").value.trim()) p.set("who", $("p-query").value.trim());
  if (document.body.classList.contains("wall")) p.set("wall", "1");
  history.replaceState(null, "", p.toString() ? "#" + p : location.pathname);
}

// ---- language, zone, wall mode ----

function renderLangSwitch() {
  $("lang-zh").classList.toggle("on", LANG === "zh");
  $("lang-en").classList.toggle("on", LANG === "en");
  $("lang-zh").setAttribute("aria-pressed", LANG === "zh");
  $("lang-en").setAttribute("aria-pressed", LANG === "en");
}

function zoneChanged(user) {
  const sel = $("zone");
  const names = [...new Set([clock.cluster, ...ZONES].filter(Boolean))];
  sel.replaceChildren(...names.map((z) => h("option", { value: z }, z + (z === clock.cluster ? " ★" : ""))));
  sel.value = zoneName();
  if (user) { $("s-date").value = todayInZone(); $("p-date").value = todayInZone(); }
  renderAll();
}

let wallTimer = 0;
const WALL_VIEWS = ["sends", "lateness", "alerts", "missed", "upcoming"];

function setWall(on) {
  document.body.classList.toggle("wall", on);
  $("wall-toggle").dataset.i18n = on ? "exit wall" : "wall";
  $("wall-toggle").textContent = t(on ? "exit wall" : "wall");
  clearInterval(wallTimer);
  let i = 0;
  const show = () => {
    document.body.dataset.wallView = WALL_VIEWS[i % WALL_VIEWS.length];
    $("wall-title").textContent = t("wall title", { date: $("s-date").value || todayInZone() }) + " · " + zoneLabel();
    i++;
  };
  if (on) { show(); wallTimer = setInterval(show, WALL_MS); } else delete document.body.dataset.wallView;
}

document.addEventListener("DOMContentLoaded", () => {
  $("sign-in").addEventListener("click", signIn);
  $("token-cancel").addEventListener("click", () => $("token-dialog").close());
  setLang(LANG);
  readFilters();
  zoneChanged(false);
  $("s-date").value = todayInZone();
  $("p-date").value = todayInZone();
  const on = (id, ev, f) => $(id).addEventListener(ev, f);
  on("f-rule", "change", () => { writeFilters(); loadDeliveries(); });
  on("f-state", "change", () => { writeFilters(); loadDeliveries(); });
  on("delivery-filters", "submit", (e) => e.preventDefault());
  on("task-filters", "submit", (e) => e.preventDefault());
  on("t-state", "change", loadTasks);
  on("s-date", "change", () => { $("s-date").dataset.picked = "1"; loadStats(); });
  on("stats-filters", "submit", (e) => e.preventDefault());
  on("lat-rule", "change", () => S.stats && renderDay(S.stats));
  on("person-form", "submit", (e) => { e.preventDefault(); writeFilters(); loadPerson(); });
  on("p-date", "change", () => { $("p-date").dataset.picked = "1"; if ($("p-query").value.trim()) loadPerson(); });
  on("lang-zh", "click", () => { setLang("zh"); renderAll(); });
  on("lang-en", "click", () => { setLang("en"); renderAll(); });
  on("zone", "change", () => { chooseZone($("zone").value); zoneChanged(true); poll(); });
  on("wall-toggle", "click", () => { setWall(!document.body.classList.contains("wall")); writeFilters(); });
  document.addEventListener("keydown", (e) => { if (e.key === "Escape" && !$("confirm").hidden) $("confirm-no").click(); });
  document.addEventListener("visibilitychange", () => { if (!document.hidden) poll(); });
  let resized = 0;
  window.addEventListener("resize", () => { clearTimeout(resized); resized = setTimeout(() => S.stats && renderDay(S.stats), 150); });
  renderAll();
  if ($("p-query").value) loadPerson();
  poll();
});
