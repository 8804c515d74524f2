// The operator's dashboard page: one self-contained HTML document (inline CSS and JS, no external
// asset, no build step) that polls GET /dashboard/state every POLL_MS and draws, per node: the
// pool as a grid (one cell per page, coloured by state, the owning tenant as hue, epoch and owner
// on hover, a flash when a page changes owner or epoch), transfers in flight, quarantined pages
// and why, its cache tiers (pool, disk, peer: pages, hits, misses, refused loads by reason), totals,
// requests by outcome, speculation (drafted, accepted, acceptance, rolled back, a draft model's
// pool), `tessera plan`'s lines, and four small live charts
// (step time, batch size, tokens/s, queue depth) from the differences of the loop's counters.
// On the router it draws every worker it knows and the pairs in flight.
// Must never: load anything from elsewhere, or put the admin key anywhere but the requests it sends.
// The script is plain ES2020 in a string: no template literals inside (this file's own are
// String.raw), so nothing in it is interpolated.
export const DASHBOARD_HTML = String.raw`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Tessera · page map</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<style>
:root{--bg:#0f1217;--card:#171b22;--line:#262c36;--text:#d8dee9;--dim:#8a94a6;--free:#232833;--q:#ff4d5e;--accent:#7cc4ff}
*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--text);font:13px/1.4 ui-sans-serif,system-ui,-apple-system,"Segoe UI",sans-serif}
header{display:flex;align-items:center;gap:14px;padding:12px 20px;border-bottom:1px solid var(--line);background:#12161c;position:sticky;top:0;z-index:2}
header h1{font-size:16px;margin:0;font-weight:650;letter-spacing:.2px}header h1 b{color:var(--accent)}
#live{width:9px;height:9px;border-radius:50%;background:#555;display:inline-block}#live.on{background:#3ddc84;box-shadow:0 0 8px #3ddc84}
#where,#when{color:var(--dim)}#when{margin-left:auto;font-variant-numeric:tabular-nums}
main{padding:16px 20px;display:flex;flex-direction:column;gap:16px}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:14px 16px}
.card h2{margin:0 0 10px;font-size:14px;font-weight:600;display:flex;gap:10px;align-items:baseline;flex-wrap:wrap}
.role{text-transform:uppercase;font-size:11px;letter-spacing:1px;padding:2px 7px;border-radius:4px;background:#263042;color:var(--accent)}
.role.prefill{background:#2d2540;color:#c3a6ff}.role.decode{background:#1f3a31;color:#6fe3b0}.role.router{background:#3b3020;color:#ffc46b}
.dim{color:var(--dim);font-weight:400}
.counts{display:flex;gap:14px;margin:0 0 10px;flex-wrap:wrap}.counts span{display:flex;align-items:center;gap:6px}
.sw{width:11px;height:11px;border-radius:2px;display:inline-block}
.grid{display:grid;grid-template-columns:repeat(auto-fill,13px);gap:2px;margin-bottom:12px}
.cell{width:13px;height:13px;border-radius:2px;background:var(--free)}
.cell.s-c{opacity:.55}.cell.s-q{background:repeating-linear-gradient(45deg,var(--q) 0 3px,#7a1520 3px 6px)!important}
.cell.flash{animation:flash .9s ease-out}
@keyframes flash{0%{box-shadow:0 0 0 2px #fff,0 0 10px #fff;transform:scale(1.35)}100%{box-shadow:0 0 0 0 transparent;transform:scale(1)}}
.row{display:grid;grid-template-columns:minmax(0,1.2fr) minmax(0,1.2fr) minmax(0,1fr) minmax(0,1.6fr);gap:16px}
.row.cluster{grid-template-columns:minmax(0,2.3fr) minmax(0,1.3fr) minmax(0,1.2fr)}
.panel,.stack{min-width:0;overflow-x:auto}
.panel h3{margin:0 0 6px;font-size:11px;text-transform:uppercase;letter-spacing:1px;color:var(--dim);font-weight:600}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}td,th{padding:3px 6px;border-bottom:1px solid var(--line);text-align:left;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;max-width:220px}
th{color:var(--dim);font-weight:500}.none{color:var(--dim);font-style:italic}
pre{margin:0;font:10.5px/1.45 ui-monospace,SFMono-Regular,Menlo,monospace;color:#b9c3d3;white-space:pre-wrap;background:#12161c;border:1px solid var(--line);border-radius:6px;padding:6px 8px}
.charts{display:grid;grid-template-columns:repeat(4,minmax(150px,1fr));gap:10px;margin-bottom:12px}
.chart{background:#12161c;border:1px solid var(--line);border-radius:8px;padding:6px 8px}
.chart .t{display:flex;justify-content:space-between;color:var(--dim);font-size:11px}.chart .v{color:var(--text);font-weight:600;font-variant-numeric:tabular-nums}
.chart svg{display:block;width:100%;height:42px}
.legend{display:flex;gap:12px;flex-wrap:wrap;color:var(--dim);font-size:12px}
.bar{height:6px;background:#263042;border-radius:3px;overflow:hidden;min-width:60px}.bar i{display:block;height:100%;background:var(--accent)}
#tip{position:fixed;pointer-events:none;background:#0b0d11;border:1px solid #3a4352;border-radius:6px;padding:6px 8px;font-size:12px;display:none;z-index:5;box-shadow:0 4px 14px #0008}
#err{color:#ff8a8a}
</style></head><body>
<header><span id="live"></span><h1><b>Tessera</b> page map</h1><span id="where"></span><span id="err"></span><span id="when"></span></header>
<main id="main"></main><div id="tip"></div>
<script>
"use strict";
(function () {
  var POLL_MS = 500, HISTORY = 120;
  var key = new URLSearchParams(location.search).get("key");
  var headers = key === null ? {} : { authorization: "Bearer " + key };
  var LETTERS = { f: "free", a: "allocated", c: "cached", q: "quarantined" };
  var nodes = new Map();
  var main = document.getElementById("main"), tip = document.getElementById("tip");

  function el(tag, cls, text) { var e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; }
  function hueOf(tenant) { var h = 2166136261; for (var i = 0; i < tenant.length; i++) { h ^= tenant.charCodeAt(i); h = Math.imul(h, 16777619); } return ((h >>> 0) % 360); }
  function tenantColour(tenant, light) { return "hsl(" + hueOf(tenant) + ", 72%, " + (light ? 62 : 52) + "%)"; }
  function bytes(n) { var u = ["B", "KiB", "MiB", "GiB"], i = 0; while (n >= 1024 && i < 3) { n /= 1024; i++; } return (i === 0 ? n : n.toFixed(1)) + " " + u[i]; }
  function fmt(v) { return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2); }

  function table(parent, cols, rows, empty) {
    if (rows.length === 0) { parent.appendChild(el("div", "none", empty)); return; }
    var t = el("table"), head = el("tr");
    cols.forEach(function (c) { head.appendChild(el("th", "", c)); });
    t.appendChild(head);
    rows.forEach(function (r) { var tr = el("tr"); r.forEach(function (v) { var td = el("td"); if (v instanceof Node) td.appendChild(v); else td.textContent = String(v); td.title = td.textContent; tr.appendChild(td); }); t.appendChild(tr); });
    parent.appendChild(t);
  }

  function refusedText(r) {
    var k = Object.keys(r).filter(function (x) { return r[x] > 0; });
    return k.length === 0 ? "0" : k.map(function (x) { return x + " " + r[x]; }).join(", ");
  }
  function panel(parent, title) { var p = el("div", "panel"); p.appendChild(el("h3", "", title)); parent.appendChild(p); return p; }

  function chart(box, name, unit) {
    var c = el("div", "chart"), t = el("div", "t"), v = el("span", "v", "-");
    t.appendChild(el("span", "", name)); t.appendChild(v); c.appendChild(t);
    var svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("viewBox", "0 0 " + HISTORY + " 40"); svg.setAttribute("preserveAspectRatio", "none");
    var area = document.createElementNS("http://www.w3.org/2000/svg", "path"), line = document.createElementNS("http://www.w3.org/2000/svg", "path");
    area.setAttribute("fill", "#7cc4ff22"); line.setAttribute("fill", "none"); line.setAttribute("stroke", "#7cc4ff"); line.setAttribute("stroke-width", "1.5"); line.setAttribute("vector-effect", "non-scaling-stroke");
    svg.appendChild(area); svg.appendChild(line); c.appendChild(svg); box.appendChild(c);
    return { values: [], push: function (x) {
      this.values.push(x); if (this.values.length > HISTORY) this.values.shift();
      var max = Math.max.apply(null, this.values.concat([1e-9])), n = this.values.length, d = "";
      for (var i = 0; i < n; i++) d += (i ? "L" : "M") + (HISTORY - n + i) + "," + (38 - 36 * this.values[i] / max).toFixed(2);
      line.setAttribute("d", d); area.setAttribute("d", n ? d + "L" + (HISTORY - 1) + ",40L" + (HISTORY - n) + ",40Z" : "");
      v.textContent = fmt(x) + unit;
    } };
  }

  function nodeCard(id) {
    var n = nodes.get(id);
    if (n !== undefined) return n;
    var card = el("section", "card"); card.dataset.node = id;
    var h = el("h2"), role = el("span", "role"), name = el("span", "", id), sub = el("span", "dim");
    h.appendChild(role); h.appendChild(name); h.appendChild(sub); card.appendChild(h);
    var counts = el("div", "counts"), grid = el("div", "grid"), charts = el("div", "charts"), row = el("div", "row");
    card.appendChild(counts); card.appendChild(grid); card.appendChild(charts); card.appendChild(row);
    main.appendChild(card);
    n = { card: card, role: role, sub: sub, counts: counts, grid: grid, row: row, cells: [], last: null, prev: null,
      charts: { step: chart(charts, "step time", " ms"), batch: chart(charts, "batch size", ""), tps: chart(charts, "tokens/s", ""), queue: chart(charts, "queue depth", "") } };
    nodes.set(id, n);
    return n;
  }

  function drawNode(id, view, extra, standalone) {
    var m = view.map, n = nodeCard(id);
    n.role.textContent = m.role; n.role.className = "role " + m.role;
    n.sub.textContent = (extra ? extra + " · " : "") + m.numPages + " pages of " + m.pageSize + " tokens · " + m.running + " running, " + m.waiting + " waiting";
    while (n.cells.length < m.numPages) { var c = el("div", "cell"); c.dataset.page = String(n.cells.length); n.grid.appendChild(c); n.cells.push(c); }
    while (n.cells.length > m.numPages) n.grid.removeChild(n.cells.pop());
    var tally = { f: 0, a: 0, c: 0, q: 0 }, before = n.last;
    for (var p = 0; p < m.numPages; p++) {
      var s = m.states[p], hi = m.holderOf[p], holder = hi === null ? null : m.holders[hi], cell = n.cells[p];
      tally[s]++;
      var cls = "cell s-" + s;
      if (cell.dataset.s !== s) { cell.dataset.s = s; }
      cell.style.background = holder === null || s === "q" ? "" : tenantColour(holder.tenant, s === "c");
      var who = holder === null ? "" : holder.tenant + "/" + (holder.rid || "cache");
      var changed = before !== null && (before.who[p] !== who || before.epochs[p] !== m.epochs[p]) && who !== "";
      cell.className = cls;
      if (changed) { void cell.offsetWidth; cell.className = cls + " flash"; }
    }
    n.last = { who: m.holderOf.map(function (i) { return i === null ? "" : m.holders[i].tenant + "/" + (m.holders[i].rid || "cache"); }), epochs: m.epochs, map: m };
    n.counts.textContent = "";
    ["f", "a", "c", "q"].forEach(function (s) {
      var span = el("span"), sw = el("i", "sw"); sw.style.background = s === "f" ? "var(--free)" : s === "q" ? "var(--q)" : s === "a" ? "#7cc4ff" : "#4d7a9c";
      span.appendChild(sw); var num = el("b", "", String(tally[s])); num.dataset.count = LETTERS[s]; span.appendChild(num); span.appendChild(document.createTextNode(" " + LETTERS[s]));
      n.counts.appendChild(span);
    });
    var tenants = {}; m.holders.forEach(function (h) { tenants[h.tenant] = true; });
    var legend = el("span", "legend"); Object.keys(tenants).sort().forEach(function (t) { var s = el("span"), sw = el("i", "sw"); sw.style.background = tenantColour(t, false); s.appendChild(sw); s.appendChild(document.createTextNode(" " + t)); legend.appendChild(s); });
    n.counts.appendChild(legend);
    if (n.prev !== null) {
      var dt = (view.atMs - n.prev.atMs) / 1000, l = m.loop, o = n.prev.loop, steps = l.numSteps - o.numSteps;
      if (dt > 0) {
        n.charts.step.push(steps > 0 ? (l.stepMsTotal - o.stepMsTotal) / steps : 0);
        n.charts.batch.push(steps > 0 ? (l.numItemsStepped - o.numItemsStepped) / steps : 0);
        n.charts.tps.push((l.numTokensSampled - o.numTokensSampled) / dt);
        n.charts.queue.push(m.waiting);
      }
    }
    n.prev = { atMs: view.atMs, loop: m.loop };
    n.row.textContent = "";
    if (m.tiers) {
      var tp = panel(n.row, "cache tiers"); tp.dataset.panel = "tiers";
      var tierRows = m.tiers.map(function (t) { return [t.name, t.pages, t.hits, t.misses, refusedText(t.refused)]; });
      table(tp, ["tier", "pages", "hits", "misses", "refused"], tierRows, "none");
    }
    table(panel(n.row, "transfers in flight"), ["request", "phase", "peer", "pages", "bytes"], m.transfers.map(function (t) { return [t.rid, t.phase, t.peer, t.numPages, bytes(t.bytes)]; }), "none");
    table(panel(n.row, "quarantined pages"), ["request", "pages", "why", "until"], m.quarantined.map(function (q) { return [q.rid, q.numPages, q.reason, "AbortAck / close of " + q.waitingFor]; }), "none");
    if (m.speculation) {
      var sp = m.speculation, sq = panel(n.row, "speculation (" + (sp.drafter === "model" ? "draft model" : "prompt lookup") + ")");
      sq.dataset.panel = "speculation";
      var rate = function (a, d) { return d > 0 ? (100 * a / d).toFixed(0) + "%" : "-"; }, was = n.prevSpec || sp;
      var specRows = [["drafted", sp.drafted], ["accepted", sp.accepted], ["acceptance", rate(sp.accepted, sp.drafted)],
        ["acceptance, last interval", rate(sp.accepted - was.accepted, sp.drafted - was.drafted)], ["rolled back", sp.rolledBack]];
      if (sp.draftPool)
        specRows.push(["draft pool pages", sp.draftPool.pagesHeld + " / " + sp.draftPool.numPages + (sp.draftPool.paused ? " (paused: not paying)" : "")]);
      table(sq, ["", ""], specRows, "none");
      n.prevSpec = sp;
    }
    var totals = Object.keys(m.totals).filter(function (k) { return m.totals[k] > 0; });
    var outcomes = Object.keys(view.outcomes).filter(function (k) { return k !== "success" && view.outcomes[k] > 0; });
    var t2 = panel(n.row, "failures by code, totals");
    table(t2, ["", "count"], outcomes.map(function (k) { return [k, view.outcomes[k]]; }).concat(totals.map(function (k) { return [k, m.totals[k]]; })), "no failures");
    if (standalone) { noteFailures(view); table(panel(n.row, "last failures (since this page opened)"), ["at", "code", "count"], failureLog.recent, "none"); }
    if (view.plan.length > 0) panel(n.row, "tessera plan").appendChild(el("pre", "", view.plan.join("\n")));
  }

  /** Failures seen rise since the page opened, newest first: the "last failures" list. */
  var failureLog = { seen: null, recent: [] };
  function noteFailures(view) {
    var now = new Date(view.atMs).toISOString().slice(11, 19);
    Object.keys(view.outcomes).forEach(function (code) {
      if (code === "success") return;
      var before = failureLog.seen === null ? view.outcomes[code] : (failureLog.seen[code] || 0), grew = view.outcomes[code] - before;
      if (grew > 0) failureLog.recent.unshift([now, code, grew]);
    });
    failureLog.recent = failureLog.recent.slice(0, 8);
    failureLog.seen = view.outcomes;
  }
  function failuresPanel(row, view) {
    var codes = Object.keys(view.outcomes).filter(function (k) { return k !== "success" && view.outcomes[k] > 0; });
    var column = el("div", "stack"); row.appendChild(column);
    table(panel(column, "failures by code"), ["code", "total"], codes.map(function (k) { return [k, view.outcomes[k]]; }), "no failures");
    column.appendChild(el("div", "", "\u00a0"));
    table(panel(column, "last failures (since this page opened)"), ["at", "code", "count"], failureLog.recent, "none");
  }

  var cluster = null;
  function drawCluster(view) {
    var m = view.map;
    if (cluster === null) {
      cluster = el("section", "card"); cluster.dataset.node = "router";
      main.insertBefore(cluster, main.firstChild);
    }
    cluster.textContent = "";
    var h = el("h2"); h.appendChild(el("span", "role router", "router")); h.appendChild(el("span", "", m.node));
    h.appendChild(el("span", "dim", m.workers.length + " workers · " + m.pairs.length + " pairs in flight · " + (view.outcomes.success || 0) + " requests served"));
    cluster.appendChild(h);
    var row = el("div", "row cluster"); cluster.appendChild(row);
    table(panel(row, "pairs in flight"), ["request", "tenant", "phase", "prefill", "decode", "tokens"], m.pairs.map(function (p) { return [p.rid, p.tenant, p.phase, p.prefill, p.decode, p.tokensForwarded]; }), "none");
    table(panel(row, "workers"), ["url", "role", "state", ""], m.workers.map(function (w) { return [w.url, w.role, w.state, w.error || ""]; }), "none");
    noteFailures(view);
    failuresPanel(row, view);
    var seen = {};
    m.workers.forEach(function (w) { if (w.view !== null && w.view.map.kind === "node") { var id = w.view.map.node; seen[id] = true; drawNode(id, w.view, w.url, false); } });
    nodes.forEach(function (n, id) { n.card.style.opacity = seen[id] ? "1" : ".4"; });
  }

  function draw(view) {
    document.getElementById("where").textContent = view.map.kind === "cluster" ? "cluster of " + view.map.workers.length + " workers" : view.map.role + " node";
    document.getElementById("when").textContent = new Date(view.atMs).toISOString().slice(11, 19) + " UTC";
    if (view.map.kind === "cluster") drawCluster(view); else drawNode(view.map.node, view, "", true);
    document.body.dataset.updates = String(Number(document.body.dataset.updates || "0") + 1);
  }

  main.addEventListener("mouseover", function (e) {
    var c = e.target; if (!c.classList || !c.classList.contains("cell")) { tip.style.display = "none"; return; }
    var card = c.closest(".card"), n = nodes.get(card.dataset.node); if (n === undefined || n.last === null) return;
    var p = Number(c.dataset.page), m = n.last.map, hi = m.holderOf[p], holder = hi === null ? null : m.holders[hi];
    tip.textContent = "";
    [["page", p], ["state", LETTERS[m.states[p]]], ["epoch", m.epochs[p]], ["tenant", holder ? holder.tenant : "-"], ["request", holder ? (holder.rid || "(prefix cache)") : "-"]].forEach(function (kv) { var d = el("div"); d.appendChild(el("span", "dim", kv[0] + " ")); d.appendChild(document.createTextNode(String(kv[1]))); tip.appendChild(d); });
    tip.style.display = "block";
  });
  main.addEventListener("mousemove", function (e) { tip.style.left = (e.clientX + 14) + "px"; tip.style.top = (e.clientY + 14) + "px"; });
  main.addEventListener("mouseleave", function () { tip.style.display = "none"; });

  var live = document.getElementById("live"), err = document.getElementById("err");
  function poll() {
    fetch("/dashboard/state", { headers: headers, cache: "no-store" })
      .then(function (r) { if (r.status !== 200) throw new Error("GET /dashboard/state answered " + r.status); return r.json(); })
      .then(function (view) { draw(view); live.className = "on"; err.textContent = ""; })
      .catch(function (e) { live.className = ""; err.textContent = String(e.message || e); })
      .then(function () { setTimeout(poll, POLL_MS); });
  }
  poll();
})();
</script></body></html>
`;
