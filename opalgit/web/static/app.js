// opal web: the pages of the read-only view. Plain JavaScript, no build step, no
// library: every file the page uses is served by opal itself (the server's
// Content-Security-Policy forbids anything else).
//
// Session text is untrusted (a tool result can hold any HTML), so nothing here
// assigns innerHTML: every node is made with h() and text goes in as text.
"use strict";

const PAGE = 200;            // turns per page of the state view (api.PAGE)
const ROW = 28;              // graph row height, px
const CUTS_AT_ONCE = 20000;  // the budget page plans its cuts unasked up to this many turns
const LANE = 16;             // graph lane width, px
const COLORS = ["#3b82c4", "#d9822b", "#2f9e44", "#c2255c", "#7048e8", "#0c8599", "#e8590c", "#5c940d"];
const SVGNS = "http://www.w3.org/2000/svg";

// ------------------------------------------------------------------ small helpers
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k === "style") {
      // Through the CSSOM: a style attribute is inline style, which the server's
      // Content-Security-Policy (style-src 'self') blocks.
      for (const decl of String(v).split(";")) {
        const at = decl.indexOf(":");
        if (at > 0) el.style.setProperty(decl.slice(0, at).trim(), decl.slice(at + 1).trim());
      }
    }
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  return put(el, children);
}

function put(el, ...children) {
  // Node.append writes null as "null" and an array as its toString: flatten and skip.
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function s(tag, attrs) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "title") { const t = document.createElementNS(SVGNS, "title"); t.textContent = v; el.append(t); }
    else el.setAttribute(k, String(v));
  }
  return el;
}

const fmt = (n) => (n === null || n === undefined) ? "" : Number(n).toLocaleString("en-US");
const short = (id) => (id || "").slice(0, 10);
const enc = encodeURIComponent;

function cmd(text) {
  // A command to copy: the page changes nothing itself.
  const code = h("code", { class: "cmd", text });
  const button = h("button", { class: "copy", type: "button", title: "Copy the command",
    onclick: () => { navigator.clipboard && navigator.clipboard.writeText(text).then(
      () => { button.textContent = "copied"; setTimeout(() => { button.textContent = "copy"; }, 1200); }, () => {}); } },
    "copy");
  return h("span", { class: "cmd-line" }, code, button);
}

async function api(name, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  const res = await fetch(`/api/${name}?${q}`, { credentials: "same-origin", cache: "no-store" });
  let body;
  try { body = await res.json(); } catch (e) { body = { error: `${res.status} ${res.statusText}` }; }
  if (!res.ok) {
    const err = new Error(body.error || `${res.status}`);
    err.hint = body.hint;
    throw err;
  }
  return body;
}

function route() {
  // #/page/arg1/arg2?k=v
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query] = raw.split("?");
  const parts = (path || "graph").split("/").map(decodeURIComponent);
  return { page: parts[0] || "graph", args: parts.slice(1), query: new URLSearchParams(query || "") };
}

function go(hash) { location.hash = hash; }

function stateLink(rev, turn) {
  return `#/state/${enc(rev)}` + (turn ? `?from=${Math.max(1, turn - (turn - 1) % PAGE)}&turn=${turn}` : "");
}

// ------------------------------------------------------------------ graph
async function pageGraph(app) {
  const g = await api("graph");
  const rows = g.commits.length;
  const width = Math.max(1, g.columns) * LANE + 12;
  const svg = s("svg", { id: "graph", width, height: Math.max(rows, 1) * ROW, class: "graph-svg" });
  const x = (col) => col * LANE + 10;
  const y = (row) => row * ROW + ROW / 2;
  const colOf = new Map(g.commits.map((c) => [c.id, c.col]));
  for (const e of g.edges) {
    const pts = e.points.map(([c, r]) => [x(c), y(r)]);
    let d = `M ${pts[0][0]} ${pts[0][1]}`;
    for (let i = 1; i < pts.length; i++) {
      const [px, py] = pts[i - 1], [qx, qy] = pts[i];
      // A lane change bends over half a row, as git's / and \ do.
      d += px === qx ? ` L ${qx} ${qy}` : ` C ${px} ${py + ROW / 2} ${qx} ${qy - ROW / 2} ${qx} ${qy}`;
    }
    const color = COLORS[(e.merge ? colOf.get(e.from) + 1 : (pts.length > 1 ? e.points[e.points.length - 1][0] : 0)) % COLORS.length];
    svg.append(s("path", { class: "edge" + (e.merge ? " merge" : ""), d, stroke: color,
      "data-from": e.from, "data-to": e.to }));
  }
  const list = h("div", { class: "commit-rows" });
  for (const c of g.commits) {
    const node = s("circle", { class: "node" + (c.abandoned ? " abandoned" : ""), cx: x(c.col), cy: y(c.row), r: 5,
      fill: c.abandoned ? "#fff" : COLORS[c.col % COLORS.length], stroke: COLORS[c.col % COLORS.length],
      "data-oid": c.id, title: `${short(c.id)} ${c.message}` });
    node.addEventListener("click", () => go(stateLink(c.id)));
    svg.append(node);
    const refs = h("span", { class: "refs" },
      c.branches.map((b) => h("span", { class: "ref" + (b === g.head ? " head" : ""), text: b })),
      c.remotes.map((b) => h("span", { class: "ref remote", text: b })));
    const code = c.code && c.code.length ? h("span", { class: "code", title: "linked code commit" },
      c.code.map((k) => h("span", { class: "code-commit", title: k.subject || "" }, "⎇ ", short(k.id).slice(0, 7)))) : null;
    list.append(h("div", { class: "commit-row" + (c.abandoned ? " abandoned" : ""), "data-oid": c.id,
      style: `height:${ROW}px`, tabindex: 0, title: c.abandoned ? "only the op log keeps this commit: see the op log to undo" : null,
      onclick: () => go(stateLink(c.id)), onkeydown: (ev) => { if (ev.key === "Enter") go(stateLink(c.id)); } },
      h("span", { class: "oid", text: short(c.id).slice(0, 7) }), refs,
      h("span", { class: "msg", text: c.message }), code,
      h("span", { class: "figures" },
        h("span", { class: "turns", text: c.turns }), " turns · ",
        h("span", { class: "tokens", text: c.tokens }), " tokens"),
      h("span", { class: "agent", text: c.agent || "" }),
      h("span", { class: "when", text: (c.time || "").replace("T", " ").slice(0, 16) })));
  }
  put(app, 
    h("h1", {}, "Graph ", h("small", {}, `${fmt(rows)} commits, ${fmt(g.edges.length)} links`,
      g.commits.some((c) => c.abandoned) ? ", hollow: rewound away (the op log keeps them)" : "")),
    rows ? h("div", { class: "graph", style: `--lanes:${width}px` }, svg, list)
         : h("p", { class: "empty" }, "No state commits yet: ", cmd("opal commit -m 'first state'")));
}

// ------------------------------------------------------------------ state
function pager(rev, from, total) {
  const last = Math.max(1, total - (total - 1) % PAGE);
  const link = (cls, to, label, on) => on ? h("a", { class: cls, href: `#/state/${enc(rev)}?from=${to}` }, label)
                                          : h("span", { class: cls + " off" }, label);
  const jump = h("form", { class: "jump", onsubmit: (ev) => {
    ev.preventDefault();
    const n = Math.min(Math.max(1, parseInt(ev.target.turn.value, 10) || 1), Math.max(total, 1));
    go(stateLink(rev, n));
  } }, "turn ", h("input", { name: "turn", type: "number", min: 1, max: total, size: 7 }), h("button", { type: "submit" }, "go"));
  return h("div", { class: "pager" },
    link("first", 1, "« first", from > 1), link("prev", Math.max(1, from - PAGE), "‹ prev", from > 1),
    h("span", { class: "range" }, total ? `turns ${fmt(from)}–${fmt(Math.min(total, from + PAGE - 1))} of ${fmt(total)}` : "no turns"),
    link("next", from + PAGE, "next ›", from + PAGE <= total), link("last", last, "last »", from + PAGE <= total), jump);
}

function renderBlock(b) {
  const t = b.type;
  if (t === "text") return h("pre", { class: "block text", text: b.text || "" });
  if (t === "reasoning") return h("details", { class: "block reasoning" }, h("summary", {}, "reasoning"), h("pre", { text: b.text || "" }));
  if (t === "tool_call") {
    return h("div", { class: "block call", "data-call": b.id || "" }, h("div", { class: "call-head" }, "call ",
      h("b", { text: b.name || "?" }), b.id ? h("span", { class: "callid", text: ` ${b.id}` }) : null), callInput(b.input));
  }
  if (t === "tool_result") return renderResult(b, null);
  if (t === "image") {
    if (b.data && b.media_type && /^image\/(png|jpeg|gif|webp)$/.test(b.media_type))
      return h("img", { class: "block image", src: `data:${b.media_type};base64,${b.data}`, alt: "image in the session" });
    // A URL is not fetched: the page loads nothing from outside this machine.
    return h("div", { class: "block image" }, `[image${b.url ? ": " + b.url : ""}${b.media_type ? ", " + b.media_type : ""}]`);
  }
  return h("pre", { class: "block other", text: JSON.stringify(b, null, 2) });
}

function callInput(input) {
  // An object's arguments one per line, a string argument as its own text (a file a
  // Write call writes reads as the file, not as one JSON string full of \n).
  if (input === null || typeof input !== "object" || Array.isArray(input) || !Object.keys(input).length)
    return h("pre", { text: typeof input === "string" ? input : JSON.stringify(input, null, 2) });
  return h("dl", { class: "call-args" }, Object.entries(input).map(([k, v]) => [h("dt", { text: k }),
    h("dd", {}, h("pre", { text: typeof v === "string" ? v : JSON.stringify(v, null, 2) }))]));
}

function resultText(out) {
  if (typeof out === "string") return out;
  if (Array.isArray(out)) return out.map((p) => p && p.type === "text" ? p.text : `[${p && p.type}]`).join("\n");
  return out === null || out === undefined ? "" : JSON.stringify(out, null, 2);
}

function renderResult(b, turn) {
  return h("div", { class: "block result" + (b.is_error ? " error" : ""), "data-call": b.call_id || "" },
    h("div", { class: "result-head" }, b.is_error ? "error result" : "result",
      b.call_id ? h("span", { class: "callid", text: ` of ${b.call_id}` }) : null,
      turn ? h("span", {}, " · turn ", h("a", { href: "#", onclick: (ev) => { ev.preventDefault();
        const el = document.querySelector(`.turn[data-turn="${turn}"]`); if (el) el.scrollIntoView(); } }, String(turn))) : null),
    h("pre", { text: resultText(b.output) }));
}

async function expand(rev, row, full, button) {
  if (full.childElementCount) { full.hidden = !full.hidden; button.textContent = full.hidden ? "open" : "close"; return; }
  button.disabled = true;
  try {
    const t = await api("turn", { rev, turn: row.turn });
    put(full, ...t.blocks.map(renderBlock));
    for (const r of t.results) put(full, renderResult(r.block, r.turn));
    if (t.open_calls.length) put(full, h("div", { class: "note" }, `no result found for ${t.open_calls.join(", ")} in the next records`));
    if (t.calls_without_id) put(full, h("div", { class: "note" }, `${t.calls_without_id === 1 ? "a call" : `${t.calls_without_id} calls`} `
      + "without an id in the session: no result can be paired with it; it is in the turns that follow"));
    if (t.source !== null && t.source !== undefined)
      put(full, h("details", { class: "source" }, h("summary", {}, `stored ${t.agent} record`),
        h("pre", { text: JSON.stringify(t.source, null, 2) })));
    full.hidden = false;
    button.textContent = "close";
  } catch (e) { put(full, h("div", { class: "note error", text: e.message })); }
  button.disabled = false;
}

async function pageState(app, r) {
  const rev = r.args[0] || "HEAD";
  const from = Math.max(1, parseInt(r.query.get("from") || "1", 10) || 1);
  const st = await api("state", { rev, from, limit: PAGE });
  const list = h("ol", { class: "turns", start: from });
  for (const row of st.items) {
    const full = h("div", { class: "full", hidden: true });
    const button = h("button", { class: "expand", type: "button" }, "open");
    button.addEventListener("click", () => expand(st.id, row, full, button));
    list.append(h("li", { class: `turn role-${row.role}`, "data-turn": row.turn, id: `turn-${row.turn}` },
      h("div", { class: "turn-head" },
        h("span", { class: "num", text: row.turn }), h("span", { class: "role", text: row.role || "" }),
        h("span", { class: "tool", text: row.tool || "" }),
        h("span", { class: "preview", text: row.preview }),
        h("span", { class: "tok", title: "estimated tokens" }, fmt(row.tokens_estimate)), button), full));
  }
  put(app, 
    h("h1", {}, "State ", h("small", { text: `${rev} · ${short(st.id)}` })),
    h("div", { id: "state-info", "data-turns": st.turns, "data-id": st.id },
      h("span", { class: "msg", text: st.message }), " · ", `${fmt(st.turns)} turns, ${fmt(st.records)} records, ~${fmt(st.tokens)} tokens`,
      st.agent ? ` · ${st.agent} session ${st.session || ""}` : "",
      h("div", { class: "actions" }, cmd(`opal export ${short(st.id)} --to claude`), cmd(`opal switch -c fork ${short(st.id)}`),
        h("a", { href: `#/budget/${enc(st.id)}` }, "budget"))),
    pager(rev, from, st.turns), list, st.items.length > 20 ? pager(rev, from, st.turns) : null);
  const want = list.querySelector(`.turn[data-turn="${r.query.get("turn")}"]`);
  if (want) want.classList.add("target");  // the router scrolls to it once the page is shown
}

// ------------------------------------------------------------------ diff
function revPicker(refs, name, value) {
  const sel = h("select", { name });
  const opts = [...refs.branches.map((b) => b.name), ...refs.remotes.map((b) => b.name)];
  if (value && !opts.includes(value)) opts.unshift(value);
  for (const o of opts) sel.append(h("option", { value: o, selected: o === value }, o));
  return sel;
}

function entryCell(e, side) {
  const n = side === "a" ? e.turn_a : e.turn_b;
  const show = side === "a" ? e.change !== "added" : e.change !== "removed";
  if (!show) return h("div", { class: `side-${side} blank` });
  return h("div", { class: `side-${side}` },
    h("span", { class: "num", text: n ?? "·" }), h("span", { class: "role", text: e.role || "" }),
    h("span", { class: "tool", text: e.tool || "" }), h("span", { class: "preview", text: e.preview }),
    side === "b" && e.diff ? h("pre", { class: "textdiff" }, e.diff.map((l) =>
      h("span", { class: l.startsWith("+") ? "plus" : l.startsWith("-") ? "minus" : "", text: l + "\n" }))) : null);
}

async function pageDiff(app, r) {
  const refs = await api("refs");
  let [a, b] = r.args;
  if (!a && !refs.merging) {
    // Nothing asked: the current branch against the branch most like it.
    const others = refs.branches.filter((x) => !x.current);
    a = refs.head; b = others.length ? others[0].name : refs.head;
  }
  const d = await api("diff", { a, b });
  const form = h("form", { id: "diff-form", class: "pick", onsubmit: (ev) => { ev.preventDefault();
    go(`#/diff/${enc(ev.target.a.value)}/${enc(ev.target.b.value)}`); } },
    "A ", revPicker(refs, "a", d.merge ? d.a_id : a), " B ", revPicker(refs, "b", d.merge ? d.b_id : b), h("button", { type: "submit" }, "compare"));
  const st = d.stat;
  const conflictA = new Set(d.merge ? d.merge.turns_a : []), conflictB = new Set(d.merge ? d.merge.turns_b : []);
  const rows = h("div", { class: "diff-rows" },
    h("div", { class: "diff-head" },
      // During a merge the two sides are its ours and theirs, named by their branches.
      h("div", { class: "side-a", text: d.merge ? `A, ours: ${d.merge.branch} (${short(d.a_id)})` : `A: ${d.a}` }),
      h("div", { class: "side-b", text: d.merge ? `B, theirs: ${d.merge.merging} (${short(d.b_id)})` : `B: ${d.b}` })),
    d.common_prefix_turns ? h("details", { class: "shared-prefix" },
      h("summary", {}, `${fmt(d.common_prefix_turns)} shared turns`),
      h("p", {}, "Both states begin with these turns. ", h("a", { href: stateLink(d.a_id) }, "Read them in A"))) : null);
  for (const e of d.entries) {
    const conflict = (e.turn_a && conflictA.has(e.turn_a)) || (e.turn_b && conflictB.has(e.turn_b));
    rows.append(h("div", { class: `entry ${e.change}` + (conflict ? " conflict" : "") }, entryCell(e, "a"), entryCell(e, "b")));
  }
  put(app, h("h1", {}, "Diff"), form,
    d.merge ? h("div", { class: "merge-note" }, `A merge of ${d.merge.merging} into ${d.merge.branch} stopped on `,
      `${d.merge.conflicts.length} conflict${d.merge.conflicts.length === 1 ? "" : "s"} (marked red). `,
      cmd(d.merge.continue), cmd(d.merge.abort)) : null,
    h("div", { id: "diff-stat", "data-added": st.turns_added, "data-removed": st.turns_removed,
      "data-changed": st.turns_changed, "data-shared": d.common_prefix_turns },
      h("span", { class: "plus" }, `+${fmt(st.turns_added)} added`), " ", h("span", { class: "minus" }, `−${fmt(st.turns_removed)} removed`),
      " ", h("span", { class: "changed" }, `~${fmt(st.turns_changed)} changed`), ` · ${fmt(d.common_prefix_turns)} shared turns first`),
    d.entries.length ? rows : h("p", { class: "empty" }, "The two states hold the same turns."),
    h("p", {}, cmd(`opal diff ${short(d.a_id)} ${short(d.b_id)}`)));
}

// ------------------------------------------------------------------ budget
async function pageBudget(app, r) {
  const rev = r.args[0] || "HEAD";
  const b = await api("budget", { rev });
  const W = 1000, H = 160;
  const max = Math.max(1, ...b.bars.map((x) => x.tokens));
  const chart = s("svg", { id: "budget-chart", viewBox: `0 0 ${W} ${H + 20}`, preserveAspectRatio: "none", class: "chart" });
  const bw = W / Math.max(1, b.bars.length);
  b.bars.forEach((bar, i) => {
    const hgt = Math.max(1, (bar.tokens / max) * H);
    const rect = s("rect", { class: `bar role-${bar.role || "mixed"}`, x: i * bw, y: H - hgt, width: Math.max(bw - 0.5, 0.5), height: hgt,
      "data-first": bar.first, "data-last": bar.last, "data-tokens": bar.tokens,
      title: `${bar.first === bar.last ? "turn " + bar.first : `turns ${bar.first}–${bar.last}`}: ${fmt(bar.tokens)} tokens${bar.tool ? " (" + bar.tool + ")" : ""}` });
    rect.addEventListener("click", () => go(stateLink(b.id, bar.first)));
    chart.append(rect);
  });
  const tools = h("table", { id: "by-tool" }, h("tr", {}, h("th", {}, "tool"), h("th", {}, "turns"), h("th", {}, "tokens"), h("th", {}, "share")),
    b.by_tool.map((t) => h("tr", { "data-tool": t.tool, "data-tokens": t.tokens }, h("td", { text: t.tool }), h("td", { text: fmt(t.turns) }),
      h("td", { text: fmt(t.tokens) }), h("td", {}, h("span", { class: "share", style: `width:${Math.round(100 * t.tokens / Math.max(1, b.tokens))}px` }),
        ` ${(100 * t.tokens / Math.max(1, b.tokens)).toFixed(1)}%`))));
  const biggest = h("table", { id: "biggest" }, h("tr", {}, h("th", {}, "turn"), h("th", {}, "role"), h("th", {}, "tool"), h("th", {}, "tokens"), h("th", {}, "preview")),
    b.biggest.map((t) => h("tr", { "data-turn": t.turn, "data-tokens": t.tokens }, h("td", {}, h("a", { href: stateLink(b.id, t.turn) }, String(t.turn))),
      h("td", { text: t.role || "" }), h("td", { text: t.tool || "" }), h("td", { text: fmt(t.tokens) }), h("td", { class: "preview", text: t.preview || "" }))));
  // The cuts come in a second request: planning each command reads the whole state
  // again, seconds on a long one, and the figures should not wait for that.
  // On a long state they wait for a click (a 100,000-turn state takes some 15 s).
  const cuts = h("div", { id: "cuts", "data-ready": "0" });
  const planCuts = () => {
    cuts.replaceChildren(h("p", { class: "empty" }, "working out what each command would cut…"));
    api("cuts", { rev }).then((res) => {
      cuts.replaceChildren(...(res.cuts.length ? res.cuts.map((c) => h("div", { class: "cut", "data-saves": c.saves },
        cmd(c.command), h("span", { class: "saves" }, ` saves ~${fmt(c.saves)} tokens`), h("div", { class: "what", text: c.what })))
        : [h("p", { class: "empty" }, "Nothing worth cutting.")]));
    }, (e) => { cuts.replaceChildren(h("p", { class: "note error", text: e.message + (e.hint ? ` (hint: ${e.hint})` : "") })); })
      .finally(() => { cuts.dataset.ready = "1"; });
  };
  if (b.turns <= CUTS_AT_ONCE) planCuts();
  else put(cuts, h("p", {}, `Planning the cuts reads all ${fmt(b.turns)} turns again, which takes a while. `,
    h("button", { type: "button", id: "plan-cuts", onclick: planCuts }, "work them out")));
  put(app, h("h1", {}, "Budget ", h("small", { text: `${rev} · ${short(b.id)}` })),
    h("div", { id: "budget-total", "data-tokens": b.tokens, "data-turns": b.turns },
      `~${fmt(b.tokens)} tokens in ${fmt(b.turns)} turns`),
    h("h2", {}, b.bars.length && b.bars[0].first !== b.bars[0].last ? "Tokens per group of turns" : "Tokens per turn"), chart,
    h("div", { class: "cols" }, h("div", {}, h("h2", {}, "Per tool"), tools), h("div", {}, h("h2", {}, "Biggest turns"), biggest)),
    h("h2", {}, "What would cut it"), cuts);
}

// ------------------------------------------------------------------ blame and search
function owner(o) {
  if (o.kind === "agent") {
    return h("span", { class: "owner agent" }, o.revision ? h("a", { href: stateLink(o.state, o.turn) }, `${o.agent} turn ${o.turn}`) : `${o.agent}`,
      o.tool ? ` ${o.tool}` : "", o.prompt ? h("span", { class: "prompt", title: o.prompt, text: ` “${o.prompt.slice(0, 60)}”` }) : null);
  }
  return h("span", { class: "owner " + o.kind }, o.commit ? `${short(o.commit).slice(0, 7)} ` : "", o.author || (o.kind === "unattributed" ? `? ${o.reason || ""}` : o.kind));
}

async function pageBlame(app, r) {
  const path = r.query.get("path") || "";
  const form = h("form", { id: "blame-form", class: "pick", onsubmit: (ev) => { ev.preventDefault();
    go(`#/blame?path=${enc(ev.target.path.value)}`); } },
    "file ", h("input", { name: "path", value: path, size: 50, placeholder: "src/app.py" }), h("button", { type: "submit" }, "blame"));
  put(app, h("h1", {}, "Blame"), form);
  if (!path) { put(app, h("p", { class: "empty" }, "Which agent turn or person wrote each line of a file.")); return; }
  const b = await api("blame", { path });
  put(app, h("p", {}, `${b.path}: ${fmt(b.lines_in_file)} lines, ${fmt(b.recorded_changes)} recorded changes`),
    b.notes.map((n) => h("p", { class: "note", text: n })),
    h("table", { id: "blame" }, b.lines.map((l) => h("tr", { class: "line", "data-line": l.line },
      h("td", { class: "who" }, owner(l.owner)), h("td", { class: "ln", text: l.line }), h("td", {}, h("pre", { text: l.text }))))),
    h("p", {}, cmd(`opal blame ${b.path}`)));
}

function marked(text, spans) {
  const out = [];
  let at = 0;
  for (const [a, b] of spans) { out.push(text.slice(at, a), h("mark", { text: text.slice(a, b) })); at = b; }
  out.push(text.slice(at));
  return out;
}

async function pageSearch(app, r) {
  const q = r.query.get("q") || "";
  const form = h("form", { id: "search-form", class: "pick", onsubmit: (ev) => { ev.preventDefault();
    const f = ev.target; go(`#/search?q=${enc(f.q.value)}${f.i.checked ? "&i=1" : ""}${f.fixed.checked ? "&fixed=1" : ""}`); } },
    h("input", { name: "q", value: q, size: 50, placeholder: "regular expression" }),
    h("label", {}, h("input", { type: "checkbox", name: "i", checked: r.query.get("i") === "1" }), " ignore case"),
    h("label", {}, h("input", { type: "checkbox", name: "fixed", checked: r.query.get("fixed") === "1" }), " literal"),
    h("button", { type: "submit" }, "search"));
  put(app, h("h1", {}, "Search"), form);
  if (!q) { put(app, h("p", { class: "empty" }, "Every prompt, reply, tool call and result of every branch.")); return; }
  const res = await api("search", { q, i: r.query.get("i"), fixed: r.query.get("fixed") });
  put(app, h("p", { id: "search-info", "data-count": res.count },
    `${fmt(res.count)} matching turns, ${fmt(res.lines)} lines`, res.count > res.limit ? ` (the first ${fmt(res.limit)} shown)` : "",
    ` · ${fmt(res.searched.records_searched)} records searched`),
  res.matches.map((m) => h("div", { class: "hit", "data-turn": m.turn ?? "", "data-rev": m.rev },
    h("a", { href: stateLink(m.commit, m.turn) }, `${m.rev}:${m.turn ?? "@" + m.record}`), h("span", { class: "role", text: m.role || "" }),
    m.lines.map((l) => h("div", { class: "hit-line" }, h("span", { class: "where", text: `${l.tool || l.block}${l.key ? "." + l.key : ""}:${l.line}` }),
      h("code", {}, marked(l.text, l.spans)))))),
  h("p", {}, cmd(`opal grep --all '${q.replace(/'/g, "'\\''")}'`)));
}

// ------------------------------------------------------------------ op log
async function pageOps(app) {
  const res = await api("ops");
  put(app, h("h1", {}, "Op log"), h("p", {}, "Every change opal made to the branches, newest first. Each can be taken back."),
    h("table", { id: "ops" }, h("tr", {}, h("th", {}, "id"), h("th", {}, "when"), h("th", {}, "what"), h("th", {}, "take it back")),
      res.operations.map((o) => h("tr", { class: "op", "data-op": o.id },
        h("td", { class: "oid", text: short(o.id) }), h("td", { class: "when", text: (o.time || "").replace("T", " ").slice(0, 19) }),
        h("td", { text: o.description }), h("td", {}, o.undo ? cmd(o.undo) : h("span", { class: "off" }, "cannot be undone"))))));
}

// ------------------------------------------------------------------ the router
const PAGES = { graph: pageGraph, state: pageState, diff: pageDiff, budget: pageBudget, blame: pageBlame, search: pageSearch, ops: pageOps };

let loading = 0;
async function render() {
  const r = route();
  const page = PAGES[r.page] ? r.page : "graph";
  const mine = ++loading;
  document.body.dataset.page = page;
  document.body.dataset.ready = "0";
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("on", a.dataset.nav === page);
  const err = document.getElementById("error");
  err.hidden = true;
  err.textContent = "";
  const app = h("main", { id: "app" });
  try {
    await PAGES[page](app, r);
  } catch (e) {
    if (mine !== loading) return;
    err.hidden = false;
    put(err, h("b", { text: e.message }), e.hint ? h("div", { class: "hint", text: `hint: ${e.hint}` }) : null);
  }
  if (mine !== loading) return;  // a newer route started meanwhile
  document.getElementById("app").replaceWith(app);
  if (r.page !== "state" || !r.query.get("turn")) window.scrollTo(0, 0);
  else { const el = document.getElementById(`turn-${r.query.get("turn")}`); if (el) el.scrollIntoView({ block: "center" }); }
  // When it was drawn (ms since the page started loading): what the bench's web rows read.
  document.body.dataset.readyMs = String(performance.now());
  document.body.dataset.ready = "1";
}

window.addEventListener("hashchange", render);
window.addEventListener("DOMContentLoaded", render);
