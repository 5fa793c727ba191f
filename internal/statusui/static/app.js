// Switchboard status page: polls /ui/status.json every second and renders
// it with DOM calls only (no innerHTML: every value is text).
"use strict";

const POLL_MS = 1000;
let lastOK = 0;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function badge(text, cls) { return el("span", { class: "badge " + (cls || text) }, text); }

function fixed(n, digits) { return n ? n.toFixed(digits) : "–"; }

function ago(iso, now) {
  const s = Math.max(0, (Date.parse(now) - Date.parse(iso)) / 1000);
  if (s < 60) return Math.round(s) + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  return Math.round(s / 3600) + " h ago";
}

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

// chart draws a destination's history (calls/s and p99 per step, oldest
// first) as two lines in a small inline SVG, each scaled to its own maximum.
function chart(name, history) {
  const W = 180, H = 36, P = 2;
  const pts = history || [];
  const maxRate = Math.max(0, ...pts.map((p) => p.calls_per_s));
  const maxP99 = Math.max(0, ...pts.map((p) => p.p99_ms));
  const line = (key, max, cls) => {
    const coords = pts.map((p, i) => {
      const x = P + (pts.length > 1 ? i * (W - 2 * P) / (pts.length - 1) : 0);
      const y = H - P - (max > 0 ? p[key] / max * (H - 2 * P) : 0);
      return x.toFixed(1) + "," + y.toFixed(1);
    });
    return svg("polyline", { class: cls, points: coords.join(" "), fill: "none" });
  };
  const minutes = Math.round(pts.length * 10 / 60);
  const label = name + ", last " + minutes + " min: calls/s up to " + maxRate.toFixed(1) + ", p99 up to " + maxP99.toFixed(1) + " ms";
  return svg("svg", { class: "chart", "data-chart": name, width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": label },
    svg("title", {}, label), line("calls_per_s", maxRate, "rate"), line("p99_ms", maxP99, "p99"));
}

function renderDestinations(st) {
  const body = document.querySelector("#destinations tbody");
  const rows = st.destinations.map((d) => {
    const state = el("td", {}, badge(d.state));
    if (d.error) state.title = d.error;
    return el("tr", { "data-destination": d.name },
      el("td", {}, d.name), el("td", { class: "muted" }, d.type), state,
      el("td", { class: "num", "data-field": "restarts" }, d.restarts),
      el("td", { class: "num" }, d.sessions), el("td", { class: "num" }, d.in_flight),
      el("td", { class: "num" }, d.calls_per_s ? d.calls_per_s.toFixed(1) : "0"),
      el("td", { class: "num" }, fixed(d.p50_ms, 2)), el("td", { class: "num" }, fixed(d.p99_ms, 2)),
      el("td", { class: "num" }, d.calls), el("td", { class: "num" }, d.errors),
      el("td", { class: "chartcell" }, chart(d.name, d.history)));
  });
  body.replaceChildren(...rows);
}

function renderReload(st) {
  const r = st.last_reload;
  const p = document.getElementById("reload");
  p.replaceChildren(badge(r.ok ? "ok" : "rejected", r.ok ? "ok" : "bad"), " ", ago(r.time, st.now));
  if (r.error) p.append(el("div", { class: "msg" }, r.error));
  document.getElementById("loaded").textContent = "config loaded " + ago(st.config_loaded_at, st.now);
}

function renderErrors(st) {
  const body = document.querySelector("#errors tbody");
  body.replaceChildren(...st.errors.map((e) => el("tr", { "data-count": e.count },
    el("td", { class: "muted" }, new Date(e.time).toLocaleTimeString()),
    el("td", {}, (e.destination || "–") + (e.view ? " via /" + e.view : "")), el("td", {}, e.method || "–"),
    el("td", { class: "num" }, e.status), el("td", { class: "num count" }, "×" + e.count),
    el("td", { class: "msg" }, e.message))));
  document.getElementById("noerrors").hidden = st.errors.length > 0;
}

// prefixes describes a view's naming: its tool_prefix, and the servers
// that set their own ("conflict; github: gh, memory: never").
function prefixes(v) {
  let s = v.tool_prefix || "always";
  const own = Object.entries(v.server_prefixes || {}).sort(([a], [b]) => a.localeCompare(b));
  if (own.length) s += "; " + own.map(([srv, p]) => srv + ": " + p).join(", ");
  return s;
}

function renderViews(st) {
  const box = document.getElementById("views");
  if (!st.views.length) {
    box.replaceChildren(el("p", { class: "muted" }, "no aggregated views"));
    return;
  }
  box.replaceChildren(...st.views.map((v) => {
    const head = el("h3", {}, v.path);
    const info = el("div", { class: "muted" },
      (v.name ? "namespace " + v.name : "default view") + " · servers: " + (v.servers.join(", ") || "none") +
      " · tool_prefix: " + prefixes(v));
    const tools = el("div", { class: "tools" }, ...v.tools.map((t) => el("span", { class: "tool", title: t.server || "" }, t.name)));
    let note;
    if (v.error) note = el("div", { class: "msg" }, badge("error", "bad"), " ", v.error);
    else if (v.source === "") note = el("div", { class: "muted" }, "no tools/list seen yet for this view or its servers");
    else note = el("div", { class: "muted note" }, v.tools.length + " tools, " +
      (v.source === "listed" ? "as this view last listed them to a client" : "derived from its servers' last tools/list answers"));
    return el("div", { class: "view", "data-view": v.path }, head, info, tools, note);
  }));
}

// approve records one tool's (or the instructions') pin as the page
// showed it: a same-origin JSON POST, allowed to admins only.
async function approve(dest, tool, digest, button) {
  button.disabled = true;
  const resp = await fetch("/ui/pins/approve", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ destination: dest, tool: tool, digest: digest }),
  });
  if (!resp.ok) {
    button.disabled = false;
    button.title = await resp.text();
    button.textContent = "approve (failed: " + resp.status + ")";
  }
}

function pinItem(st, dest, name, status, digest, diff) {
  const item = el("div", { class: "pin", "data-pin": dest + "/" + name }, el("strong", {}, name), " ", badge(status, "bad"));
  if (st.admin && digest && status !== "removed") {
    const b = el("button", { type: "button", "data-approve": dest + "/" + name }, "approve");
    b.addEventListener("click", () => approve(dest, name, digest, b));
    item.append(" ", b);
  }
  if (diff) item.append(el("pre", { class: "diff" }, diff));
  return item;
}

function renderPins(st) {
  const pins = st.pins || [];
  document.getElementById("pinsection").hidden = pins.length === 0;
  document.getElementById("pins").replaceChildren(...pins.map((p) => {
    const items = p.tools.map((t) => pinItem(st, p.destination, t.name, t.status, t.digest, t.diff));
    if (p.instructions) items.push(pinItem(st, p.destination, "instructions", p.instructions, p.instructions_digest, p.instructions_diff));
    let note = "";
    if (!p.listed) note = el("div", { class: "muted" }, "no tools/list has passed yet");
    else if (!items.length) note = el("div", { class: "muted" }, "every tool approved");
    return el("div", { class: "view", "data-pins": p.destination }, el("h3", {}, p.destination, " ", badge(p.mode, "muted")), note, ...items);
  }));
}

function render(st) {
  document.getElementById("version").textContent = st.version;
  renderDestinations(st);
  renderReload(st);
  renderErrors(st);
  renderViews(st);
  renderPins(st);
}

function setLive(state, text) {
  const live = document.getElementById("live");
  live.dataset.state = state;
  live.textContent = text;
}

async function poll() {
  try {
    const resp = await fetch("/ui/status.json", { cache: "no-store" });
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    render(await resp.json());
    lastOK = Date.now();
    setLive("live", "live");
  } catch (err) {
    setLive("down", "disconnected" + (lastOK ? " (last update " + Math.round((Date.now() - lastOK) / 1000) + " s ago)" : ""));
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

poll();
