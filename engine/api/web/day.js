// Herald dashboard: the day — its statistics table, its pictures, what
// should have fired and did not, what fires next — and the summary tiles.
"use strict";

const STAT_COUNTS = [["runs", "runs_k"], ["late_runs", "late_runs"], ["skipped_runs", "skipped_runs"], ["planned", "planned_k"],
  ["sent", "sent"], ["pending", "pending"], ["failed", "failed"], ["expired", "expired"], ["cancelled", "cancelled"]];
const STAT_BAD = new Set(["skipped_runs", "failed", "expired"]);

const pct = (x) => (x == null ? "—" : (Math.floor(x * 1000) / 10) + "%");

function tile(label, value, cls, title, attrs) {
  return h("div", Object.assign({ class: "tile " + (cls || ""), title }, attrs || {}), h("div", { class: "label" }, label), h("div", { class: "value" }, value));
}

function renderStats(body) {
  const rules = body.rules || [];
  if (!rules.length) {
    fill("stats", empty(body.date === todayInZone() ? t("nothing today") : t("nothing on", { date: body.date })));
    return;
  }
  const tot = body.total || {};
  const p95 = (r) => (r.sent ? secsText(r.slot_to_sent_p95_seconds) : "—");
  fill("stats",
    h("div", { class: "tiles" },
      STAT_COUNTS.map(([k, label]) => tile(t(label), tot[k] ?? 0, tot[k] > 0 && STAT_BAD.has(k) ? "bad" : k === "late_runs" && tot[k] > 0 ? "warn" : "")),
      tile(t("success"), pct(tot.success_rate), tot.success_rate < 1 ? "bad" : "ok"),
      tile(t("avg delay"), tot.sent ? secsText(tot.slot_to_sent_avg_seconds) : "—", "", t("from slot to sent", { p95: p95(tot) }))),
    table([
      { label: t("rule"), cell: (r) => [h("b", null, r.rule), r.missed_count ? [" ", badge(t("missing") + " " + r.missed_count, "bad")] : "",
        r.tasks_due ? [" ", badge(t("tasks due") + " " + r.tasks_due, "info")] : ""] },
      ...STAT_COUNTS.map(([k, label]) => ({ label: t(label), cls: "num", cell: (r) => (r[k] > 0 && STAT_BAD.has(k) ? h("span", { class: "rule-error" }, r[k]) : r[k] ?? 0) })),
      { label: t("success"), cls: "num", cell: (r) => pct(r.success_rate) },
      { label: t("slot to sent"), cls: "num p95", cell: (r) => (r.sent ? secsText(r.slot_to_sent_avg_seconds) : "—") + " / " + p95(r) },
      { label: t("failure reasons"), cls: "msg", cell: (r) => Object.entries(r.failures || {}).sort((a, b) => b[1] - a[1]).map(([why, n]) => h("div", null, `${n} × ${why}`)) },
    ], rules, (r) => ({ "data-rule": r.rule, class: r.missed_count ? "error-row" : null })));
}

// renderDay draws the day: sends per minute, the lateness histogram (all
// rules or one), the slots that should have fired and did not, and the
// next fire times.
function renderDay(body) {
  $("day-zone").textContent = zoneLabel();
  const chart = sendsChart(body, $("sends-chart").clientWidth);
  fill("sends-chart", chart || empty(t("no sends")));
  const pick = $("lat-rule").value;
  addRuleOptions((body.rules || []).map((r) => r.rule));
  const src = pick ? (body.rules || []).find((r) => r.rule === pick) : body.total;
  const lat = src && latencyChart(src.slot_to_sent || {}, $("lateness-chart").clientWidth);
  fill("lateness-chart", lat || empty(t("no lateness")));

  const missed = [];
  let more = 0;
  for (const r of body.rules || []) {
    for (const m of r.missed_slots || []) missed.push({ rule: r.rule, ...m });
    more += (r.missed_count || 0) - (r.missed_slots || []).length;
  }
  fill("missed", missed.length
    ? h("ul", { class: "missed" }, missed.map((m) => h("li", { "data-rule": m.rule, "data-slot": m.slot },
      badge(t(m.state), m.state === "missing" ? "bad" : "warn"), " ", h("b", null, m.rule), " ", when(m.slot),
      m.state === "missing" || m.state === "skipped" ? [" ", fireButtonSlot(m.rule)] : "")),
    more > 0 ? h("li", { class: "muted" }, t("more missed", { n: more })) : "")
    : h("div", { class: "empty ok" }, t("none missed")));

  const up = body.upcoming || [];
  fill("upcoming", up.length ? table([
    { label: t("rule"), cell: (u) => h("b", null, u.rule) },
    { label: t("schedule"), cell: (u) => [h("code", null, u.schedule), " ", h("span", { class: "muted" }, u.timezone)] },
    { label: t("next fires"), cls: "msg", cell: (u) => (u.error ? h("span", { class: "rule-error" }, u.error)
      : h("div", { class: "fires" }, (u.next_fires || []).map((f) => when(f)))) },
  ], up, (u) => ({ "data-rule": u.rule })) : empty(t("no upcoming")));
  renderTiles();
  if (S.status) renderRules(S.status); // fire buttons follow the scheduled rules
}

// fireButtonSlot: a missed slot is fired by hand with the rule's fire
// (now); a backfill of the exact slot is the CLI's rules fire --slot.
function fireButtonSlot(rule) { return fireButton(rule); }

function renderTiles() {
  const st = S.status;
  const tiles = [];
  if (st) {
    tiles.push(tile(t("node"), st.node_id || "?", "", t(st.state || "unknown")));
    tiles.push(tile(t("leader"), st.leader_id || t("no leader"), st.leader_id ? "" : "bad", st.leader_id ? "" : t("no leader title")));
    const rules = st.rules || [];
    const broken = rules.filter((r) => r.error).length;
    tiles.push(tile(t("rules"), broken ? t("rules broken", { b: broken, n: rules.length }) : t("rules ok", { n: rules.length }), broken ? "bad" : "ok"));
    const chans = st.channels || [];
    const sick = chans.filter((c) => !c.healthy).length;
    tiles.push(tile(t("channels"), t("channels healthy", { h: chans.length - sick, n: chans.length }), sick ? "bad" : "ok"));
  }
  if (S.alerts) {
    const open = S.alerts.filter((a) => !a.acked).length;
    tiles.push(tile(t("open alerts"), open, open ? "bad" : "ok", "", { "data-tile": "alerts" }));
  }
  if (S.stats && S.stats.total) {
    const tot = S.stats.total;
    tiles.push(tile(t("today sent"), tot.sent ?? 0, "ok", "", { "data-tile": "sent" }));
    tiles.push(tile(t("today failed"), (tot.failed ?? 0) + (tot.expired ?? 0), tot.failed + tot.expired ? "bad" : "", "", { "data-tile": "failed" }));
    tiles.push(tile(t("today pending"), (tot.pending ?? 0) + (tot.tasks_due ?? 0), "", "", { "data-tile": "pending" }));
    tiles.push(tile(t("p95 today"), tot.sent ? secsText(tot.slot_to_sent_p95_seconds) : "—", "", "", { "data-tile": "p95" }));
    tiles.push(tile(t("missed today"), tot.missed_count ?? 0, tot.missed_count ? "bad" : "ok", "", { "data-tile": "missed" }));
  }
  fill("tiles", ...tiles);
}

function renderLive() {
  const dot = $("live-dot");
  const banner = $("banner");
  const at = S.loadedAt ? clockOf(S.loadedAt) + " " + offsetOf(S.loadedAt) : "";
  if (S.statusError) {
    dot.className = "dot bad";
    $("updated").textContent = at ? t("stale since", { at }) : t("no data");
    banner.textContent = t("not answering") + S.statusError + (at ? t("showing from", { at }) : "");
    banner.hidden = false;
  } else {
    dot.className = "dot ok";
    $("updated").textContent = at ? t("updated", { at }) : t("not yet loaded");
    const warnings = (S.status && S.status.warnings) || [];
    banner.textContent = warnings.join(" · ");
    banner.hidden = warnings.length === 0;
  }
}
