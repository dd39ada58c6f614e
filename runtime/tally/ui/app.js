// Tally's dashboard: the pages of a node, over its public HTTP API alone, in plain
// JavaScript with no build step and no library.
//
// Safety: everything shown is set as text (text nodes, `textContent`) or as an
// attribute, never parsed as markup, so a key or a value cannot inject any. Every
// request goes to the page's own origin (the node), and the CSP the node sends forbids
// any other. Charts are SVG drawn here.
//
// Numbers: seqnums, tags and other u64s pass 2^53, which a JavaScript number cannot
// hold; `parseJSON` keeps every integer beyond that as a BigInt, exact.
"use strict";

// ---------------------------------------------------------------- the DOM

const SVG_NS = "http://www.w3.org/2000/svg";

/** Sets `props` on `el`: `class`, `on<event>` listeners, other attributes. */
function setProps(el, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value == null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.setAttribute("class", value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
}

/** Appends children: nodes as they are, anything else as text. */
function appendAll(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** An HTML element. */
function h(tag, props, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  return appendAll(el, children);
}

/** An SVG element. */
function svg(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setProps(el, props);
  return appendAll(el, children);
}

const $ = (css, root = document) => root.querySelector(css);

function loading(what = "Loading…") {
  return h("div", { class: "loading" }, what);
}

function empty(text) {
  return h("div", { class: "empty" }, text);
}

function badge(text, cls) {
  return h("span", { class: `badge ${cls || text}` }, text);
}

/** A link to a page of the dashboard: `#/` + path segments (each encoded) + query. */
function link(text, segments, query, props) {
  return h("a", { href: hashOf(segments, query), ...props }, text);
}

function hashOf(segments, query) {
  const path = segments.map((s) => encodeURIComponent(String(s))).join("/");
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) {
    if (v != null && v !== "") q.set(k, String(v));
  }
  const qs = q.toString();
  return `#/${path}${qs ? `?${qs}` : ""}`;
}

// ---------------------------------------------------------------- formatting

function pad(n, width = 2) {
  return String(n).padStart(width, "0");
}

/** A time as `YYYY-MM-DD HH:MM:SS.mmm` in local time; `—` for none. */
function fmtTime(ms) {
  if (ms == null) return "—";
  const d = new Date(Number(ms));
  const day = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  return `${day} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** A time of day (`HH:MM:SS`), with the date when it is not today. */
function fmtShort(ms) {
  if (ms == null) return "—";
  const d = new Date(Number(ms));
  const clock = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  const today = new Date();
  if (d.toDateString() === today.toDateString()) return clock;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${clock}`;
}

/** `3 s ago`, `in 2 min`. */
function fmtAgo(ms) {
  if (ms == null) return "";
  const delta = Number(ms) - Date.now();
  const abs = Math.abs(delta);
  const text =
    abs < 1000 ? "now" : abs < 60e3 ? `${Math.round(abs / 1e3)} s` : abs < 3600e3 ? `${Math.round(abs / 60e3)} min` : abs < 86400e3 ? `${Math.round(abs / 3600e3)} h` : `${Math.round(abs / 86400e3)} d`;
  if (text === "now") return text;
  return delta < 0 ? `${text} ago` : `in ${text}`;
}

function timeCell(ms) {
  return h("span", { title: ms == null ? null : `${fmtTime(ms)} (${fmtAgo(ms)})` }, fmtShort(ms));
}

/** Milliseconds with the precision that matters at their size. */
function fmtMs(ms) {
  if (ms == null || Number.isNaN(ms)) return "—";
  const n = Number(ms);
  if (Number.isInteger(n) || n >= 100) return `${Math.round(n)} ms`;
  if (n >= 10) return `${n.toFixed(1)} ms`;
  return `${n.toFixed(2)} ms`;
}

/** A configured span of time: `10 s`, `1 min`, `250 ms`. */
function fmtSpan(ms) {
  if (ms == null) return "—";
  const n = Number(ms);
  if (n >= 3600e3 && n % 3600e3 === 0) return `${n / 3600e3} h`;
  if (n >= 60e3 && n % 60e3 === 0) return `${n / 60e3} min`;
  if (n >= 1000 && n % 1000 === 0) return `${n / 1000} s`;
  return `${n} ms`;
}

function fmtBytes(n) {
  if (n == null) return "—";
  const v = Number(n);
  if (v < 1024) return `${v} B`;
  if (v < 1 << 20) return `${(v / 1024).toFixed(1)} KiB`;
  if (v < 1 << 30) return `${(v / (1 << 20)).toFixed(1)} MiB`;
  return `${(v / (1 << 30)).toFixed(1)} GiB`;
}

function fmtCount(n) {
  if (n == null) return "—";
  return Number(n).toLocaleString("en-US");
}

/** A seqnum as its parts, `term.log.position`, as the CLI prints it. */
function fmtSeq(seqnum) {
  if (seqnum == null) return "—";
  const b = BigInt(seqnum);
  const term = b >> 48n;
  const log = (b >> 40n) & 0xffn;
  const position = b & ((1n << 40n) - 1n);
  return `${term}.${log}.${position}`;
}

function seqCell(seqnum) {
  return h("span", { class: "mono", title: seqnum == null ? null : `seqnum ${seqnum}` }, fmtSeq(seqnum));
}

/** A value as the API shows bytes, `{encoding, text}`: its text and, unless plain UTF-8, its encoding. */
function shown(value) {
  if (value == null) return h("span", { class: "muted" }, "—");
  const text = String(value.text);
  const cut = text.length > 400 ? `${text.slice(0, 400)}…` : text;
  return h(
    "span",
    { class: "shown", title: text.length > 400 ? text : null },
    h("span", { class: "text mono" }, cut),
    value.encoding && value.encoding !== "utf8" ? h("span", { class: "enc" }, value.encoding) : null,
  );
}

/** Bytes as the records and objects routes show them, `{text, base64}`. */
function blob(b) {
  if (b == null) return h("span", { class: "muted" }, "—");
  if (b.text != null) return shown({ encoding: "utf8", text: b.text });
  return shown({ encoding: "base64", text: b.base64 });
}

// ---------------------------------------------------------------- the API

/** JSON whose integers beyond 2^53 stay exact, as BigInts. */
function parseJSON(text) {
  return JSON.parse(text, (key, value, context) => {
    if (typeof value === "number" && !Number.isSafeInteger(value) && context && /^-?\d+$/.test(context.source)) {
      return BigInt(context.source);
    }
    return value;
  });
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function isAbort(e) {
  return e && e.name === "AbortError";
}

/** A request to the node; the answer, or an ApiError with the node's code and message. */
async function request(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", cache: "no-store", ...options });
  const text = await response.text();
  if (!response.ok) {
    let code = `http_${response.status}`;
    let message = text.trim() || response.statusText;
    try {
      const body = JSON.parse(text);
      if (body && body.error) ({ code, message } = body.error);
    } catch {
      // Not JSON: the text is the message.
    }
    if (response.status === 401) showLogin(message);
    throw new ApiError(response.status, code, message);
  }
  return { text, headers: response.headers, status: response.status };
}

async function getJSON(path, signal) {
  const answer = await request(path, { signal });
  return parseJSON(answer.text);
}

async function postJSON(path, body, signal) {
  const answer = await request(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal,
  });
  return answer.text ? parseJSON(answer.text) : null;
}

function errorBox(e) {
  if (e instanceof ApiError && e.status === 401) {
    return h("div", { class: "error", role: "alert" }, h("span", { class: "code" }, "401"), "Log in to see this page.");
  }
  if (e instanceof ApiError) {
    return h("div", { class: "error", role: "alert" }, h("span", { class: "code" }, `${e.status} ${e.code}`), e.message);
  }
  return h("div", { class: "error", role: "alert" }, String((e && e.message) || e));
}

// ---------------------------------------------------------------- the login

function showLogin(message) {
  const overlay = $("#login");
  const error = $("#login-error");
  const wasHidden = overlay.hidden;
  overlay.hidden = false;
  if (wasHidden) {
    error.hidden = true;
    $("#login-token").focus();
  }
  // The node's reason only when a saved token was refused: with none, asking is enough.
  if (wasHidden && localStorage.getItem("tally.cookie") === "1") {
    error.hidden = false;
    error.textContent = `The saved token was refused: ${message}`;
  }
}

async function login(event) {
  event.preventDefault();
  const error = $("#login-error");
  const input = $("#login-token");
  error.hidden = true;
  try {
    await request("/ui/login", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token: input.value.trim() }),
    });
  } catch (e) {
    error.hidden = false;
    error.textContent = e instanceof ApiError ? `${e.message} (${e.status} ${e.code})` : String(e);
    // A refused login is not the page's 401: the form stays.
    $("#login").hidden = false;
    return;
  }
  input.value = "";
  localStorage.setItem("tally.cookie", "1");
  $("#login").hidden = true;
  $("#logout").hidden = false;
  loadBooks();
  route();
}

async function logout() {
  try {
    await request("/ui/logout", { method: "POST" });
  } finally {
    localStorage.removeItem("tally.cookie");
    location.reload();
  }
}

// ---------------------------------------------------------------- pages and routing

/** What a shown page owns: its timers and requests, all stopped when it goes. */
class Page {
  constructor(params) {
    this.params = params;
    this.alive = true;
    this.timers = new Set();
    this.controller = new AbortController();
  }

  stop() {
    this.alive = false;
    for (const t of this.timers) clearTimeout(t);
    this.controller.abort();
  }

  get(path) {
    return getJSON(path, this.controller.signal);
  }

  post(path, body) {
    return postJSON(path, body, this.controller.signal);
  }

  /** `run` now and `ms` after each run ends, while the page is shown and no login is asked. */
  every(ms, run) {
    const tick = async () => {
      if (!this.alive) return;
      if ($("#login").hidden) await run();
      if (!this.alive) return;
      const t = setTimeout(() => {
        this.timers.delete(t);
        tick();
      }, ms);
      this.timers.add(t);
    };
    tick();
  }

  /** Fills `box` with what `make` returns, or the error it throws. */
  async fill(box, make) {
    box.replaceChildren(loading());
    try {
      const content = await make();
      if (this.alive) box.replaceChildren(...[content].flat().filter((c) => c != null));
    } catch (e) {
      if (this.alive && !isAbort(e)) box.replaceChildren(errorBox(e));
    }
  }

  book() {
    return bookOf(this.params);
  }
}

const PAGES = {
  functions: pageFunctions,
  function: pageFunction,
  invocations: pageInvocations,
  invocation: pageInvocation,
  logs: pageLogs,
  books: pageBooks,
  book: pageBook,
  tables: pageTables,
  objects: pageObjects,
  schedules: pageSchedules,
  health: pageHealth,
  sql: pageSql,
  audit: pageAudit,
};

/** The pages whose data are a book's. */
const BOOK_PAGES = new Set(["invocations", "tables", "objects", "book"]);

let shownPage = null;

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const at = raw.indexOf("?");
  const path = at < 0 ? raw : raw.slice(0, at);
  const params = new URLSearchParams(at < 0 ? "" : raw.slice(at + 1));
  let segments;
  try {
    segments = path.split("/").filter(Boolean).map(decodeURIComponent);
  } catch {
    segments = [];
  }
  return { segments, params };
}

/** The book a page is about: its `?book=`, else the one last chosen or shown. */
function bookOf(params) {
  const given = params && params.get("book");
  if (given != null && /^\d+$/.test(given)) return given;
  return localStorage.getItem("tally.book") || $("#book").value || "0";
}

function route() {
  const { segments, params } = parseHash();
  const name = segments[0] || "functions";
  const render = PAGES[name];
  if (shownPage) shownPage.stop();
  const page = new Page(params);
  shownPage = page;
  if (BOOK_PAGES.has(name) && params.get("book") != null) chooseBook(params.get("book"));
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("current", a.dataset.page === name || (name === "invocation" && a.dataset.page === "invocations") || (name === "function" && a.dataset.page === "functions") || (name === "book" && a.dataset.page === "books"));
  }
  const main = $("#main");
  main.replaceChildren();
  if (!render) {
    main.append(errorBox(new Error(`No page ${name}: pick one above.`)));
    return;
  }
  document.title = `${name[0].toUpperCase()}${name.slice(1)} · Tally`;
  render(page, main, segments.slice(1)).catch((e) => {
    if (page.alive && !isAbort(e)) main.append(errorBox(e));
  });
}

function head(title, subtitle, ...extra) {
  return h("div", { class: "page-head" }, h("div", null, h("h1", null, title), subtitle ? h("p", { class: "muted" }, subtitle) : null), ...extra);
}

// ---------------------------------------------------------------- the book picker

/** Shows `book` as the chosen one, and remembers it unless it is only a default. */
function chooseBook(book, remember = true) {
  if (remember) localStorage.setItem("tally.book", String(book));
  const select = $("#book");
  if (![...select.options].some((o) => o.value === String(book))) select.append(h("option", { value: book }, book));
  select.value = String(book);
  for (const a of document.querySelectorAll("#nav a[data-book]")) {
    a.setAttribute("href", hashOf([a.dataset.page], { book }));
  }
}

async function loadBooks() {
  const select = $("#book");
  let books = null;
  try {
    books = (await getJSON("/v1/books")).books.map(String);
  } catch {
    // Before a login, or a token that may not list books: a book is still picked by URL.
  }
  const saved = localStorage.getItem("tally.book");
  const chosen = saved || (books && books[0]) || "0";
  const options = books || [];
  if (!options.includes(chosen)) options.unshift(chosen);
  select.replaceChildren(...options.map((b) => h("option", { value: b }, b)));
  chooseBook(chosen, saved != null);
}

function bookChanged() {
  const book = $("#book").value;
  chooseBook(book);
  const { segments } = parseHash();
  const name = segments[0] || "functions";
  if (BOOK_PAGES.has(name)) {
    if (name === "book") location.hash = hashOf(["book", book]);
    else location.hash = hashOf([name], { book });
  }
}

// ---------------------------------------------------------------- widgets

const PART_COLORS = {
  queue: "#98a2b3",
  instantiate: "#7a6bd1",
  guest: "#2e9d6b",
  "host-state": "#e19c35",
  "host-log": "#d27a2c",
  "host-objects": "#c9a227",
  log: "#4a7fd4",
  store: "#c4527a",
  platform: "#4fb0c6",
  children: "#8b6b4d",
  outgoing: "#a44fbd",
};
const PALETTE = ["#4a7fd4", "#2e9d6b", "#e19c35", "#c4527a", "#7a6bd1", "#4fb0c6", "#8b6b4d", "#a44fbd", "#d27a2c", "#5f7d2e"];

/** Outcomes: `ok` green, every other one a warm colour. */
const OUTCOME_COLORS = ["#c8312b", "#e19c35", "#a44fbd", "#c4527a", "#8b6b4d"];

function outcomeColor(name, i) {
  return name === "ok" ? "#2e9d6b" : OUTCOME_COLORS[i % OUTCOME_COLORS.length];
}

function colorOf(name, i) {
  if (PART_COLORS[name]) return PART_COLORS[name];
  let hash = 0;
  for (const c of String(name)) hash = (hash * 31 + c.charCodeAt(0)) >>> 0;
  return PALETTE[(i ?? hash) % PALETTE.length];
}

/** The parts of a breakdown (`{part: microseconds}`), largest first. */
function partsOf(breakdown) {
  return Object.entries(breakdown || {})
    .map(([part, us]) => ({ part, us: Number(us) }))
    .filter((p) => p.us > 0)
    .sort((a, b) => b.us - a.us);
}

/** A stacked bar of where an invocation's time went, each part named with its ms. */
function breakdownBar(breakdown) {
  const parts = partsOf(breakdown);
  const box = h("div", { class: "breakdown" });
  if (parts.length === 0) {
    box.append(h("p", { class: "muted" }, "No breakdown was kept for this invocation (it has not ended, or a node older than the breakdown ran it)."));
    return box;
  }
  const total = parts.reduce((sum, p) => sum + p.us, 0);
  const width = 1000;
  const bar = svg("svg", { viewBox: `0 0 ${width} 34`, preserveAspectRatio: "none", role: "img", "aria-label": "breakdown" });
  let x = 0;
  for (const p of parts) {
    const w = (p.us / total) * width;
    bar.append(svg("rect", { x, y: 0, width: Math.max(w, 0.5), height: 34, fill: colorOf(p.part) }, svg("title", null, `${p.part}: ${fmtMs(p.us / 1000)}`)));
    x += w;
  }
  box.append(bar);
  box.append(
    h(
      "div",
      { class: "legend" },
      parts.map((p) =>
        h(
          "span",
          { class: "part", "data-part": p.part },
          h("span", { class: "swatch", "data-color": colorOf(p.part) }),
          h("span", { class: "name" }, p.part),
          h("span", { class: "ms" }, `${fmtMs(p.us / 1000)} · ${Math.round((p.us / total) * 100)}%`),
        ),
      ),
      h("span", { class: "part total" }, h("span", { class: "name" }, "total"), h("span", { class: "ms" }, fmtMs(total / 1000))),
    ),
  );
  paintSwatches(box);
  return box;
}

/** Swatches take their colour through the CSSOM (the CSP refuses style attributes). */
function paintSwatches(root) {
  for (const s of root.querySelectorAll(".swatch[data-color]")) s.style.background = s.dataset.color;
}

/** A small bar of a breakdown, for a row of a list. */
function miniBar(breakdown) {
  const parts = partsOf(breakdown);
  if (parts.length === 0) return null;
  const total = parts.reduce((sum, p) => sum + p.us, 0);
  const bar = svg("svg", { class: "mini", viewBox: "0 0 140 10", preserveAspectRatio: "none" });
  let x = 0;
  for (const p of parts) {
    const w = (p.us / total) * 140;
    bar.append(svg("rect", { x, y: 0, width: Math.max(w, 0.5), height: 10, fill: colorOf(p.part) }, svg("title", null, `${p.part}: ${fmtMs(p.us / 1000)}`)));
    x += w;
  }
  bar.append(svg("title", null, parts.map((p) => `${p.part} ${fmtMs(p.us / 1000)}`).join(", ")));
  return bar;
}

/** A rounded-up axis maximum, 1, 2 or 5 times a power of ten, and how many round steps divide it. */
function niceMax(value, floor) {
  const v = Math.max(value, floor);
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5]) if (v <= m * p * 1.0000001) return { max: m * p, steps: m === 2 ? 4 : 5 };
  return { max: 10 * p, steps: 5 };
}

/**
 * A line chart over the last `spanMs` of time: `series` maps a name to points
 * `{t, v}` (`v` null for a gap), drawn into `host` with a legend of the last values.
 */
function lineChart(host, { series, spanMs, now, unit, format, floor, color = (name, i) => colorOf(name, PART_COLORS[name] ? undefined : i) }) {
  const W = Math.max(360, Math.round(host.clientWidth || 640));
  const H = 220;
  const m = { l: 52, r: 14, t: 12, b: 26 };
  let top = 0;
  for (const points of series.values()) for (const p of points) if (p.v != null) top = Math.max(top, p.v);
  const { max: yMax, steps } = niceMax(top, floor);
  const x = (t) => m.l + ((t - (now - spanMs)) / spanMs) * (W - m.l - m.r);
  const y = (v) => H - m.b - (v / yMax) * (H - m.t - m.b);
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": unit });
  for (let i = 0; i <= steps; i++) {
    const v = (yMax * i) / steps;
    chart.append(svg("line", { x1: m.l, x2: W - m.r, y1: y(v), y2: y(v), stroke: i === 0 ? "#cfd4db" : "#eceff3", "stroke-width": 1 }));
    chart.append(svg("text", { x: m.l - 6, y: y(v) + 4, "text-anchor": "end" }, format(v)));
  }
  const minutes = Math.round(spanMs / 60e3);
  for (let i = 0; i <= minutes; i++) {
    const t = now - spanMs + i * 60e3;
    const label = i === minutes ? "now" : `−${minutes - i} min`;
    chart.append(svg("text", { x: x(t), y: H - 8, "text-anchor": i === 0 ? "start" : i === minutes ? "end" : "middle" }, label));
  }
  let i = 0;
  for (const [name, points] of series) {
    const stroke = color(name, i);
    i++;
    let d = "";
    let pen = false;
    for (const p of points) {
      if (p.v == null || p.t < now - spanMs) {
        pen = false;
        continue;
      }
      d += `${pen ? "L" : "M"}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`;
      pen = true;
    }
    if (d) chart.append(svg("path", { d, fill: "none", stroke, "stroke-width": 2, "stroke-linejoin": "round", class: "series", "data-series": name }));
    const last = points[points.length - 1];
    if (last && last.v != null) chart.append(svg("circle", { cx: x(last.t), cy: y(last.v), r: 3, fill: stroke }));
  }
  const legend = h("div", { class: "legend" });
  i = 0;
  for (const [name, points] of series) {
    const swatch = color(name, i);
    i++;
    const last = points[points.length - 1];
    legend.append(
      h("span", { class: "part", "data-series": name }, h("span", { class: "swatch", "data-color": swatch }), h("span", { class: "name" }, name), h("span", { class: "ms" }, last && last.v != null ? format(last.v) : "—")),
    );
  }
  if (series.size === 0) legend.append(h("span", { class: "muted" }, "No data yet: the chart fills as the node works."));
  paintSwatches(legend);
  host.replaceChildren(chart, legend);
}

function statusBadge(status) {
  return badge(status || "unknown", status || "");
}

function factList(pairs) {
  return h("dl", { class: "facts" }, pairs.filter(Boolean).map(([k, v]) => [h("dt", null, k), h("dd", null, v == null ? "—" : v)]));
}

function invocationLink(id, book, text) {
  return link(text || String(id), ["invocation", id], { book }, { class: "mono" });
}

// ---------------------------------------------------------------- Functions

async function pageFunctions(p, main) {
  main.append(head("Functions", "Deployed functions, their current versions and limits."));
  const box = h("div", { class: "card flush" });
  main.append(box);
  await p.fill(box, async () => {
    const { functions } = await p.get("/v1/functions");
    if (functions.length === 0) return empty("No functions yet: deploy one with `tally deploy` or PUT /v1/functions/{name}.");
    const rows = functions.map((f) => {
      const c = f.current || {};
      const tables = Object.entries(c.tables || {}).map(([t, proto]) => h("span", { class: "chip" }, `${t}: ${proto}`));
      return h(
        "tr",
        { class: "function", "data-name": f.name },
        h("td", { class: "name" }, link(f.name, ["function", f.name], null, { class: "mono" })),
        h("td", { class: "num" }, c.version ?? "—"),
        h("td", { class: "num" }, (f.versions || []).length),
        h("td", { class: "num" }, fmtBytes(c.size_bytes)),
        h("td", null, (c.routes || []).length ? (c.routes || []).map((r) => h("span", { class: "chip" }, r)) : h("span", { class: "muted" }, "—")),
        h("td", null, tables.length ? tables : h("span", { class: "muted" }, "—")),
        h("td", null, c.public ? badge("public", "info") : h("span", { class: "muted" }, "needs a token")),
        h("td", { class: "nowrap" }, timeCell(c.deployed_at_ms), h("span", { class: "muted" }, ` by ${c.deployed_by ?? "?"}`)),
        h("td", { class: "nowrap" }, link("invocations", ["invocations"], { book: p.book(), function: f.name }), " · ", link("logs", ["logs"], { function: f.name })),
      );
    });
    return h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { id: "functions" },
        h("thead", null, h("tr", null, ["Name", "Version", "Versions", "Size", "Routes", "Tables", "Access", "Deployed", ""].map((c, i) => h("th", { class: [1, 2, 3].includes(i) ? "num" : null }, c)))),
        h("tbody", null, rows),
      ),
    );
  });
}

async function pageFunction(p, main, [name]) {
  main.append(head(name || "?", "A function: its versions, limits, routes and settings.", h("div", { class: "row" }, link("Invocations", ["invocations"], { book: p.book(), function: name }), link("Logs", ["logs"], { function: name }))));
  const top = h("div", { class: "grid" });
  const versions = h("div", { class: "card flush" });
  main.append(top, versions);
  const [info, config] = await Promise.allSettled([p.get(`/v1/functions/${encodeURIComponent(name)}`), p.get(`/v1/functions/${encodeURIComponent(name)}/config`)]);
  if (info.status === "rejected") throw info.reason;
  const f = info.value;
  const c = f.current || {};
  const limits = c.limits || {};
  top.append(
    h(
      "div",
      { class: "card" },
      h("h2", null, `Version ${c.version ?? "—"}`),
      factList([
        ["sha256", h("span", { class: "mono" }, c.sha256)],
        ["size", fmtBytes(c.size_bytes)],
        ["deployed", [fmtTime(c.deployed_at_ms), h("span", { class: "muted" }, ` by ${c.deployed_by ?? "?"}`)]],
        ["access", c.public ? "public (no token)" : "a token that may invoke it"],
        ["routes", (c.routes || []).length ? c.routes.map((r) => h("span", { class: "chip" }, r)) : "—"],
        ["requests out", (c.outbound || []).length ? c.outbound.map((r) => h("span", { class: "chip" }, typeof r === "string" ? r : JSON.stringify(r))) : "none"],
        ["tables", Object.keys(c.tables || {}).length ? Object.entries(c.tables).map(([t, proto]) => h("span", { class: "chip" }, `${t}: ${proto}`)) : "—"],
      ]),
    ),
    h(
      "div",
      { class: "card" },
      h("h2", null, "Limits"),
      factList([
        ["memory", fmtBytes(limits.memory_bytes)],
        ["timeout", fmtSpan(limits.timeout_ms)],
        ["request at most", fmtBytes(limits.request_bytes_max)],
        ["response at most", fmtBytes(limits.response_bytes_max)],
        ["concurrency", limits.concurrency_max],
        ["retries", limits.retry_attempts],
        ["backoff", `${fmtSpan(limits.retry_backoff_ms)} to ${fmtSpan(limits.retry_backoff_max_ms)}`],
      ]),
    ),
    h(
      "div",
      { class: "card" },
      h("h2", null, "Settings"),
      config.status === "rejected"
        ? errorBox(config.reason)
        : config.value.settings.length === 0
          ? h("p", { class: "muted" }, "No settings.")
          : factList(config.value.settings.map((s) => [h("span", { class: "mono" }, s.key), s.secret ? badge("secret, hidden", "paused") : h("span", { class: "mono" }, s.value ?? "")])),
    ),
  );
  versions.append(
    h("h2", null, "Versions"),
    h(
      "div",
      { class: "scroll" },
      h(
        "table",
        null,
        h("thead", null, h("tr", null, ["Version", "sha256", "Size", "Deployed", "By", "Seqnum"].map((t) => h("th", null, t)))),
        h(
          "tbody",
          null,
          [...(f.versions || [])].reverse().map((v) =>
            h("tr", null, h("td", { class: "num" }, v.version), h("td", { class: "mono" }, String(v.sha256).slice(0, 16)), h("td", null, fmtBytes(v.size_bytes)), h("td", null, timeCell(v.deployed_at_ms)), h("td", null, v.deployed_by ?? "—"), h("td", null, seqCell(v.seqnum))),
          ),
        ),
      ),
    ),
  );
}

// ---------------------------------------------------------------- Invocations

const STATUSES = ["running", "sleeping", "succeeded", "failed"];

/** A filter form over `fields`, whose submission navigates to `page` with its values. */
function filterForm(page, params, fields, extra) {
  const form = h("form", { class: "filters card" });
  for (const f of fields) {
    let input;
    if (f.options) {
      input = h("select", { name: f.name }, h("option", { value: "" }, f.any || "any"), f.options.map((o) => h("option", { value: o }, o)));
    } else {
      input = h("input", { name: f.name, class: f.size || "mid", placeholder: f.placeholder || "", type: f.type || "text", autocomplete: "off" });
    }
    input.value = params.get(f.name) || f.value || "";
    form.append(h("label", null, f.label, input));
  }
  appendAll(form, [h("button", { type: "submit" }, "Show"), extra]);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const query = {};
    for (const f of fields) {
      const v = form.elements[f.name].value.trim();
      if (v) query[f.name] = v;
    }
    const target = hashOf([page].flat(), query);
    if (location.hash === target) route();
    else location.hash = target;
  });
  return form;
}

/** `datetime-local` text as milliseconds since the epoch. */
function msOf(text) {
  if (!text) return null;
  if (/^\d+$/.test(text)) return text;
  const t = Date.parse(text);
  return Number.isNaN(t) ? null : String(t);
}

async function pageInvocations(p, main) {
  const book = p.book();
  main.append(head(`Invocations of book ${book}`, "Root invocations, the newest first (or the oldest), with their times and where their time went."));
  let names = [];
  try {
    names = (await p.get("/v1/functions")).functions.map((f) => f.name);
  } catch {
    // A scoped token lists no functions; the filter takes a typed name too.
  }
  const fn = p.params.get("function");
  if (fn && !names.includes(fn)) names.push(fn);
  main.append(
    filterForm("invocations", p.params, [
      { name: "book", label: "Book", size: "narrow", value: book },
      { name: "function", label: "Function", options: names },
      { name: "status", label: "Status", options: STATUSES },
      { name: "key", label: "Key or idempotency key", size: "mid" },
      { name: "since", label: "Started after", type: "datetime-local" },
      { name: "until", label: "Started before", type: "datetime-local" },
      { name: "min_ms", label: "At least (ms)", size: "narrow" },
      { name: "max_ms", label: "At most (ms)", size: "narrow" },
      { name: "order", label: "Order", options: ["oldest"], any: "newest first" },
    ]),
  );
  const box = h("div", { class: "card flush" });
  main.append(box);
  // Newest first unless asked otherwise: a page's `next` goes back (`before`) then.
  const oldest = p.params.get("order") === "oldest";
  const query = new URLSearchParams({ book, limit: "100", order: oldest ? "oldest" : "newest" });
  for (const k of ["function", "status", "key", "min_ms", "max_ms"]) if (p.params.get(k)) query.set(k, p.params.get(k));
  const since = msOf(p.params.get("since"));
  const until = msOf(p.params.get("until"));
  if (since) query.set("since_ms", since);
  if (until) query.set("until_ms", until);
  const tbody = h("tbody");
  const more = h("button", { type: "button", class: "ghost", hidden: true }, "Load more");
  const count = h("span", { class: "muted small" });
  let after = null;
  let shown = 0;
  const load = async () => {
    if (after != null) query.set(oldest ? "after" : "before", String(after));
    const page = await p.get(`/v1/invocations?${query}`);
    for (const inv of page.invocations) tbody.append(invocationRow(inv, book));
    shown += page.invocations.length;
    after = page.next;
    more.hidden = page.next == null;
    count.textContent = `${shown} shown${page.next == null ? "" : ", more to load"}`;
    return page;
  };
  more.addEventListener("click", () => load().catch((e) => box.append(errorBox(e))));
  await p.fill(box, async () => {
    const page = await load();
    if (page.invocations.length === 0) return empty("No invocation matches.");
    return [
      h(
        "div",
        { class: "scroll" },
        h(
          "table",
          { id: "invocations" },
          h("thead", null, h("tr", null, ["Started", "Function", "Status", "Duration", "Breakdown", "Key", "Invocation", "Trace"].map((t) => h("th", { class: t === "Duration" ? "num" : null }, t)))),
          tbody,
        ),
      ),
      h("div", { class: "row card-foot" }, more, count),
    ];
  });
}

function invocationRow(inv, book) {
  return h(
    "tr",
    { class: "invocation", "data-id": inv.invocation_id },
    h("td", { class: "nowrap" }, timeCell(inv.started_at_ms)),
    h("td", null, link(inv.function ?? "?", ["function", inv.function ?? ""], null, { class: "mono" })),
    h("td", null, statusBadge(inv.status), inv.error_code ? h("span", { class: "muted small" }, ` ${inv.error_code}`) : null, inv.wake_at_ms != null ? h("span", { class: "muted small" }, ` wakes ${fmtAgo(inv.wake_at_ms)}`) : null),
    h("td", { class: "num" }, inv.duration_ms != null ? fmtMs(inv.duration_ms) : "—"),
    h("td", null, miniBar(inv.breakdown_us)),
    h("td", { class: "mono" }, inv.key ?? ""),
    h("td", null, invocationLink(inv.invocation_id, book)),
    h("td", { class: "mono muted small" }, inv.trace_id ? String(inv.trace_id).slice(0, 16) : "—"),
  );
}

// ---------------------------------------------------------------- one invocation

const STEP_COLORS = { init: "#98a2b3", read: "#4a7fd4", put: "#2e9d6b", delete: "#c4527a", call: "#7a6bd1", result: "#161b26" };

async function pageInvocation(p, main, [id]) {
  const book = p.book();
  const parent = id && id.includes("/") ? id.slice(0, id.lastIndexOf("/")) : null;
  main.append(
    head(
      "Invocation",
      h("span", null, h("span", { class: "mono", id: "invocation-id" }, id), h("span", { class: "muted" }, ` on book ${book}`), parent ? [h("span", { class: "muted" }, " · child of "), invocationLink(parent, book)] : null),
      link("All invocations", ["invocations"], { book }),
    ),
  );
  const summary = h("div", { class: "card" });
  const breakdown = h("div", { class: "card", id: "breakdown" });
  const steps = h("div", { class: "card flush", id: "steps" });
  main.append(h("div", { class: "grid" }, summary, breakdown), steps);
  const base = `/v1/invocations/${encodeURIComponent(id)}`;
  // The status route knows root invocations only: a child's status is its steps'.
  const statusOf = parent ? Promise.resolve(null) : p.get(`${base}?book=${book}`);
  const [statusResult, first] = await Promise.allSettled([statusOf, p.get(`${base}/steps?book=${book}&limit=1000`)]);
  if (first.status === "rejected") {
    summary.append(errorBox(first.reason));
    breakdown.remove();
    steps.remove();
    return;
  }
  const page = first.value;
  const all = [...page.steps];
  let next = page.next;
  while (next != null && all.length < 10000 && p.alive) {
    const more = await p.get(`${base}/steps?book=${book}&limit=1000&after=${next}`);
    all.push(...more.steps);
    next = more.next;
  }
  const status = statusResult.status === "fulfilled" ? statusResult.value : null;
  const init = all.find((s) => s.kind === "init");
  const result = all.find((s) => s.kind === "result");
  const attempts = all.reduce((m, s) => Math.max(m, Number(s.attempt || 0)), 0);
  const derived = status ? status.status : result ? (result.error ? "failed" : "succeeded") : "running";
  const output = status && status.output ? blob(status.output) : result ? shown(result.value) : null;
  const duration = page.started_at_ms != null && page.ended_at_ms != null ? Number(page.ended_at_ms) - Number(page.started_at_ms) : null;
  summary.append(
    h("h2", null, "Summary ", statusBadge(derived)),
    factList([
      ["function", init && init.function ? link(init.function, ["function", init.function], null, { class: "mono" }) : "—"],
      ["input", init ? shown(init.value) : "—"],
      ["output", output],
      status && status.error ? ["error", h("span", { class: "mono" }, `${status.error.code}: ${status.error.message}`)] : result && result.error ? ["error", h("span", { class: "mono" }, result.error)] : null,
      status && status.wake_at_ms !== undefined ? ["wakes", status.wake_at_ms == null ? "when its promise completes" : `${fmtTime(status.wake_at_ms)} (${fmtAgo(status.wake_at_ms)})`] : null,
      ["started", fmtTime(page.started_at_ms)],
      ["ended", fmtTime(page.ended_at_ms)],
      ["duration", duration == null ? "—" : fmtMs(duration)],
      ["attempts", attempts || "—"],
      ["trace", page.trace_id ? h("span", { class: "mono" }, page.trace_id) : "—"],
    ]),
  );
  breakdown.append(h("h2", null, "Where the time went"), breakdownBar(page.breakdown_us));
  steps.append(h("h2", null, `Steps (${all.length})`), all.length ? stepTable(all, book) : empty("No step logged yet."));
}

/** The steps, one row each, with a timeline cell that places each step's seqnum on an axis. */
function stepTable(steps, book) {
  const seqs = steps.map((s) => BigInt(s.seqnum));
  const lo = seqs.reduce((a, b) => (b < a ? b : a));
  const hi = seqs.reduce((a, b) => (b > a ? b : a));
  const span = Number(hi - lo);
  const W = 240;
  const pad = 10;
  const xOf = (seq) => (span === 0 ? W / 2 : pad + (Number(BigInt(seq) - lo) / span) * (W - 2 * pad));
  const axis = svg(
    "svg",
    { viewBox: `0 0 ${W} 22`, role: "img", "aria-label": "seqnum axis" },
    svg("line", { x1: pad, x2: W - pad, y1: 16, y2: 16, stroke: "#cfd4db" }),
    span === 0
      ? svg("text", { x: W / 2, y: 11, "text-anchor": "middle" }, `seqnum ${fmtSeq(lo)}`)
      : [svg("text", { x: pad, y: 11, "text-anchor": "start" }, fmtSeq(lo)), svg("text", { x: W - pad, y: 11, "text-anchor": "end" }, fmtSeq(hi))],
  );
  const cols = ["Step", "Kind", "Table", "Key", "Protocol", "Value", "Child", "Attempt", "Seqnum"];
  const rows = steps.map((s) => {
    const x = xOf(s.seqnum);
    const color = STEP_COLORS[s.kind] || "#7a6bd1";
    const dot = svg(
      "svg",
      { viewBox: `0 0 ${W} 22` },
      svg("line", { x1: pad, x2: W - pad, y1: 11, y2: 11, stroke: "#eceff3" }),
      svg("circle", { cx: x, cy: 11, r: 5, fill: color }, svg("title", null, `${s.kind} at seqnum ${fmtSeq(s.seqnum)}`)),
    );
    return h(
      "tr",
      { class: `step${s.error ? " failed-step" : ""}`, "data-step": s.step, title: s.detail || null },
      h("td", { class: "num" }, s.step),
      h("td", { class: "kind" }, s.kind),
      h("td", { class: "table mono" }, s.table ?? ""),
      h("td", { class: "key" }, s.key ? shown(s.key) : ""),
      h("td", { class: "protocol" }, s.protocol ? badge(s.protocol, "proto") : ""),
      h("td", { class: "value" }, s.error ? h("span", { class: "badge failed" }, s.error) : s.value ? shown(s.value) : s.detail ? h("span", { class: "muted small" }, s.detail) : ""),
      h("td", { class: "child" }, s.child ? [invocationLink(s.child, book), s.function ? h("span", { class: "muted small" }, ` ${s.function}`) : null] : s.kind === "call" && s.function ? h("span", { class: "muted" }, s.function) : ""),
      h("td", { class: "num" }, s.attempt ?? ""),
      h("td", { class: "seq" }, seqCell(s.seqnum)),
      h("td", { class: "timeline" }, dot),
    );
  });
  return h(
    "div",
    { class: "scroll" },
    h("table", { id: "step-table" }, h("thead", null, h("tr", null, cols.map((c) => h("th", { class: c === "Step" || c === "Attempt" ? "num" : null }, c)), h("th", { class: "timeline" }, axis))), h("tbody", null, rows)),
  );
}

// ---------------------------------------------------------------- Logs

async function pageLogs(p, main) {
  main.append(head("Logs", "What functions printed on this node, newest first, followed as it comes."));
  let names = [];
  try {
    names = (await p.get("/v1/functions")).functions.map((f) => f.name);
  } catch {
    // Typed names still filter.
  }
  const follow = h("input", { type: "checkbox", checked: true, id: "logs-follow" });
  main.append(
    filterForm(
      "logs",
      p.params,
      [
        { name: "function", label: "Function", options: names },
        { name: "id", label: "Invocation", size: "wide" },
      ],
      h("label", { class: "check" }, follow, "Follow"),
    ),
  );
  const status = h("div", { class: "status-line" });
  const box = h("div", { class: "card flush" });
  main.append(box, status);
  const query = new URLSearchParams({ limit: "1000" });
  for (const k of ["function", "id"]) if (p.params.get(k)) query.set(k, p.params.get(k));
  const tbody = h("tbody");
  const KEEP = 500;
  let after = null;
  const add = (entries, fresh) => {
    for (const e of entries) {
      const row = h(
        "tr",
        { class: `log${fresh ? " fresh" : ""}` },
        h("td", { class: "nowrap" }, timeCell(e.at_ms)),
        h("td", null, link(e.function, ["function", e.function], null, { class: "mono" }), h("span", { class: "muted small" }, ` v${e.version}`)),
        h("td", null, invocationLink(e.id, e.book), e.attempt > 1 ? h("span", { class: "muted small" }, ` attempt ${e.attempt}`) : null),
        h("td", null, badge(e.stream, e.stream)),
        h("td", { class: "line wrap mono" }, e.line),
      );
      tbody.prepend(row);
    }
    while (tbody.children.length > KEEP) tbody.lastChild.remove();
  };
  const table = h("div", { class: "scroll" }, h("table", { id: "logs" }, h("thead", null, h("tr", null, ["Time", "Function", "Invocation", "Stream", "Line"].map((t) => h("th", null, t)))), tbody));
  const none = empty("Nothing printed yet.");
  await p.fill(box, async () => {
    // Pages until the end, so that the newest lines are the ones shown.
    for (let i = 0; i < 50; i++) {
      if (after != null) query.set("after", String(after));
      const page = await p.get(`/v1/logs?${query}`);
      add(page.entries, false);
      after = page.next;
      if (page.entries.length < 1000) break;
    }
    return [table, tbody.children.length ? null : none];
  });
  p.every(1000, async () => {
    if (!follow.checked || after == null) {
      status.replaceChildren(h("span", { class: "live-dot off" }), "paused");
      return;
    }
    try {
      query.set("after", String(after));
      const page = await p.get(`/v1/logs?${query}`);
      if (page.entries.length) none.remove();
      add(page.entries, true);
      after = page.next;
      status.replaceChildren(h("span", { class: "live-dot on" }), `following · polled ${fmtShort(Date.now())} · ${tbody.children.length} lines shown`);
    } catch (e) {
      if (!isAbort(e)) status.replaceChildren(errorBox(e));
    }
  });
}

// ---------------------------------------------------------------- Books

async function pageBooks(p, main) {
  main.append(head("Books", "The books exactly-once invocations used, with their state tables."));
  const box = h("div", { class: "card flush" });
  main.append(box);
  await p.fill(box, async () => {
    const { books } = await p.get("/v1/books");
    if (books.length === 0) return empty("No book used yet: invoke a function with ?book=N.");
    const tables = await Promise.allSettled(books.slice(0, 100).map((b) => p.get(`/v1/books/${b}/tables`)));
    const rows = books.map((b, i) => {
      const t = tables[i];
      const cell =
        t == null
          ? h("span", { class: "muted" }, "…")
          : t.status === "rejected"
            ? h("span", { class: "muted" }, t.reason.message)
            : t.value.tables.length
              ? t.value.tables.map((x) => h("span", { class: "chip" }, `${x.table}: ${x.protocol ?? "?"}${x.switching ? " (switching)" : ""}`))
              : h("span", { class: "muted" }, "none");
      return h(
        "tr",
        { class: "book" },
        h("td", { class: "num" }, link(String(b), ["book", b])),
        h("td", null, cell),
        h("td", { class: "nowrap" }, link("records", ["book", b]), " · ", link("invocations", ["invocations"], { book: b }), " · ", link("tables", ["tables"], { book: b }), " · ", link("objects", ["objects"], { book: b })),
      );
    });
    return h("div", { class: "scroll" }, h("table", { id: "books" }, h("thead", null, h("tr", null, h("th", { class: "num" }, "Book"), h("th", null, "Tables"), h("th", null, ""))), h("tbody", null, rows)));
  });
}

async function pageBook(p, main, [bookId]) {
  const book = bookId && /^\d+$/.test(bookId) ? bookId : p.book();
  chooseBook(book);
  main.append(head(`Book ${book}`, "Its records, by tag (a name, hashed as the SDKs do, or a number), tailed live.", h("div", { class: "row" }, link("Invocations", ["invocations"], { book }), link("Tables", ["tables"], { book }), link("Objects", ["objects"], { book }))));
  const follow = h("input", { type: "checkbox", checked: true, id: "tail-follow" });
  const form = filterForm(
    ["book", book],
    p.params,
    [
      { name: "tag", label: "Tag (blank: every record)", size: "mid", placeholder: "orders or 42" },
      { name: "from", label: "From seqnum", size: "mid", placeholder: "0" },
    ],
    h("label", { class: "check" }, follow, "Live tail"),
  );
  main.append(form);
  const status = h("div", { class: "status-line", id: "tail-status" });
  const box = h("div", { class: "card flush" });
  main.append(box, status);
  const tag = p.params.get("tag");
  const query = new URLSearchParams({ limit: "1000" });
  if (tag) query.set("tag", tag);
  let cursor = /^\d+$/.test(p.params.get("from") || "") ? BigInt(p.params.get("from")) : 0n;
  const tbody = h("tbody");
  const KEEP = 500;
  let count = 0;
  const chip = (t) =>
    h(
      "button",
      { type: "button", class: "chip", title: "show this tag's records" },
      String(t),
    );
  const add = (records, fresh) => {
    for (const r of records) {
      const tags = (r.tags || []).map((t) => {
        const c = chip(t);
        c.addEventListener("click", () => {
          location.hash = hashOf(["book", book], { tag: String(t) });
        });
        return c;
      });
      tbody.prepend(h("tr", { class: `record${fresh ? " fresh" : ""}` }, h("td", null, seqCell(r.seqnum)), h("td", null, tags), h("td", { class: "data wrap" }, blob(r.data)), h("td", { class: "wrap" }, blob(r.aux))));
      count++;
    }
    while (tbody.children.length > KEEP) tbody.lastChild.remove();
  };
  /** One page from the cursor; the cursor moves past it. */
  const read = async (fresh) => {
    query.set("from", String(cursor));
    const page = await p.get(`/v1/books/${book}/records?${query}`);
    add(page.records, fresh);
    const last = page.records[page.records.length - 1];
    // `next` is null at the end of the stream: the tail goes on after the last record.
    if (page.next != null) cursor = BigInt(page.next);
    else if (last) cursor = BigInt(last.seqnum) + 1n;
    return page;
  };
  const table = h("div", { class: "scroll" }, h("table", { id: "records" }, h("thead", null, h("tr", null, ["Seqnum", "Tags", "Data", "Aux data"].map((t) => h("th", null, t)))), tbody));
  const none = empty(tag ? `No record of tag ${tag} yet.` : "No record yet.");
  await p.fill(box, async () => {
    for (let i = 0; i < 50; i++) {
      const page = await read(false);
      if (page.next == null) break;
    }
    return [table, count ? null : none];
  });
  p.every(1000, async () => {
    if (!follow.checked) {
      status.replaceChildren(h("span", { class: "live-dot off" }), "tail paused");
      return;
    }
    try {
      const page = await read(true);
      if (page.records.length) none.remove();
      status.replaceChildren(h("span", { class: "live-dot on" }), `tailing from seqnum ${fmtSeq(cursor)} · polled ${fmtShort(Date.now())} · ${count} records read`);
    } catch (e) {
      if (!isAbort(e)) status.replaceChildren(errorBox(e));
    }
  });
}

// ---------------------------------------------------------------- Tables

function transition(t) {
  if (t.begin) {
    return h("li", { class: "begin" }, h("strong", null, `switch ${t.begin.from} → ${t.begin.to} began`), t.auto ? badge("auto", "info") : null, h("div", { class: "muted small" }, "at seqnum ", seqCell(t.seqnum)));
  }
  return h("li", { class: "end" }, h("strong", null, `${t.end}`), " from here on ", t.auto ? badge("auto", "info") : null, h("div", { class: "muted small" }, "at seqnum ", seqCell(t.seqnum)));
}

async function pageTables(p, main) {
  const book = p.book();
  main.append(head(`Tables of book ${book}`, "Each state table's protocol, and every switch between protocols."));
  const box = h("div", { id: "tables" });
  main.append(box);
  await p.fill(box, async () => {
    const { tables } = await p.get(`/v1/books/${book}/tables`);
    if (tables.length === 0) return h("div", { class: "card" }, empty(`Book ${book} has no state table yet.`));
    const details = await Promise.allSettled(tables.map((t) => p.get(`/v1/books/${book}/tables/${encodeURIComponent(t.table)}`)));
    return h(
      "div",
      { class: "grid" },
      tables.map((t, i) => {
        const d = details[i];
        const history = d.status === "rejected" ? errorBox(d.reason) : (d.value.history || []).length ? h("ol", { class: "history" }, d.value.history.map(transition)) : h("p", { class: "muted" }, "No switch.");
        return h(
          "div",
          { class: "card table-card", "data-table": t.table },
          h("h2", null, h("span", { class: "mono" }, t.table), " ", t.protocol ? badge(t.protocol, "proto") : badge("unused"), " ", t.auto ? badge("auto", "info") : null, " ", t.switching ? badge(`switching ${t.switching.from} → ${t.switching.to}`, "switching") : null),
          h("h3", null, "History"),
          history,
        );
      }),
    );
  });
}

// ---------------------------------------------------------------- Objects, queues, locks

/** The names in a one-column SQL answer (`SELECT name ...`). */
async function listNames(p, sql) {
  const answer = await p.post("/v1/sql", { sql });
  const at = Math.max(0, (answer.columns || []).indexOf("name"));
  return { names: (answer.rows || []).map((r) => String(r[at])), truncated: !!answer.truncated };
}

async function pageObjects(p, main) {
  const book = p.book();
  main.append(head(`Objects and queues of book ${book}`, "Durable objects, queues and locks: listed through SQL, looked up by name."));
  const lookups = h("div");
  const value = h("div", { class: "card", id: "lookup" }, h("p", { class: "muted" }, "Pick a name above, or type one."));
  const objects = h("div", { class: "card", id: "object-list" });
  const queues = h("div", { class: "card", id: "queue-list" });
  main.append(h("div", { class: "grid" }, objects, queues), lookups, value);

  const show = async (kind, name, path) => {
    const url = `/v1/books/${book}/${kind}/${encodeURIComponent(name)}${kind === "objects" && path ? `?path=${encodeURIComponent(path)}` : ""}`;
    await p.fill(value, async () => {
      const v = await p.get(url);
      const title = h("h2", null, `${{ objects: "Object", queues: "Queue", locks: "Lock" }[kind]} `, h("span", { class: "mono" }, name), path ? h("span", { class: "muted" }, ` at ${path}`) : null);
      if (kind === "objects") {
        return [title, v.exists ? null : h("p", { class: "muted" }, "No such object (or nothing at that path)."), h("pre", { class: "json" }, JSON.stringify(v.value, jsonBig, 2))];
      }
      if (kind === "queues") {
        const rows = (v.shards || []).map((sh) => h("tr", null, h("td", { class: "num" }, sh.shard), h("td", { class: "num" }, fmtCount(sh.pending)), h("td", null, sh.oldest == null ? "—" : seqCell(sh.oldest))));
        const shards = h("table", { class: "shards" }, h("thead", null, h("tr", null, h("th", { class: "num" }, "Shard"), h("th", { class: "num" }, "Waiting"), h("th", null, "Oldest message"))), h("tbody", null, rows));
        return [title, factList([["waiting", fmtCount(v.pending)]]), rows.length ? h("div", { class: "scroll shards" }, shards) : null];
      }
      return [title, factList([["held", v.held ? "yes" : "no"], ["by", v.holder ? invocationLink(v.holder, book) : "—"]])];
    });
  };
  const kind = h("select", { name: "kind" }, h("option", { value: "objects" }, "object"), h("option", { value: "queues" }, "queue"), h("option", { value: "locks" }, "lock"));
  const name = h("input", { class: "mid", placeholder: "name", name: "name", autocomplete: "off" });
  const path = h("input", { class: "mid", placeholder: "/a/b (objects, optional)", name: "path", autocomplete: "off" });
  const form = h("form", { class: "filters card", id: "lookup-form" }, h("label", null, "Kind", kind), h("label", null, "Name", name), h("label", null, "JSON pointer", path), h("button", { type: "submit" }, "Look up"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (name.value.trim()) show(kind.value, name.value.trim(), kind.value === "objects" ? path.value.trim() : "");
  });
  lookups.append(form);

  const listed = (box, title, kind, table) =>
    p.fill(box, async () => {
      try {
        const { names, truncated } = await listNames(p, `SELECT DISTINCT name FROM ${table} WHERE book = ${book} ORDER BY name LIMIT 500`);
        const items = names.map((n) => {
          const b = h("button", { type: "button", class: "chip" }, n);
          b.addEventListener("click", () => show(kind, n, ""));
          return b;
        });
        return [h("h2", null, `${title} (${names.length}${truncated ? "+" : ""})`), items.length ? h("div", null, items) : h("p", { class: "muted" }, `No ${title.toLowerCase()} in book ${book}.`)];
      } catch (e) {
        if (isAbort(e)) throw e;
        return [h("h2", null, title), errorBox(e), h("p", { class: "muted small" }, "Listing uses POST /v1/sql; a lookup by name works without it.")];
      }
    });
  await Promise.all([listed(objects, "Objects", "objects", "objects"), listed(queues, "Queues", "queues", "queues")]);
}

function jsonBig(key, value) {
  return typeof value === "bigint" ? value.toString() : value;
}

// ---------------------------------------------------------------- Schedules

async function pageSchedules(p, main) {
  main.append(head("Schedules", "Functions invoked at every tick of an interval or a cron expression."));
  const box = h("div", { class: "card flush" });
  main.append(box);
  await p.fill(box, async () => {
    const all = [];
    let after = "";
    for (let i = 0; i < 20; i++) {
      const page = await p.get(`/v1/schedules?limit=1000${after ? `&after=${encodeURIComponent(after)}` : ""}`);
      all.push(...page.schedules);
      if (page.next == null) break;
      after = page.next;
    }
    if (all.length === 0) return empty("No schedule: PUT /v1/schedules/{name} makes one.");
    const rows = all.map((s) =>
      h(
        "tr",
        { class: "schedule" },
        h("td", { class: "mono" }, s.name),
        h("td", null, link(s.function, ["function", s.function], null, { class: "mono" })),
        h("td", { class: "num" }, link(String(s.book), ["book", s.book])),
        h("td", { class: "mono nowrap" }, s.cron ? `cron ${s.cron}` : s.every_ms != null ? `every ${fmtSpan(s.every_ms)}` : "—"),
        h("td", null, s.paused ? badge("paused") : badge("active", "ok")),
        h("td", { class: "nowrap" }, s.next_tick_ms != null ? [timeCell(s.next_tick_ms), h("span", { class: "muted small" }, ` ${fmtAgo(s.next_tick_ms)}`)] : "—"),
        h("td", { class: "nowrap" }, timeCell(s.last_tick_ms)),
        h("td", { class: "num" }, `${fmtCount(s.ticks_fired)} / ${fmtCount(s.ticks_skipped)} / ${fmtCount(s.triggered)}`),
        h("td", null, s.last_invocation_id ? invocationLink(s.last_invocation_id, s.book) : "—"),
        h("td", { class: "wrap" }, s.last_error ? h("span", { class: "badge failed" }, typeof s.last_error === "string" ? s.last_error : JSON.stringify(s.last_error, jsonBig)) : ""),
        h("td", { class: "small muted nowrap" }, `overlap ${s.overlap}, catch up ${s.catch_up}`),
      ),
    );
    const cols = ["Name", "Function", "Book", "When", "State", "Next tick", "Last tick", "Fired / skipped / triggered", "Last invocation", "Last error", "Policies"];
    return h("div", { class: "scroll" }, h("table", { id: "schedules" }, h("thead", null, h("tr", null, cols.map((c) => h("th", null, c)))), h("tbody", null, rows)));
  });
}

// ---------------------------------------------------------------- Health

/** Prometheus text as samples `{name, labels, value}`. */
function parseMetrics(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

/** What the health page keeps between its visits: the samples of the last minutes. */
const health = { samples: [], SPAN_MS: 2 * 60e3, POLL_MS: 2000 };

function sum(samples, name, by) {
  const out = new Map();
  for (const s of samples) {
    if (s.name !== name) continue;
    const key = by ? s.labels[by] ?? "" : "";
    out.set(key, (out.get(key) || 0) + s.value);
  }
  return out;
}

/** One poll of `/metrics` as the charts need it. */
function snapshot(samples, t) {
  return {
    t,
    outcomes: sum(samples, "tally_invocations_total", "outcome"),
    partSum: sum(samples, "tally_invocation_part_seconds_sum", "part"),
    partCount: sum(samples, "tally_invocation_part_seconds_count", "part"),
    byFunction: {
      outcomes: samples.filter((s) => s.name === "tally_invocations_total"),
      seconds: sum(samples, "tally_invocation_seconds_sum", "function"),
      count: sum(samples, "tally_invocation_seconds_count", "function"),
    },
    gauge: (name) => (sum(samples, name).get("") ?? null),
  };
}

/** Per-second rates of each outcome, and each part's mean per invocation, between polls. */
function seriesOf(samples) {
  const rates = new Map();
  const parts = new Map();
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1];
    const b = samples[i];
    const dt = (b.t - a.t) / 1000;
    if (dt <= 0) continue;
    for (const [outcome, v] of b.outcomes) {
      const before = a.outcomes.get(outcome) ?? 0;
      const d = v >= before ? v - before : v;
      if (!rates.has(outcome)) rates.set(outcome, []);
      rates.get(outcome).push({ t: b.t, v: d / dt });
    }
    for (const [part, s] of b.partSum) {
      if (!(b.partCount.get(part) > 0)) continue;
      const dc = (b.partCount.get(part) ?? 0) - (a.partCount.get(part) ?? 0);
      const ds = s - (a.partSum.get(part) ?? 0);
      if (!parts.has(part)) parts.set(part, []);
      parts.get(part).push({ t: b.t, v: dc > 0 && ds >= 0 ? (ds / dc) * 1000 : null });
    }
  }
  // A part that took no time in the window (no host call of its kind) is left out.
  for (const [part, points] of parts) if (points.every((p) => p.v == null)) parts.delete(part);
  return { rates, parts };
}

async function pageHealth(p, main) {
  main.append(head("Health", `This node (${location.host}): liveness, and its metrics charted every ${health.POLL_MS / 1000} s.`));
  const stats = h("div", { class: "stats" });
  const rate = h("div", { class: "chart", id: "chart-rate" });
  const parts = h("div", { class: "chart", id: "chart-parts" });
  const functions = h("div", { class: "card flush", id: "function-stats" });
  const problem = h("div");
  main.append(problem, stats, h("div", { class: "grid" }, h("div", { class: "card" }, h("h2", null, "Invocations per second, by outcome"), rate), h("div", { class: "card" }, h("h2", null, "Mean time per invocation, by part"), parts)), functions);
  const stat = (label, value, cls, note) => h("div", { class: "card" }, h("h3", null, label), h("div", { class: `stat ${cls || ""}` }, value), note ? h("div", { class: "muted small" }, note) : null);
  p.every(health.POLL_MS, async () => {
    const began = performance.now();
    let alive = null;
    let latency = null;
    try {
      const answer = await request("/healthz", { signal: p.controller.signal });
      alive = answer.text.trim();
      latency = performance.now() - began;
    } catch (e) {
      if (isAbort(e)) return;
      alive = e.message || "down";
    }
    let snap;
    try {
      const answer = await request("/metrics", { signal: p.controller.signal });
      snap = snapshot(parseMetrics(answer.text), Date.now());
      problem.replaceChildren();
    } catch (e) {
      if (isAbort(e)) return;
      problem.replaceChildren(errorBox(e));
    }
    if (!p.alive) return;
    if (snap) {
      health.samples.push(snap);
      const cutoff = Date.now() - health.SPAN_MS - 10e3;
      while (health.samples.length && health.samples[0].t < cutoff) health.samples.shift();
    }
    const last = health.samples[health.samples.length - 1];
    const total = last ? [...last.outcomes.values()].reduce((a, b) => a + b, 0) : null;
    const errors = last ? [...last.outcomes].filter(([o]) => o !== "ok").reduce((a, [, v]) => a + v, 0) : null;
    stats.replaceChildren(
      stat("Health", alive === "ok" ? "ok" : alive ?? "—", alive === "ok" ? "ok" : "bad", latency != null ? `answered in ${fmtMs(latency)}` : "no answer"),
      stat("Instances running", fmtCount(last && last.gauge("tally_instances_running"))),
      stat("Invocations", fmtCount(total), "", `since the node started, ${errors ? `${fmtCount(errors)} not ok` : "all ok"}`),
      stat("Re-executions", fmtCount(last && last.gauge("tally_reexecutions_total")), "", `${fmtCount(last && last.gauge("tally_replayed_results_total"))} answered from the log`),
      stat("Deploys", fmtCount(last && last.gauge("tally_deploys_total")), "", "accepted by this node since it started"),
    );
    const now = Date.now();
    const { rates, parts: means } = seriesOf(health.samples.filter((s) => s.t >= now - health.SPAN_MS - health.POLL_MS));
    const sorted = new Map([...rates].sort(([a], [b]) => (a === "ok" ? -1 : b === "ok" ? 1 : a.localeCompare(b))));
    lineChart(rate, { series: sorted, spanMs: health.SPAN_MS, now, unit: "invocations per second", format: (v) => (v >= 10 ? v.toFixed(0) : v.toFixed(1)) + "/s", floor: 1, color: outcomeColor });
    lineChart(parts, { series: means, spanMs: health.SPAN_MS, now, unit: "milliseconds per invocation", format: (v) => fmtMs(v), floor: 0.1 });
    rate.dataset.samples = String(health.samples.length);
    if (last) functions.replaceChildren(h("h2", null, "By function"), functionStats(last));
  });
}

function functionStats(snap) {
  const rows = new Map();
  for (const s of snap.byFunction.outcomes) {
    const f = s.labels.function ?? "?";
    if (!rows.has(f)) rows.set(f, { ok: 0, other: 0 });
    if (s.labels.outcome === "ok") rows.get(f).ok += s.value;
    else rows.get(f).other += s.value;
  }
  if (rows.size === 0) return empty("No invocation on this node yet.");
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      null,
      h("thead", null, h("tr", null, ["Function", "Ok", "Not ok", "Mean time"].map((t, i) => h("th", { class: i ? "num" : null }, t)))),
      h(
        "tbody",
        null,
        [...rows].sort().map(([f, r]) => {
          const count = snap.byFunction.count.get(f) || 0;
          const mean = count ? (snap.byFunction.seconds.get(f) / count) * 1000 : null;
          return h("tr", null, h("td", null, link(f, ["function", f], null, { class: "mono" })), h("td", { class: "num" }, fmtCount(r.ok)), h("td", { class: "num" }, fmtCount(r.other)), h("td", { class: "num" }, fmtMs(mean)));
        }),
      ),
    ),
  );
}

// ---------------------------------------------------------------- SQL

const EXAMPLES = [
  "SELECT 1+1",
  "SELECT * FROM functions",
  "SELECT function, status, count(*) FROM invocations GROUP BY function, status",
  "SELECT * FROM tables",
  "SELECT * FROM logs LIMIT 20",
];

async function pageSql(p, main) {
  main.append(head("SQL", "Read-only queries over the node's functions, invocations, steps, records, state, tables, objects, queues, schedules and logs."));
  const text = h("textarea", { class: "sql", id: "sql-text", spellcheck: "false", placeholder: "SELECT ..." });
  text.value = p.params.get("q") || "SELECT 1+1";
  const asOf = h("input", { class: "mid", id: "sql-as-of", placeholder: "latest", autocomplete: "off" });
  asOf.value = p.params.get("as_of") || "";
  const run = h("button", { type: "submit", id: "sql-run" }, "Run");
  const examples = h(
    "div",
    { class: "examples" },
    EXAMPLES.map((q) => {
      const b = h("button", { type: "button", class: "chip" }, q);
      b.addEventListener("click", () => {
        text.value = q;
        text.focus();
      });
      return b;
    }),
  );
  const form = h("form", { class: "card", id: "sql-form" }, text, h("div", { class: "row" }, run, h("label", { class: "muted small" }, "As of seqnum ", asOf), h("span", { class: "muted small" }, "Ctrl+Enter runs")), examples);
  const result = h("div", { class: "card flush", id: "sql-result", hidden: true });
  main.append(form, result);
  const execute = async () => {
    const body = { sql: text.value };
    if (/^\d+$/.test(asOf.value.trim())) body.as_of = Number(asOf.value.trim());
    result.hidden = false;
    run.disabled = true;
    history.replaceState(null, "", hashOf(["sql"], { q: text.value, as_of: asOf.value.trim() }));
    try {
      await p.fill(result, async () => {
        const answer = await p.post("/v1/sql", body);
        return sqlTable(answer);
      });
    } finally {
      run.disabled = false;
    }
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    execute();
  });
  text.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      execute();
    }
  });
  if (p.params.get("q")) execute();
}

function sqlCell(v) {
  if (v == null) return h("span", { class: "muted" }, "null");
  if (typeof v === "object") return JSON.stringify(v, jsonBig);
  return String(v);
}

/** Numbers in a column of their own; long text wraps, short text does not. */
function sqlClass(v) {
  if (typeof v === "number" || typeof v === "bigint") return "num nowrap";
  return typeof v === "string" && v.length > 48 ? "wrap" : "nowrap";
}

function sqlTable(answer) {
  const columns = answer.columns || [];
  const rows = answer.rows || [];
  const parts = [`${fmtCount(rows.length)} row${rows.length === 1 ? "" : "s"}`];
  if (answer.as_of != null) parts.push(`as of seqnum ${fmtSeq(answer.as_of)}`);
  if (answer.elapsed_ms != null) parts.push(fmtMs(answer.elapsed_ms));
  const note = h("div", { class: "status-line sql-note" }, parts.join(" · "), answer.truncated ? badge("truncated: more rows than the limit", "paused") : null);
  return [
    h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { id: "sql-table" },
        h("thead", null, h("tr", null, columns.map((c) => h("th", null, c)))),
        h(
          "tbody",
          null,
          rows.map((r) => h("tr", null, r.map((v) => h("td", { class: `mono ${sqlClass(v)}` }, sqlCell(v))))),
        ),
      ),
    ),
    h("div", { class: "card-foot" }, note),
  ];
}

// ---------------------------------------------------------------- Audit

async function pageAudit(p, main) {
  main.append(head("Audit", "Who changed what: tokens, deploys, settings and schedules, from the platform book (an admin's token)."));
  const box = h("div", { class: "card flush" });
  main.append(box);
  await p.fill(box, async () => {
    const { changes } = await p.get("/v1/audit");
    if (changes.length === 0) return empty("No change yet.");
    const rows = [...changes].reverse().map((c) => {
      const { seqnum, at_ms, by, op, ...rest } = c;
      return h(
        "tr",
        null,
        h("td", null, seqCell(seqnum)),
        h("td", { class: "nowrap" }, timeCell(at_ms)),
        h("td", { class: "mono" }, by),
        h("td", null, badge(op, "proto")),
        h("td", { class: "mono small" }, Object.entries(rest).map(([k, v]) => h("span", { class: "chip" }, `${k}=${typeof v === "object" ? JSON.stringify(v, jsonBig) : v}`))),
      );
    });
    return h("div", { class: "scroll" }, h("table", { id: "audit" }, h("thead", null, h("tr", null, ["Seqnum", "At", "By", "Change", "What"].map((t) => h("th", null, t)))), h("tbody", null, rows)));
  });
}

// ---------------------------------------------------------------- start

function start() {
  $("#node").textContent = location.host;
  $("#login-form").addEventListener("submit", login);
  $("#login-forget").addEventListener("click", logout);
  $("#logout").addEventListener("click", logout);
  $("#logout").hidden = localStorage.getItem("tally.cookie") !== "1";
  $("#book").addEventListener("change", bookChanged);
  window.addEventListener("hashchange", route);
  if (!location.hash || location.hash === "#" || location.hash === "#/") history.replaceState(null, "", "#/functions");
  // The first page waits for the books, so that it shows the first one unless told.
  loadBooks().finally(route);
}

start();
