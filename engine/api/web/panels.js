// Herald dashboard: the panels. Each render function draws one panel from
// the last answer kept in S; app.js loads and polls.
"use strict";

function renderStatus() {
  const st = S.status;
  const role = st.state || "unknown";
  fill("node",
    t("viewing"), " ", h("b", null, st.node_id || "?"), " ", badge(t(role), role === "leader" ? "info" : ""),
    st.leader_id && st.leader_id !== st.node_id ? [" · ", t("leader is"), " ", h("b", null, st.leader_id)] : "",
    ` · ${t("term")} ${st.term ?? "?"} · ${t("applied")} ${st.applied_index ?? "?"}`);
  renderCluster(st);
  renderRules(st);
  renderChannels(st);
  addRuleOptions((st.rules || []).map((r) => r.name));
}

function memberLink(addr) {
  if (!addr) return h("span", { class: "muted" }, "—");
  const base = addr.includes("://") ? addr : location.protocol + "//" + (addr.startsWith(":") ? location.hostname + addr : addr);
  return h("a", { href: base.replace(/\/$/, "") + "/ui/", title: t("open member") }, addr);
}

function renderCluster(st) {
  const members = st.members || [];
  if (!members.length) {
    fill("cluster", empty(t("no members")));
    return;
  }
  // Differing rule-set hashes mean a rules file has not reached every node.
  const hashOf = (m) => m.rules_hash || (m.id === st.node_id ? st.rules_hash : "");
  const hashes = new Set(members.map(hashOf).filter(Boolean));
  fill("cluster", table([
    { label: t("member"), cell: (m) => [h("b", null, m.id), " ",
      m.leader ? badge(t("leader"), "info") : "", m.id === st.node_id ? badge(t("you are here"), "ok") : ""] },
    { label: t("vote"), cell: (m) => (m.voter ? t("voter") : badge(t("non-voter"), "warn")) },
    { label: t("raft"), cell: (m) => h("code", null, m.raft_addr || "—") },
    { label: t("http"), cell: (m) => memberLink(m.http_addr) },
    { label: t("rule set"), cell: (m) => [short(hashOf(m)), hashes.size > 1 && hashOf(m) ? [" ", badge(t("differs"), "bad")] : ""] },
  ], members));
}

function renderRules(st) {
  const rules = [...(st.rules || [])].sort((a, b) => (!!b.error - !!a.error) || a.name.localeCompare(b.name));
  fill("rules-hash", st.rules_hash ? [t("rule set") + " ", short(st.rules_hash, 12)] : "");
  if (!rules.length) {
    fill("rules", empty(t("no rules")));
    return;
  }
  const scheduled = new Set(((S.stats && S.stats.upcoming) || []).map((u) => u.rule));
  fill("rules", table([
    { label: t("rule"), cell: (r) => h("b", null, r.name || "?") },
    { label: t("file"), cell: (r) => h("code", null, r.file || "—") },
    { label: t("hash"), cell: (r) => short(r.hash) },
    { label: t("status"), cls: "msg", cell: (r) => [r.error
      ? h("div", { class: "rule-error" }, t("rule error"), h("span", { class: "why mono" }, r.error))
      : r.file ? badge(t("ok"), "ok") : badge(t("no file"), "warn"), r.paused ? [" ", badge(t("paused"), "warn"), " ", pausedBy(r)] : ""] },
    { label: "", cls: "acts", cell: (r) => [scheduled.has(r.name) ? fireButton(r.name) : "", " ", r.error && !r.hash ? "" : pauseButton(r.name, r.paused)] },
  ], rules, (r) => ({ class: r.error ? "error-row" : null, "data-rule": r.name })));
}

function renderChannels(st) {
  const chans = st.channels || [];
  if (!chans.length) {
    fill("channels", empty(t("no channels")));
    return;
  }
  fill("channels", table([
    { label: t("channel"), cell: (c) => h("b", null, c.name) },
    { label: t("plugin"), cell: (c) => h("code", null, c.plugin || "—") },
    { label: t("health"), cell: (c) => (c.healthy ? badge(t("healthy"), "ok") : badge(t("unhealthy"), "bad")) },
    { label: t("error"), cls: "msg", cell: (c) => c.error || "" },
  ], chans));
}

// alertText builds an alert's title and sentence in the page's language
// from its typed cause (kind and params); an alert of a kind this page
// does not know shows the engine's message.
function alertText(a) {
  const kind = a.kind && WORDS.en["alert." + a.kind] ? a.kind : "";
  if (!kind) return { title: t("alert.other"), text: a.message };
  // Recorded before alerts had params, or a kind without a sentence of its
  // own (the directory's held and refresh alerts say different things):
  // the kind's title, the engine's words.
  if (!a.params || !Object.keys(a.params).some((k) => a.params[k]) || !WORDS.en["alertx." + kind]) {
    return { title: t("alert." + kind), text: a.message };
  }
  const p = Object.assign({}, a.params || {});
  if (p.recipient) p.recipient = p.recipient_name ? `${p.recipient_name} (${p.recipient})` : p.recipient;
  if (p.slot) p.slot = stamp(new Date(p.slot));
  if (p.late_seconds != null) p.late = secsText(p.late_seconds);
  if (p.since) p.since = stamp(new Date(p.since));
  if (p.nodes) p.nodes = p.nodes.join(", ");
  p.rule = p.rule || a.rule;
  for (const k of ["rule", "run", "recipient", "channel", "error", "code", "slot", "since", "file", "nodes", "count", "late"]) {
    if (p[k] == null || p[k] === "") p[k] = "—";
  }
  return { title: t("alert." + kind), text: t("alertx." + kind, p) };
}

function renderAlerts() {
  const alerts = [...S.alerts].sort((a, b) => a.acked - b.acked);
  const open = alerts.filter((a) => !a.acked).length;
  $("alerts-count").textContent = alerts.length ? t("alerts count", { open, total: alerts.length }) : "";
  if (!alerts.length) {
    fill("alerts", empty(t("no alerts")));
    return;
  }
  // Cards, not a table: a long sentence keeps its width on a phone.
  fill("alerts", h("div", { class: "cards" }, alerts.map((a) => {
    const { title, text } = alertText(a);
    return h("div", { class: "card alert" + (a.acked ? " acked" : ""), "data-alert": a.id, "data-kind": a.kind || "" },
      h("div", { class: "card-head" }, h("b", { class: "alert-title" }, title), a.count > 1 ? badge(t("alert count", { n: a.count }), "warn") : "",
        a.rule ? badge(a.rule, "") : "", h("span", { class: "muted when" }, when(a.last))),
      h("div", { class: "alert-text" }, text),
      h("div", { class: "card-foot" }, h("span", { class: "muted mono" }, a.cause), " ", h("span", { class: "muted" }, t("first"), " ", when(a.first)),
        h("span", { class: "grow" }),
        a.acked ? badge(t("acknowledged"), "") : roleAllows("operate")
          ? h("button", { type: "button", "data-ack": a.id, disabled: acking.has(a.id), onclick: () => ack(a.id) },
            acking.has(a.id) ? t("acking") : t("ack")) : "",
        ackErrors.has(a.id) ? h("span", { class: "ack-error" }, ackErrors.get(a.id)) : ""));
  })));
}

// ack acknowledges at once (an ack is undone by nothing but also harms
// nothing: the alert stays listed and re-opens if its message changes),
// showing the API's answer on the alert itself.
async function ack(id) {
  acking.add(id);
  renderAlerts();
  try {
    await call("ack", { params: { id } });
    ackErrors.delete(id);
    toast(t("ack ok"), false);
  } catch (e) {
    ackErrors.set(id, t("ack failed") + ": " + e.message);
  }
  acking.delete(id);
  await loadAlerts();
  if (S.alerts) renderAlerts(); // again: a failed refresh must still show the ack's error
  renderTiles();
}

const runBadge = { planned: "ok", planning: "info", failed: "bad", skipped: "warn", paused: "warn", awaiting_approval: "warn", rejected: "bad" };

function renderRuns() {
  const runs = [...(S.runs.runs || [])].reverse();
  $("runs-count").textContent = runs.length ? t("newest of", { n: runs.length, total: S.runs.total }) : "";
  addRuleOptions(runs.map((r) => r.rule));
  if (!runs.length) {
    fill("runs", empty(t("no runs")));
    return;
  }
  fill("runs", table([
    { label: t("rule"), cell: (r) => h("b", null, r.rule) },
    { label: t("slot"), cell: (r) => when(r.slot) },
    { label: t("state"), cell: (r) => [badge(t(r.state), runBadge[r.state]), r.late ? badge(t("late"), "warn") : ""] },
    { label: t("planned"), cls: "num", cell: (r) => r.planned ?? 0 },
    { label: t("error"), cls: "msg", cell: (r) => r.state === "awaiting_approval" && r.approval ? approvalCell(r) : r.error || "" },
  ], runs, (r) => ({ title: r.key, "data-run": r.key })));
}

// approvalCell shows a held run's first message beside its Approve and
// Reject buttons: who approves sees what 1,000 people would get.
function approvalCell(r) {
  const a = r.approval;
  const buttons = roleAllows("operate") ? [
    actionButton(t("approve"), { "data-approve": r.key }, () => confirmThen(t("approve q", { run: r.key, n: a.count }), async () => {
      const res = await call("approve", { params: { key: r.key } });
      return t("approve ok", { n: res.released });
    })),
    actionButton(t("reject"), { "data-reject": r.key }, () => confirmThen(t("reject q", { run: r.key, n: a.count }), async () => {
      const res = await call("reject", { params: { key: r.key } });
      return t("reject ok", { n: res.cancelled });
    })),
  ] : [];
  return h("div", { class: "approval" },
    h("div", null, t("approval text", { n: a.count, over: a.over })),
    h("pre", { class: "content", "data-preview": r.key }, messageText(a.preview)), buttons);
}

const deliveryBadge = { sent: "ok", pending: "", claimed: "info", failed: "bad", expired: "bad", cancelled: "warn", recalled: "warn" };

function renderDeliveries() {
  const ds = [...(S.deliveries.deliveries || [])].reverse();
  $("deliveries-count").textContent = ds.length ? t("newest of", { n: ds.length, total: S.deliveries.total }) : "";
  addRuleOptions(ds.map((d) => d.rule));
  if (!ds.length) {
    const filtered = $("f-rule").value || $("f-state").value;
    fill("deliveries", empty(filtered ? t("no match") : t("no deliveries")));
    return;
  }
  const cols = [
    { label: t("rule"), cell: (d) => d.rule },
    { label: t("recipient"), cell: (d) => person(d.recipient, d.recipient_name) },
    { label: t("channel"), cell: (d) => d.channel },
    { label: t("state"), cell: (d) => badge(t(d.state), deliveryBadge[d.state]) },
    { label: t("attempts"), cls: "num", cell: (d) => d.attempts ?? 0 },
    { label: t("last error"), cls: "msg", cell: (d) => (d.code ? "[" + d.code + "] " : "") + (d.last_error || "") },
    { label: t("sent at"), cell: (d) => when(d.sent_at) },
  ];
  const toggle = (id) => () => {
    if (!openDeliveries.delete(id)) openDeliveries.add(id);
    renderDeliveries();
  };
  fill("deliveries", table(cols, ds,
    (d) => ({ class: "clickable", "data-delivery": d.id, title: t("click for details"), onclick: toggle(d.id) }),
    (d) => openDeliveries.has(d.id) && h("tr", { class: "detail" }, h("td", { colspan: cols.length }, deliveryDetail(d)))));
}

// messageText is the readable text of a payload (text, markdown, or
// WeCom's own body), else its JSON.
function messageText(p) {
  if (p && typeof p === "object") {
    if (typeof p.content === "string") return p.content;
    const body = p[p.msgtype];
    if (body && typeof body.content === "string") return body.content;
    if (body && typeof body.title === "string") return body.title + (body.description ? "\n" + body.description : "");
  }
  try { return JSON.stringify(p, null, 2); } catch (_) { return String(p); }
}

function failureList(d) {
  const fs = d.failures || [];
  if (!fs.length) return "";
  return h("div", { class: "failures" }, h("h4", null, t("failures")), h("ol", null, fs.map((f) =>
    h("li", { "data-outcome": f.outcome }, when(f.at), " ", badge(t(f.outcome === "expired" ? "expired" : "failed"), "bad"), " ",
      t("attempt", { n: f.attempt }), " · ", h("span", { class: "muted" }, f.outcome), " ",
      f.code ? h("code", null, "[" + f.code + "]") : "", " ", f.error || ""))));
}

// clickList: who clicked what on the delivery's card, and whether the card
// was replaced after it (on_action's answer).
function clickList(d) {
  const ks = d.clicks || [];
  if (!ks.length) return "";
  const state = { pending: ["card pending", "info"], updated: ["card updated", "ok"], failed: ["card failed", "bad"] };
  return h("div", { class: "clicks" }, h("h4", null, t("clicks")), h("ol", null, ks.map((k) => {
    const st = state[k.update_state];
    return h("li", { "data-key": k.key, "data-userid": k.userid }, when(k.at), " ", t("click text", { who: k.userid, key: k.key }),
      st ? [" ", badge(t(st[0]), st[1])] : "", k.error ? [" ", h("span", { class: "muted" }, k.error)] : "");
  })));
}

function deliveryDetail(d) {
  const kv = [
    [t("id"), h("code", null, d.id)], [t("run"), h("code", null, d.run_key)], [t("slot"), when(d.slot)],
    [t("priority"), d.priority], [t("not before"), when(d.not_before)], [t("deadline"), when(d.deadline)],
    [t("next attempt"), when(d.next_at)], [t("ended"), when(d.ended_at)], [t("provider id"), d.provider_id || "—"],
    [t("claim"), d.state === "claimed" && d.claim ? [t("claim text", { leader: d.claim.leader, term: d.claim.term }), when(d.claim.expires_at)] : "—"],
  ];
  if (d.recall) kv.push([t("recall"), d.state === "recalled" ? [t("recalled by", { by: d.recall.by }), when(d.recall.at)] : d.recall.done ? d.recall.error || "—" : t("pending")]);
  return [h("dl", { class: "kv" }, kv.map(([k, ...v]) => [h("dt", null, k), h("dd", null, v)])), d.state === "sent" ? recallButton(d) : "", failureList(d), clickList(d),
    h("h4", null, t("content")), h("pre", { class: "content" }, messageText(d.payload))];
}

function addRuleOptions(names) {
  for (const id of ["f-rule", "lat-rule"]) {
    const sel = $(id);
    const have = new Set([...sel.options].map((o) => o.value));
    const add = [...new Set(names)].filter((n) => n && !have.has(n)).sort();
    for (const n of add) sel.append(h("option", { value: n }, n));
  }
}

// renderPerson answers "did 李娜 get it?": every delivery of the day to
// the person, newest first, with its times, failed attempts and content.
function renderPerson() {
  const { who, body } = S.person;
  const ds = [...(body.deliveries || [])].reverse();
  const names = (body.recipients || []).map((p) => (p.name ? `${p.name} (${p.userid})` : p.userid)).join(", ") || who;
  if (!ds.length) {
    fill("person", empty(t("person none", { who: names, date: body.date || "" })));
    return;
  }
  fill("person", h("div", { class: "person-head" }, t("person found", { who: names, date: body.date || "", n: body.total })),
    h("div", { class: "cards" }, ds.map((d) => h("div", { class: "card delivery", "data-delivery": d.id, "data-state": d.state },
      h("div", { class: "card-head" }, badge(t(d.state), deliveryBadge[d.state]), h("b", null, d.rule), person(d.recipient, d.recipient_name),
        h("span", { class: "muted" }, d.channel), h("span", { class: "grow" }),
        d.state === "failed" || d.state === "expired" ? retryButton(d) : d.state === "sent" ? recallButton(d) : ""),
      h("dl", { class: "kv" },
        h("dt", null, t("slot")), h("dd", null, when(d.slot)),
        h("dt", null, t("not before")), h("dd", null, when(d.not_before)),
        h("dt", null, d.state === "sent" ? t("sent at") : t("ended")), h("dd", null, when(d.state === "sent" ? d.sent_at : d.ended_at)),
        h("dt", null, t("attempts")), h("dd", null, String(d.attempts ?? 0))),
      failureList(d), clickList(d),
      h("h4", null, t("content")), h("pre", { class: "content" }, messageText(d.payload))))));
}

// retryButton is offered once this node's API can retry (the operator
// controls); until then there is nothing to click.
function retryButton(d) {
  if (!API.retry || !roleAllows("operate")) return "";
  const who = d.recipient_name || d.recipient;
  return actionButton(t("retry"), { "data-retry": d.id }, () => confirmThen(t("retry q", { state: t(d.state), who }), async () => {
    const res = await call("retry", { params: { id: d.id }, body: {} });
    return t("retry ok", { n: (res.retried || []).length });
  }));
}

// recallButton takes a sent message back (WeCom app messages within 24 h);
// the answer says whether it was, or why not.
function recallButton(d) {
  if (!API.recall || !roleAllows("operate")) return "";
  const who = d.recipient_name || d.recipient;
  return actionButton(t("recall"), { "data-recall": d.id }, (ev) => {
    if (ev && ev.stopPropagation) ev.stopPropagation();
    return confirmThen(t("recall q", { who }), async () => {
      const res = await call("recall", { body: { ids: [d.id] } });
      const no = res.not_recallable || [];
      if (no.length) throw new Error(no[0].reason);
      return (res.recalled || []).length ? t("recall ok") : t("recall pending");
    });
  });
}

const taskBadge = { pending: "info", fired: "ok", cancelled: "warn" };

function deliveryCounts(counts) {
  const parts = Object.entries(counts || {}).sort().map(([st, n]) => badge(`${n} ${t(st)}`, deliveryBadge[st]));
  return parts.length ? parts : h("span", { class: "muted" }, "—");
}

function renderTasks(body) {
  S.tasks = body;
  const tasks = body.tasks || [];
  const state = $("t-state").value;
  $("tasks-count").textContent = tasks.length ? t("tasks count", { n: tasks.length, more: body.next ? "+" : "", state: state ? t(state) : t("in all") }) : "";
  if (!tasks.length) {
    fill("tasks", empty(state ? t("no tasks state", { state: t(state) }) : t("no tasks")));
    return;
  }
  fill("tasks", table([
    { label: t("key"), cls: "msg", cell: (x) => h("code", { title: x.data ? "data: " + JSON.stringify(x.data) : null }, x.key) },
    { label: t("rule"), cell: (x) => x.rule },
    { label: t("due"), cell: (x) => when(x.due_at) },
    { label: t("state"), cell: (x) => [badge(t(x.state), taskBadge[x.state]), x.late ? badge(t("late"), "warn") : ""] },
    { label: t("deliveries col"), cell: (x) => deliveryCounts(x.deliveries) },
  ], tasks, (x) => ({ "data-task": x.key })));
}

// renderAudit lists the newest writes the API accepted: who, from where,
// what, on what (admin only; see loadAudit).
function renderAudit(body) {
  const recs = body.records || [];
  $("audit-count").textContent = recs.length ? t("audit count", { n: recs.length, more: body.next_cursor ? "+" : "" }) : "";
  if (!recs.length) {
    fill("audit", empty(t("no audit")));
    return;
  }
  fill("audit", table([
    { label: t("when"), cell: (r) => when(r.at) },
    { label: t("actor"), cell: (r) => [h("b", null, r.actor), " ", h("span", { class: "muted" }, r.role)] },
    { label: t("remote"), cell: (r) => [r.remote, r.via ? h("span", { class: "muted" }, " " + t("via", { node: r.via })) : ""] },
    { label: t("action"), cell: (r) => h("code", null, r.action) },
    { label: t("target"), cls: "msg", cell: (r) => r.target ? h("code", null, r.target) : h("span", { class: "muted" }, "—") },
    { label: t("status"), cell: (r) => String(r.status) },
    { label: t("node"), cell: (r) => r.node },
  ], recs, (r) => ({ "data-audit": String(r.seq) })));
}

// pausedBy says who paused a rule (paused_by: the verified caller, a
// token's name) and, apart, what they typed (note: their own words).
function pausedBy(r) {
  if (!r.paused_by) return "";
  return h("span", { class: "muted" }, t("paused by", { who: r.paused_by }), r.note ? " · " + t("note") + ": " + r.note : "");
}
