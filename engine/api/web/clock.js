// Herald dashboard: times. Every time is shown in one zone — the
// cluster's display_timezone, or the operator's pick kept in this browser
// — and says which (its UTC offset beside it, the zone in the header and
// the footer), never silently in the browser's own zone: a headless
// browser runs in UTC, an operator's laptop may be anywhere.
"use strict";

const ZONE_KEY = "herald.tz";
const DEFAULT_ZONE = "Asia/Shanghai";
const ZONES = ["Asia/Shanghai", "Asia/Hong_Kong", "Asia/Taipei", "Asia/Singapore", "Asia/Tokyo", "Europe/London", "Europe/Berlin",
  "America/New_York", "America/Los_Angeles", "UTC"];

const clock = {
  cluster: "", // display_timezone from /v1/status, when the node gives one
  // skew is the node's clock less this browser's, in ms, from /v1/status's
  // "now": "today" is the cluster's day, not the browser's (whose clock may
  // be off, and whose day is not the one the node counts).
  skew: 0,
  synced: false,
  chosen: (() => { try { return localStorage.getItem(ZONE_KEY) || ""; } catch (_) { return ""; } })(),
  fmt: new Map(),
};

function validZone(z) {
  try { new Intl.DateTimeFormat("en", { timeZone: z }); return true; } catch (_) { return false; }
}

// zoneName is the zone times are shown in.
function zoneName() {
  for (const z of [clock.chosen, clock.cluster]) if (z && validZone(z)) return z;
  return DEFAULT_ZONE;
}

function chooseZone(z) {
  clock.chosen = z;
  try { if (z) localStorage.setItem(ZONE_KEY, z); else localStorage.removeItem(ZONE_KEY); } catch (_) { /* this page only */ }
}

// parts splits d into its calendar fields in the display zone.
function parts(d) {
  const z = zoneName();
  let f = clock.fmt.get(z);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", { timeZone: z, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit" });
    clock.fmt.set(z, f);
  }
  const o = {};
  for (const p of f.formatToParts(d)) o[p.type] = p.value;
  // The offset is computed rather than read from the formatter: "GMT+8"
  // and "UTC+08:00" vary by browser version.
  const asUTC = Date.UTC(+o.year, +o.month - 1, +o.day, +o.hour % 24, +o.minute, +o.second);
  const off = Math.round((asUTC - Math.floor(d.getTime() / 1000) * 1000) / 60000);
  const sign = off < 0 ? "-" : "+";
  const a = Math.abs(off);
  o.offset = sign + String(Math.floor(a / 60)).padStart(2, "0") + ":" + String(a % 60).padStart(2, "0");
  return o;
}

// Dates read the same in every locale (2026-12-01): 12/01 is a different
// day in the US and in China.
const dateOf = (d) => { const p = parts(d); return `${p.year}-${p.month}-${p.day}`; };
const clockOf = (d) => { const p = parts(d); return `${p.hour}:${p.minute}:${p.second}`; };
const hmOf = (d) => { const p = parts(d); return `${p.hour}:${p.minute}`; };
const offsetOf = (d) => parts(d).offset;

// clusterNow is the node's clock as of the last /v1/status.
function clusterNow() { return new Date(Date.now() + clock.skew); }

// syncClock takes the node's "now" (RFC 3339) from a status answer; it
// reports whether this was the first one.
function syncClock(now) {
  const at = Date.parse(now || "");
  if (Number.isNaN(at)) return false;
  clock.skew = at - Date.now();
  const first = !clock.synced;
  clock.synced = true;
  return first;
}

// zoneLabel names the zone with its offset now: "Asia/Shanghai (UTC+08:00)".
function zoneLabel() { return `${zoneName()} (UTC${offsetOf(clusterNow())})`; }

// stamp is a full time with its offset: "2026-12-01 09:00:00 +08:00".
function stamp(d) { const p = parts(d); return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second} ${p.offset}`; }

// todayInZone is the cluster's today in the display zone.
function todayInZone() { return dateOf(clusterNow()); }

// isZero: Go's zero time, which the API writes for "never".
const isZero = (s) => !s || s.startsWith("0001-01-01");
