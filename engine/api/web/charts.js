// Herald dashboard: the day in pictures, hand-drawn SVG (no library, no
// CDN). Charts scale with their box (viewBox), so the same drawing serves
// a phone and a wall screen.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const PALETTE = ["#2456c8", "#1d8a4e", "#8e44ad", "#d68910", "#138d90", "#5d6d7e", "#a04000", "#2e86c1", "#7d3c98", "#117a65"];
const FAIL = "#d32f2f";

function svg(tag, attrs, ...kids) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v != null) el.setAttribute(k, v);
  for (const kid of kids.flat(Infinity)) if (kid != null && kid !== false) el.append(kid instanceof Node ? kid : String(kid));
  return el;
}

function ruleColor(rules, name) { return PALETTE[Math.max(rules.indexOf(name), 0) % PALETTE.length]; }

// niceStep picks a tick step (1, 2, 5 × 10^n) giving about n ticks.
function niceStep(max, n) {
  const raw = Math.max(max / n, 1);
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

// chartWidth draws at the box's own width, so that text is its CSS size
// on a phone and on a wall.
const chartWidth = (w) => Math.max(Math.round(w || 1000), 320);

const MINUTE_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 180, 360];

// sendsChart stacks each minute's sends by rule, failures (failed and
// expired) on top in red. The x axis spans the minutes that have data
// (at least an hour), in the display zone.
function sendsChart(stats, width) {
  const rules = (stats.rules || []).map((r) => r.rule).sort();
  const byMinute = new Map();
  let total = 0;
  for (const r of stats.rules || []) {
    for (const m of r.minutes || []) {
      const at = Math.floor(Date.parse(m.at) / 60000);
      if (!byMinute.has(at)) byMinute.set(at, { sent: {}, fail: 0, failBy: {} });
      const e = byMinute.get(at);
      e.sent[r.rule] = (e.sent[r.rule] || 0) + m.sent;
      const f = (m.failed || 0) + (m.expired || 0);
      e.fail += f;
      if (f) e.failBy[r.rule] = f;
      total += m.sent + f;
    }
  }
  if (!byMinute.size) return null;
  const mins = [...byMinute.keys()].sort((a, b) => a - b);
  let m0 = mins[0] - 5, m1 = mins[mins.length - 1] + 5;
  if (m1 - m0 < 60) { const pad = (60 - (m1 - m0)) / 2; m0 = Math.floor(m0 - pad); m1 = Math.ceil(m1 + pad); }
  const span = m1 - m0 + 1;
  const W = chartWidth(width), H = 240, L = 48, R = 10, T = 12, B = 30;
  const pw = W - L - R, ph = H - T - B;
  let ymax = 1;
  for (const e of byMinute.values()) ymax = Math.max(ymax, Object.values(e.sent).reduce((a, b) => a + b, 0) + e.fail);
  const ystep = niceStep(ymax, 4);
  ymax = Math.ceil(ymax / ystep) * ystep;
  const x = (m) => L + ((m - m0) / span) * pw;
  const y = (v) => T + ph - (v / ymax) * ph;
  const bw = Math.max(pw / span - (span < 200 ? 1 : 0), 0.8);
  const g = svg("g");
  for (let v = 0; v <= ymax; v += ystep) {
    g.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }),
      svg("text", { x: L - 6, y: y(v) + 4, class: "tick", "text-anchor": "end" }, String(v)));
  }
  const maxTicks = Math.max(Math.floor(pw / 70), 3);
  const step = MINUTE_STEPS.find((s) => span / s <= maxTicks) || 720;
  for (let m = Math.ceil(m0 / step) * step; m <= m1; m += step) {
    g.append(svg("text", { x: x(m) + bw / 2, y: H - 10, class: "tick", "text-anchor": "middle" }, hmOf(new Date(m * 60000))));
  }
  for (const [m, e] of byMinute) {
    let acc = 0;
    const when = stamp(new Date(m * 60000)).slice(0, 16) + " " + offsetOf(new Date(m * 60000));
    const lines = [when];
    for (const rule of rules) {
      const n = e.sent[rule] || 0;
      if (!n) continue;
      lines.push(`${rule}: ${n} ${t("sent")}` + (e.failBy[rule] ? `, ${e.failBy[rule]} ${t("failed")}` : ""));
      g.append(svg("rect", { x: x(m), y: y(acc + n), width: bw, height: y(acc) - y(acc + n), fill: ruleColor(rules, rule), "data-rule": rule }));
      acc += n;
    }
    if (e.fail) {
      for (const [rule, f] of Object.entries(e.failBy)) if (!e.sent[rule]) lines.push(`${rule}: ${f} ${t("failed")}`);
      g.append(svg("rect", { x: x(m), y: y(acc + e.fail), width: bw, height: y(acc) - y(acc + e.fail), fill: FAIL, class: "fail" }));
    }
    g.append(svg("rect", { x: x(m), y: T, width: Math.max(bw, 3), height: ph, class: "hit" }, svg("title", null, lines.join("\n"))));
  }
  g.append(svg("line", { x1: L, x2: W - R, y1: y(0), y2: y(0), class: "axis" }));
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart sends", role: "img", "data-total": String(total),
    "aria-label": t("sends per minute") }, g);
  const legend = h("div", { class: "legend" },
    rules.filter((r) => (stats.rules.find((x) => x.rule === r).minutes || []).length).map((r) =>
      h("span", null, h("i", { style: "background:" + ruleColor(rules, r) }), r)),
    h("span", null, h("i", { class: "fail" }), t("failures red")),
    h("span", { class: "muted" }, t("chart axis", { zone: zoneLabel() })));
  return h("div", { class: "chart-box" }, chart, legend);
}

const secsText = (x) => (x == null ? "—" : x < 0.001 ? (x * 1e6).toFixed(0) + " µs" : x < 1 ? (x * 1000).toFixed(x < 0.01 ? 2 : 0) + " ms"
  : x < 60 ? x.toFixed(x < 10 ? 2 : 1) + " s" : x < 3600 ? (x / 60).toFixed(1) + " min" : (x / 3600).toFixed(1) + " h");

function bucketLabel(b) {
  if (b.to_seconds == null) return "≥ " + secsText(b.from_seconds);
  if (!b.from_seconds) return "< " + secsText(b.to_seconds);
  return secsText(b.from_seconds) + "–" + secsText(b.to_seconds);
}

// axisLabel is a bar's short name under the axis (its upper bound); the
// tooltip has the full range.
function axisLabel(b) { return b.to_seconds == null ? "≥ " + secsText(b.from_seconds) : "< " + secsText(b.to_seconds); }

// latencyChart draws a Durations histogram (slot → sent) with its true
// percentiles written beside it.
function latencyChart(d, width) {
  const bars = (d.histogram || []);
  if (!d.count || !bars.length) return null;
  // Trim empty bars at both ends: a healthy day is all in the first few.
  let lo = bars.findIndex((b) => b.count > 0), hi = bars.length - 1;
  while (hi > lo && !bars[hi].count) hi--;
  const shown = bars.slice(Math.max(lo - 1, 0), Math.min(hi + 2, bars.length));
  const W = chartWidth(width), H = 200, L = 48, R = 10, T = 12, B = 34;
  const pw = W - L - R, ph = H - T - B;
  const ymaxRaw = Math.max(...shown.map((b) => b.count), 1);
  const ystep = niceStep(ymaxRaw, 4);
  const ymax = Math.ceil(ymaxRaw / ystep) * ystep;
  const bw = pw / shown.length;
  const y = (v) => T + ph - (v / ymax) * ph;
  const g = svg("g");
  for (let v = 0; v <= ymax; v += ystep) {
    g.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }),
      svg("text", { x: L - 6, y: y(v) + 4, class: "tick", "text-anchor": "end" }, String(v)));
  }
  shown.forEach((b, i) => {
    const x = L + i * bw;
    g.append(svg("rect", { x: x + 2, y: y(b.count), width: bw - 4, height: y(0) - y(b.count), class: "bar" },
      svg("title", null, `${bucketLabel(b)}: ${b.count}`)),
    bw >= 56 || i % Math.ceil(56 / bw) === 0 ? svg("text", { x: x + bw / 2, y: H - 12, class: "tick", "text-anchor": "middle" }, axisLabel(b)) : null);
  });
  g.append(svg("line", { x1: L, x2: W - R, y1: y(0), y2: y(0), class: "axis" }));
  const q = (k) => h("span", { class: "q", "data-q": k }, h("b", null, t(k)), " ", secsText(d[k + "_seconds"]));
  return h("div", { class: "chart-box" },
    h("div", { class: "quantiles" }, q("p50"), q("p90"), q("p95"), q("p99"), h("span", { class: "q", "data-q": "max" }, h("b", null, t("max")), " ", secsText(d.max_seconds)),
      h("span", { class: "muted" }, d.precise ? t("precise", { pct: (d.precision * 100).toFixed(1) + "%" }) : t("estimated"))),
    svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart lateness", role: "img", "aria-label": t("lateness") }, g));
}
