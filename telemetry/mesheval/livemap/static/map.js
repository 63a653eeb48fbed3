// meshsub live map: rebuilds the mesh at the slider's time from the telemetry records
// the server keeps (GET /api/events?after=N). Plain JS and SVG; nothing is fetched from
// anywhere but this server, except tiles from the URL template the user configured.
"use strict";
const SVGNS = "http://www.w3.org/2000/svg";
const LINK_WINDOW_S = 10;   // link quality: frames received over the link in the last 10 s
const ANIM_WINDOW_S = 5;    // deliveries of the last 5 s are drawn along their path
const MAX_RECORDS = 200000; // the page keeps no more than the server's default window

const state = { info: {}, records: [], after: 0, t0: null, selected: null, bbox: null };

function el(name, attrs, parent) {
  const node = document.createElementNS(SVGNS, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

async function poll() {
  let unsorted = false;
  try {
    for (;;) {
      const resp = await fetch(`/api/events?after=${state.after}`);
      if (!resp.ok) break;
      const doc = await resp.json();
      for (const r of doc.events) {
        const last = state.records[state.records.length - 1];
        if (last && r.ts_ns < last.ts_ns) unsorted = true;
        state.records.push(r);
        if (state.t0 === null || r.ts_ns < state.t0) state.t0 = r.ts_ns;
      }
      state.after = doc.last;
      if (doc.events.length < 20000) break;
    }
    // live records arrive per device feed, a batch a second each: the mesh at time t
    // reads them in time order (a stable sort; nearly sorted input costs about n)
    if (unsorted) state.records.sort((a, b) => a.ts_ns - b.ts_ns);
    if (state.records.length > MAX_RECORDS) state.records.splice(0, state.records.length - MAX_RECORDS);
    const info = await (await fetch("/api/info")).json();
    state.info = info;
    const w = info.window;
    document.getElementById("window").textContent =
      `window ${w.entries} records (${w.evicted} evicted, ${w.malformed} malformed)`;
  } catch (e) {
    document.getElementById("mode").textContent = "server unreachable";
  }
  const slider = document.getElementById("slider");
  const tmax = state.records.length ? (state.records[state.records.length - 1].ts_ns - state.t0) / 1e9 : 0;
  slider.max = tmax.toFixed(1);
  if (document.getElementById("follow").checked) slider.value = slider.max;
  render();
  if (state.info.mode === "live") setTimeout(poll, 1000);
}

// ----------------------------------------------------------------- the mesh at time t
function meshAt(tNs) {
  const nodes = new Map();   // id -> {x, y, posTs, lastTs, published, delivered, rx, drops, counters}
  const links = new Map();   // "a-b" (a < b) -> {a, b, up, frames}
  const rxFirst = new Map(); // event_id -> Map(node -> peer): who a node first got it from
  const published = new Map(); // event_id -> {node, ts, topic}
  const deliveries = [];
  const node = (id) => {
    let n = nodes.get(id);
    if (!n) { n = { id, x: null, y: null, posTs: null, lastTs: null, published: 0, delivered: 0,
                    rx: 0, drops: 0, counters: {}, subs: [] }; nodes.set(id, n); }
    return n;
  };
  const link = (a, b) => {
    const key = a < b ? `${a}-${b}` : `${b}-${a}`;
    let l = links.get(key);
    if (!l) { l = { a: Math.min(a, b), b: Math.max(a, b), up: false, frames: 0 }; links.set(key, l); }
    return l;
  };
  for (const r of state.records) {
    if (r.ts_ns > tNs) break;
    const n = node(r.node);
    n.lastTs = r.ts_ns;
    switch (r.event) {
      case "position": n.x = r.x; n.y = r.y; n.posTs = r.ts_ns; break;
      case "neighbor_up": node(r.peer); link(r.node, r.peer).up = true; break;
      case "neighbor_down": link(r.node, r.peer).up = false; break;
      case "publish": n.published++; published.set(r.event_id, { node: r.node, ts: r.ts_ns, topic: r.topic }); break;
      case "subscribe": n.subs.push(r.topic); break;
      case "rx":
        n.rx++;
        if (r.peer !== undefined) {
          if (tNs - r.ts_ns <= LINK_WINDOW_S * 1e9) link(r.node, r.peer).frames++;
          if (r.event_id) {
            let m = rxFirst.get(r.event_id);
            if (!m) { m = new Map(); rxFirst.set(r.event_id, m); }
            if (!m.has(r.node)) m.set(r.node, r.peer);
          }
        }
        break;
      case "deliver": n.delivered++; deliveries.push(r); break;
      case "drop": n.drops += r.count || 1; break;
      case "counter": n.counters[r.reason] = r.bytes; break;
    }
  }
  return { nodes, links, rxFirst, published, deliveries };
}

// The path a delivery took: back from the subscriber, each node to the neighbour it
// first received the event from, until the publisher (docs/operations.md "Live map").
function pathOf(mesh, d) {
  const path = [d.node];
  const firsts = mesh.rxFirst.get(d.event_id);
  const origin = mesh.published.get(d.event_id);
  let at = d.node;
  while (firsts && firsts.has(at) && path.length < 64) {
    at = firsts.get(at);
    if (path.includes(at)) break;
    path.push(at);
    if (origin && at === origin.node) break;
  }
  return path.reverse();
}

// ------------------------------------------------------------------------- drawing
function project(x, y) { return [x, -y]; } // local metres, north up

function updateBBox(mesh) {
  let [x0, y0, x1, y1] = [Infinity, Infinity, -Infinity, -Infinity];
  for (const r of state.records) {
    if (r.event !== "position") continue;
    const [px, py] = project(r.x, r.y);
    x0 = Math.min(x0, px); y0 = Math.min(y0, py); x1 = Math.max(x1, px); y1 = Math.max(y1, py);
  }
  if (!isFinite(x0)) { x0 = -100; y0 = -100; x1 = 100; y1 = 100; }
  const pad = Math.max(20, 0.08 * Math.max(x1 - x0, y1 - y0));
  state.bbox = [x0 - pad, y0 - pad, x1 - x0 + 2 * pad, y1 - y0 + 2 * pad];
}

function render() {
  const slider = document.getElementById("slider");
  const t = Number(slider.value);
  const tNs = (state.t0 || 0) + t * 1e9;
  document.getElementById("clock").textContent = `t = ${t.toFixed(1)} s`;
  const info = state.info;
  document.getElementById("source").textContent =
    `${info.run || ""} ${info.protocol || ""} ${info.source || ""}`.trim();
  document.getElementById("mode").textContent = info.mode === "live" ? "live" : "replay";
  const mesh = meshAt(tNs);
  updateBBox(mesh);
  const svg = document.getElementById("map");
  svg.setAttribute("viewBox", state.bbox.join(" "));
  const unit = state.bbox[2] / 800; // about one pixel in metres
  drawTiles(unit);
  const links = document.getElementById("links"); links.replaceChildren();
  const paths = document.getElementById("paths"); paths.replaceChildren();
  const devices = document.getElementById("devices"); devices.replaceChildren();
  const pos = (id) => { const n = mesh.nodes.get(id); return n && n.x !== null ? project(n.x, n.y) : null; };
  let upLinks = 0;
  for (const l of mesh.links.values()) {
    if (!l.up) continue;
    const pa = pos(l.a), pb = pos(l.b);
    if (!pa || !pb) continue;
    upLinks++;
    const q = Math.min(1, l.frames / 20); // 20 frames in 10 s: full quality colour
    const line = el("line", { x1: pa[0], y1: pa[1], x2: pb[0], y2: pb[1], class: "link",
      "data-a": l.a, "data-b": l.b, "data-frames": l.frames,
      stroke: `hsl(${Math.round(120 * q)}, 70%, 40%)`, "stroke-width": 1.5 + 3 * q,
      "stroke-opacity": 0.35 + 0.5 * q }, links);
    el("title", {}, line).textContent = `link ${l.a}-${l.b}: ${l.frames} frames received in the last ${LINK_WINDOW_S} s`;
  }
  let anims = 0;
  for (const d of mesh.deliveries) {
    if (tNs - d.ts_ns > ANIM_WINDOW_S * 1e9) continue;
    const hops = pathOf(mesh, d).map(pos);
    if (hops.some((p) => !p)) continue;
    const origin = mesh.published.get(d.event_id);
    const dpath = hops.map((p, i) => `${i ? "L" : "M"}${p[0]},${p[1]}`).join(" ");
    const g = el("g", { class: "delivery", "data-event": d.event_id, "data-node": d.node,
                        "data-path": pathOf(mesh, d).join(" ") }, paths);
    el("path", { d: dpath, class: "delivery-path" }, g);
    if (hops.length > 1) {
      const dot = el("circle", { r: 5 * unit, class: "delivery-dot" }, g);
      el("animateMotion", { dur: `${0.6 * hops.length}s`, repeatCount: "indefinite", path: dpath }, dot);
    } else {
      el("circle", { cx: hops[0][0], cy: hops[0][1], r: 14 * unit, class: "publish-ring" }, g);
    }
    el("title", {}, g).textContent =
      `${d.event_id} ${d.topic || (origin && origin.topic) || ""} delivered to ${d.node} in ${d.hop} hops`;
    anims++;
  }
  let shown = 0;
  for (const n of mesh.nodes.values()) {
    const p = pos(n.id);
    if (!p) continue;
    shown++;
    const g = el("g", { class: `device ${n.posTs !== null ? "fix" : "nofix"}${state.selected === n.id ? " selected" : ""}`,
                        "data-node": n.id, "data-x": n.x, "data-y": n.y }, devices);
    el("circle", { cx: p[0], cy: p[1], r: 8 * unit }, g);
    const label = el("text", { x: p[0] + 10 * unit, y: p[1] - 10 * unit, "font-size": 12 * unit }, g);
    label.textContent = String(n.id);
  }
  document.getElementById("summary").textContent =
    `${shown} devices, ${upLinks} links, ${anims} deliveries in the last ${ANIM_WINDOW_S} s`;
  showStatus(mesh, tNs);
}

function showStatus(mesh, tNs) {
  const panel = document.getElementById("panel");
  const n = state.selected === null ? null : mesh.nodes.get(state.selected);
  if (!n) return;
  const age = (ts) => ts === null ? "-" : `${((tNs - ts) / 1e9).toFixed(1)} s ago`;
  const neighbours = [...mesh.links.values()].filter((l) => l.up && (l.a === n.id || l.b === n.id))
    .map((l) => (l.a === n.id ? l.b : l.a)).sort((a, b) => a - b);
  const rows = [
    ["device", n.id],
    ["fix", n.posTs === null ? "no position" : `position (${n.x.toFixed(1)}, ${n.y.toFixed(1)}) m, updated ${age(n.posTs)}`],
    ["neighbours", neighbours.length ? neighbours.join(", ") : "none"],
    ["published", n.published], ["delivered", n.delivered], ["received", n.rx], ["drops", n.drops],
    ["subscriptions", n.subs.length ? n.subs.join(", ") : "none"],
    ["last record", age(n.lastTs)],
    ...Object.entries(n.counters).map(([k, v]) => [k, v]),
  ];
  const table = document.createElement("table");
  table.id = "status-table";
  for (const [k, v] of rows) {
    const tr = table.insertRow();
    tr.insertCell().textContent = k;
    tr.insertCell().textContent = String(v);
  }
  const h = document.createElement("h3"); h.textContent = `Device ${n.id}`;
  panel.replaceChildren(h, table);
}

// ---------------------------------------------------------- tiles (latitude/longitude)
const R = 6378137;
function toLocal(lat, lon) { // equirectangular about the origin: the metres the scenario uses
  const lat0 = state.info.origin_lat, lon0 = state.info.origin_lon;
  return [(lon - lon0) * Math.PI / 180 * R * Math.cos(lat0 * Math.PI / 180), (lat - lat0) * Math.PI / 180 * R];
}
function tileLon(x, z) { return x / 2 ** z * 360 - 180; }
function tileLat(y, z) { const n = Math.PI - 2 * Math.PI * y / 2 ** z; return 180 / Math.PI * Math.atan(Math.sinh(n)); }
function drawTiles(unit) {
  const g = document.getElementById("tiles"); g.replaceChildren();
  const info = state.info;
  if (!info.tiles || info.origin_lat === undefined) return;
  const [bx, by, bw, bh] = state.bbox;
  const lat0 = info.origin_lat * Math.PI / 180;
  // zoom at which one 256-px tile spans about 256 screen pixels
  const z = Math.max(0, Math.min(19, Math.round(Math.log2(2 * Math.PI * R * Math.cos(lat0) / (256 * unit)) - 8)));
  const lonAt = (mx) => info.origin_lon + mx / (R * Math.cos(lat0)) * 180 / Math.PI;
  const latAt = (my) => info.origin_lat + my / R * 180 / Math.PI;
  const tx = (lon) => Math.floor((lon + 180) / 360 * 2 ** z);
  const ty = (lat) => { const r = lat * Math.PI / 180; return Math.floor((1 - Math.log(Math.tan(r) + 1 / Math.cos(r)) / Math.PI) / 2 * 2 ** z); };
  const [xa, xb] = [tx(lonAt(bx)), tx(lonAt(bx + bw))];
  const [ya, yb] = [ty(latAt(-by)), ty(latAt(-(by + bh)))];
  for (let x = xa; x <= xb && x - xa < 16; x++) {
    for (let y = ya; y <= yb && y - ya < 16; y++) {
      const [x0, y0] = toLocal(tileLat(y, z), tileLon(x, z));
      const [x1, y1] = toLocal(tileLat(y + 1, z), tileLon(x + 1, z));
      const [px, py] = project(x0, y0), [qx, qy] = project(x1, y1);
      el("image", { href: info.tiles.replace("{z}", z).replace("{x}", x).replace("{y}", y),
        x: px, y: py, width: qx - px, height: qy - py, preserveAspectRatio: "none", class: "tile" }, g);
    }
  }
}

// one listener on the group: live mode redraws the devices every second
document.getElementById("devices").addEventListener("click", (ev) => {
  const g = ev.target.closest(".device");
  if (g) { state.selected = Number(g.dataset.node); render(); }
});
document.getElementById("slider").addEventListener("input", () => {
  document.getElementById("follow").checked = false; render();
});
document.getElementById("follow").addEventListener("change", () => poll());
poll();
