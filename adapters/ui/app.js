// factcheck UI: asks through the proxy's websocket (/v1/ws) and shows the answer as it
// streams, rendered as Markdown, each sentence coloured by its verdict when its report
// arrives, with what the client actually received stated per answer.
//
// Everything that comes from the model or from evidence is untrusted: it only ever reaches
// the page through createElement / createTextNode / textContent, never through an HTML
// parser (tests/adapters/ui checks this file for the HTML sinks), and only http(s) URLs
// become links.
"use strict";

const $ = (id) => document.getElementById(id);

// Tags FAVA defines over a whole sentence; other types mark a span.
const SENTENCE_TAGS = new Set(["contradictory", "subjective", "unverifiable"]);

const VERDICT_WORDS = {
  attributable: "supported: a passage found says the same thing",
  extrapolatory: "not supported: the passages found neither confirm nor contradict it",
  contradictory: "contradicted: a passage found says otherwise",
  unverified: "the check did not finish, so nothing is known",
  skipped: "not checked on purpose: not a factual claim",
};
const FAVA_WORDS = {
  entity: "a wrong name, number or date",
  relation: "the right things in a wrong relation",
  contradictory: "the whole sentence is contradicted",
  invented: "names something no source knows",
  subjective: "an opinion, not a fact",
  unverifiable: "no passage found can confirm or refute it",
  edit: "a correction",
};

const ui = {
  ws: null,
  retryMs: 500,
  answer: null,
  selected: null,
  renderQueued: false,
};

// ------------------------------------------------------------------ DOM helpers
function el(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null) continue;
    if (key === "text") node.textContent = String(value);
    else if (key === "className") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child !== null && child !== undefined && child !== false) node.append(child);
  }
  return node;
}

function safeUrl(url) {
  if (typeof url !== "string" || !url) return null;
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch {
    return null;
  }
}

function ms(value) {
  const n = Number(value);
  if (!Number.isFinite(n)) return "–";
  if (n >= 10000) return `${(n / 1000).toFixed(1)} s`;
  return `${n.toFixed(n < 10 ? 1 : 0)} ms`;
}

function now() {
  return performance.now();
}

// ------------------------------------------------------------------ connection
function connect() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${scheme}//${location.host}/v1/ws`);
  ui.ws = ws;
  setStatus("connecting", "connecting…");
  ws.addEventListener("open", () => {
    ui.retryMs = 500;
    setStatus("open", "connected");
    updateButtons();
  });
  ws.addEventListener("message", (event) => {
    let message;
    try {
      message = JSON.parse(event.data);
    } catch {
      return;
    }
    onMessage(message);
  });
  ws.addEventListener("close", (event) => {
    if (ui.ws !== ws) return;
    setStatus("closed", "disconnected, retrying…");
    const why = closeReason(event);
    if (ui.answer && !ui.answer.done) finishAnswer(event.code === 1009 ? "refused" : "lost", why);
    else if (event.code === 1009) showError(why);
    updateButtons();
    setTimeout(connect, ui.retryMs);
    ui.retryMs = Math.min(ui.retryMs * 2, 8000);
  });
}

// What the server said when it closed the socket, in words.
function closeReason(event) {
  if (event.code === 1009) {
    const limit = maxMessageBytes();
    const bound = limit ? ` (at most ${limit.toLocaleString("en")} bytes, server.max_body_bytes)` : " (server.max_body_bytes)";
    return `The server refused the message: too large${bound}. ` +
      `Websocket closed with code 1009 (message too big)${event.reason ? `: ${event.reason}` : ""}. Nothing was answered.`;
  }
  const reason = event.reason ? `: ${event.reason}` : "";
  return `Connection lost (websocket closed, code ${event.code}${reason}); the answer is incomplete.`;
}

function setStatus(state, text) {
  const status = $("status");
  status.dataset.state = state;
  status.textContent = text;
}

function connected() {
  return ui.ws && ui.ws.readyState === WebSocket.OPEN;
}

function updateButtons() {
  const streaming = Boolean(ui.answer && !ui.answer.done);
  $("send").disabled = streaming || !connected();
  $("stop").disabled = !streaming;
}

function maxMessageBytes() {
  const limit = Number(document.body.dataset.maxMessageBytes);
  return Number.isFinite(limit) && limit > 0 ? limit : null;
}

// ------------------------------------------------------------------ asking
function selectedMode() {
  const checked = document.querySelector('input[name="mode"]:checked');
  return checked ? checked.value : "annotate";
}

function buildRequest(question) {
  let extra = {};
  const raw = $("extra").value.trim();
  if (raw) {
    extra = JSON.parse(raw); // throws on bad JSON: reported by the caller
    if (typeof extra !== "object" || extra === null || Array.isArray(extra)) {
      throw new Error("request options must be a JSON object");
    }
  }
  return {
    model: $("model").value.trim() || undefined,
    messages: [{ role: "user", content: question }],
    ...extra,
    stream: true,
    factcheck: { ...(extra.factcheck || {}), mode: selectedMode() },
  };
}

function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question || !connected() || (ui.answer && !ui.answer.done)) return;
  let request;
  try {
    request = buildRequest(question);
  } catch (error) {
    showError(`Request options: ${error.message}`);
    return;
  }
  const upstreamApi = $("upstream-api").value || undefined; // the proxy's choice unless one is picked
  const message = JSON.stringify({ type: "chat", request, upstream_api: upstreamApi });
  const size = new TextEncoder().encode(message).length;
  const limit = maxMessageBytes();
  if (limit && size > limit) {
    // The proxy's own words for an oversized HTTP body (413), and what was not done.
    showError(`request body too large: Maximum request body size ${limit} exceeded. ` +
      `This message is ${size.toLocaleString("en")} bytes; the server accepts at most ` +
      `${limit.toLocaleString("en")} (server.max_body_bytes). Nothing was sent.`);
    $("error").dataset.kind = "too-large";
    return;
  }
  startAnswer(question, request.factcheck.mode);
  ui.ws.send(message);
  updateButtons();
}

function stop() {
  if (!ui.answer || ui.answer.done) return;
  ui.answer.stopRequested = true;
  if (connected()) ui.ws.send(JSON.stringify({ type: "cancel" }));
}

// ------------------------------------------------------------------ the answer's state
function startAnswer(question, mode) {
  ui.answer = {
    question,
    mode,
    text: "", // exactly the content the client received, in order
    arrivals: [], // [text length after a content chunk, time it arrived]
    lastContentStart: 0,
    sentences: new Map(), // index -> entry (see onReport)
    passages: new Map(), // provider + id -> text: a passage's text comes once per answer
    summary: null,
    sentAt: now(),
    firstTextAt: null,
    doneAt: null,
    summaryAt: null,
    done: false,
    ending: null, // done | stopped | failed | lost | refused
    stopRequested: false,
    failure: null,
  };
  ui.selected = null;
  showError(null);
  $("details").hidden = true;
  $("summary").hidden = true;
  $("reports").hidden = true;
  $("report-rows").replaceChildren();
  $("answer").dataset.state = "streaming";
  render();
}

function finishAnswer(ending, message) {
  const answer = ui.answer;
  if (!answer || answer.done) return;
  answer.done = true;
  answer.doneAt = now();
  answer.ending = ending;
  if (message) {
    answer.failure = message;
    showError(message);
  }
  $("answer").dataset.state = ending;
  updateButtons();
  render();
  renderReports();
}

function onMessage(message) {
  const answer = ui.answer;
  if (message.type === "done") {
    if (answer && !answer.done) {
      finishAnswer(answer.failure ? "failed" : answer.stopRequested ? "stopped" : "done", answer.failure);
    }
    return;
  }
  if (message.error) {
    const text = message.error.message || "error";
    if (answer && !answer.done) answer.failure = text;
    showError(text);
    return;
  }
  if (!answer || answer.done) return;
  if (message.type === "start") {
    answer.mode = message.mode;
    return;
  }
  if (message.object !== "chat.completion.chunk") return;
  if (message.factcheck) {
    onFactcheck(message.factcheck);
  } else {
    for (const choice of message.choices || []) {
      const content = choice.index === 0 && choice.delta ? choice.delta.content : null;
      if (typeof content === "string" && content) {
        const at = now();
        if (answer.firstTextAt === null) answer.firstTextAt = at;
        answer.lastContentStart = answer.text.length;
        answer.text += content;
        answer.arrivals.push([answer.text.length, at]);
      }
    }
  }
  scheduleRender();
}

// The proxy sends each evidence passage's text the first time the answer uses it; later
// uses carry the same provider and id without the text.
function withTexts(answer, passages) {
  for (const passage of passages || []) {
    const key = `${passage.provider}\u0000${passage.id}`;
    if (typeof passage.text === "string") answer.passages.set(key, passage.text);
    else passage.text = answer.passages.get(key) || "";
  }
}

// When the received text first reached `length` characters (this page's clock).
function timeAtLength(answer, length) {
  for (const [reached, at] of answer.arrivals) {
    if (reached >= length) return at;
  }
  return null;
}

function onFactcheck(factcheck) {
  const answer = ui.answer;
  if (factcheck.type === "sentence" && factcheck.report) {
    onReport(answer, factcheck.report);
  } else if (factcheck.type === "summary") {
    withTexts(answer, factcheck.summary.attribution_report);
    answer.summary = factcheck.summary;
    answer.summaryAt = now();
    renderSummary(factcheck.summary);
  }
}

function onReport(answer, report) {
  withTexts(answer, report.evidence);
  const reportAt = now();
  let entry;
  if (answer.mode === "correct") {
    // Correct mode: the sentence's text, as sent to the client (corrected or as written), is
    // the content chunk just before its report; both arrive together.
    const start = answer.lastContentStart;
    const end = answer.text.length;
    const received = answer.text.slice(start, end);
    entry = { report, start, end, reportAt, textStartAt: reportAt, textEndAt: reportAt, received };
  } else {
    // Annotate mode: the client received the text as written; the report's offsets are
    // offsets in it.
    entry = {
      report, start: report.start, end: report.end, reportAt, received: report.text,
      textStartAt: timeAtLength(answer, report.start + 1), textEndAt: timeAtLength(answer, report.end),
    };
  }
  entry.outcome = outcomeOf(answer.mode, entry);
  entry.marks = marksOf(entry);
  answer.sentences.set(report.index, entry);
  renderReports();
}

// What the client got for this sentence: "corrected" (an edit was applied: the client
// received the corrected text), "suggested" (the client received it as written; edits are
// proposals only) or "as-written" (nothing to correct).
function outcomeOf(mode, entry) {
  const report = entry.report;
  const proposals = (report.edits || []).length > 0 ||
    (report.tags || []).some((tag) => tag.replacement !== null && tag.replacement !== undefined) ||
    Boolean(report.revision && report.revision.suggested);
  if (mode === "correct" && entry.received !== report.text) return "corrected";
  return proposals ? "suggested" : "as-written";
}

function isWhole(tag, report) {
  return SENTENCE_TAGS.has(tag.type) || (tag.start <= report.start && tag.end >= report.end);
}

// Inline marks of a sentence in its received text (offsets relative to entry.start).
// An applied edit marks the inserted text (the original is shown struck before it); a
// suggested edit marks the original text (the proposal is shown after it).
function marksOf(entry) {
  const report = entry.report;
  const rel = (offset) => offset - report.start;
  const inside = (start, end) => start >= report.start && end <= report.end && end >= start;
  const marks = [];
  const overlaps = (start, end) => marks.some((m) => m.origStart < end && start < m.origEnd);
  if (entry.outcome === "corrected") {
    const applied = (report.edits || []).filter((e) => inside(e.start, e.end)).sort((a, b) => a.start - b.start);
    let rebuilt = "";
    let cursor = 0;
    let delta = 0;
    for (const edit of applied) {
      const start = rel(edit.start);
      if (start < cursor) continue;
      rebuilt += report.text.slice(cursor, start) + edit.replacement;
      cursor = rel(edit.end);
      marks.push({
        kind: "applied", type: edit.tag || "edit", start: start + delta, end: start + delta + edit.replacement.length,
        origStart: edit.start, origEnd: edit.end, original: edit.original, replacement: edit.replacement,
      });
      delta += edit.replacement.length - (edit.end - edit.start);
    }
    rebuilt += report.text.slice(cursor);
    if (rebuilt !== entry.received) {
      entry.wholeCorrection = true; // the edits do not spell out the received text: say so as a whole
      return [];
    }
    const shift = (offset) => offset + marks.filter((m) => m.origEnd <= offset)
      .reduce((sum, m) => sum + m.replacement.length - (m.origEnd - m.origStart), 0);
    for (const tag of report.tags || []) {
      if (isWhole(tag, report) || !inside(tag.start, tag.end) || overlaps(tag.start, tag.end)) continue;
      marks.push({ kind: "tag", type: tag.type, start: shift(rel(tag.start)), end: shift(rel(tag.end)),
        origStart: tag.start, origEnd: tag.end, original: tag.text, replacement: null });
    }
  } else {
    for (const tag of report.tags || []) {
      if (isWhole(tag, report) || !inside(tag.start, tag.end) || overlaps(tag.start, tag.end)) continue;
      const edit = (report.edits || []).find((e) => e.start === tag.start && e.end === tag.end);
      const replacement = tag.replacement ?? (edit ? edit.replacement : null);
      marks.push({ kind: replacement !== null ? "suggested" : "tag", type: tag.type, start: rel(tag.start),
        end: rel(tag.end), origStart: tag.start, origEnd: tag.end, original: tag.text, replacement });
    }
    for (const edit of report.edits || []) {
      if (!inside(edit.start, edit.end) || overlaps(edit.start, edit.end)) continue;
      marks.push({ kind: "suggested", type: edit.tag || "edit", start: rel(edit.start), end: rel(edit.end),
        origStart: edit.start, origEnd: edit.end, original: edit.original, replacement: edit.replacement });
    }
  }
  return marks.filter((m) => m.start >= 0 && m.end <= entry.end - entry.start).sort((a, b) => a.start - b.start);
}

function showError(text) {
  const box = $("error");
  box.hidden = !text;
  box.textContent = text || "";
  delete box.dataset.kind;
}

// ------------------------------------------------------------------ Markdown, as DOM
// Blocks of the received text: headings, paragraphs, lists, quotes, fenced code, rules.
// Each block holds ranges of the text (markup prefixes left out); nothing is ever parsed as
// HTML: text stays text.
function parseBlocks(text) {
  const blocks = [];
  let open = null; // the paragraph, list or quote that the next line may continue
  let fence = null;
  let pos = 0;
  while (pos < text.length) {
    const newline = text.indexOf("\n", pos);
    const end = newline < 0 ? text.length : newline;
    const line = text.slice(pos, end);
    const next = newline < 0 ? text.length : newline + 1;
    if (fence) {
      if (/^\s{0,3}(```|~~~)\s*$/.test(line) && line.trim().startsWith(fence.marker)) {
        fence = null;
      } else {
        fence.block.ranges.push([pos, next]);
      }
      pos = next;
      continue;
    }
    let m;
    if ((m = /^\s{0,3}(```+|~~~+)/.exec(line))) {
      fence = { marker: m[1].slice(0, 3), block: { kind: "code", ranges: [] } };
      blocks.push(fence.block);
      open = null;
    } else if (!line.trim()) {
      open = null;
    } else if ((m = /^ {0,3}(#{1,6})[ \t]+/.exec(line)) || /^ {0,3}#{1,6}$/.test(line)) {
      const prefix = m ? m[0].length : line.length;
      blocks.push({ kind: `h${m ? m[1].length : line.trim().length}`, ranges: [[pos + prefix, end]] });
      open = null;
    } else if (/^ {0,3}([-*_])( *\1){2,} *$/.test(line)) {
      blocks.push({ kind: "hr", ranges: [] });
      open = null;
    } else if ((m = /^(\s*)([-*+]|\d{1,9}[.)])[ \t]+/.exec(line))) {
      const ordered = /\d/.test(m[2]);
      if (!open || open.kind !== (ordered ? "ol" : "ul")) {
        open = { kind: ordered ? "ol" : "ul", items: [], start: ordered ? parseInt(m[2], 10) : null };
        blocks.push(open);
      }
      open.items.push([[pos + m[0].length, end]]);
    } else if ((m = /^ {0,3}> ?/.exec(line))) {
      if (!open || open.kind !== "quote") {
        open = { kind: "quote", ranges: [] };
        blocks.push(open);
      }
      open.ranges.push([pos + m[0].length, next]);
    } else if (open && (open.kind === "ul" || open.kind === "ol")) {
      const item = open.items[open.items.length - 1];
      item.push([pos - 1, end]); // a continuation line of the item (with its line break)
    } else if (open && open.kind === "p") {
      open.ranges[0][1] = end;
    } else {
      open = { kind: "p", ranges: [[pos, end]] };
      blocks.push(open);
    }
    pos = next;
  }
  return blocks;
}

const BOLD = 1;
const EM = 2;
const CODE = 4;
const HIDDEN = 8;

// Inline Markdown of text[a, b): `code`, **strong** / __strong__, *em* / _em_, as flags per
// character (the markers themselves HIDDEN).
function inlineStyles(text, a, b, flags) {
  const slice = text.slice(a, b);
  const set = (from, to, flag) => {
    for (let i = from; i < to; i++) flags[a + i] |= flag;
  };
  const free = (from, to) => {
    for (let i = from; i < to; i++) if (flags[a + i] & (CODE | HIDDEN)) return false;
    return true;
  };
  for (const m of slice.matchAll(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g)) {
    set(m.index, m.index + m[1].length, HIDDEN);
    set(m.index + m[1].length, m.index + m[0].length - m[1].length, CODE);
    set(m.index + m[0].length - m[1].length, m.index + m[0].length, HIDDEN);
  }
  const pairs = [
    [/\*\*(?=\S)([\s\S]*?\S)\*\*/g, BOLD, 2],
    [/(?<![\w_])__(?=\S)([\s\S]*?\S)__(?![\w_])/g, BOLD, 2],
    [/(?<!\*)\*(?=[^\s*])([^*]*?[^\s*])\*(?!\*)/g, EM, 1],
    [/(?<![\w_])_(?=[^\s_])([^_]*?[^\s_])_(?![\w_])/g, EM, 1],
  ];
  for (const [re, flag, width] of pairs) {
    for (const m of slice.matchAll(re)) {
      const start = m.index;
      const stop = m.index + m[0].length;
      if (!free(start, start + width) || !free(stop - width, stop)) continue;
      set(start, start + width, HIDDEN);
      set(start + width, stop - width, flag);
      set(stop - width, stop, HIDDEN);
    }
  }
}

// ------------------------------------------------------------------ rendering the answer
function scheduleRender() {
  if (ui.renderQueued) return;
  ui.renderQueued = true;
  requestAnimationFrame(() => {
    ui.renderQueued = false;
    render();
  });
}

function render() {
  const answer = ui.answer;
  if (!answer) return;
  const text = answer.text;
  // Which sentence and which mark each character belongs to.
  const owner = new Int32Array(text.length).fill(-1);
  const markOf = new Int32Array(text.length).fill(-1);
  const marks = [];
  const entries = [...answer.sentences.values()].sort((a, b) => a.start - b.start);
  let cursor = 0;
  const shown = [];
  for (const entry of entries) {
    if (entry.start < cursor || entry.end > text.length) continue;
    owner.fill(entry.report.index, entry.start, entry.end);
    for (const mark of entry.marks) {
      mark.id = marks.length;
      mark.sentence = entry.report.index;
      marks.push(mark);
      markOf.fill(mark.id, entry.start + mark.start, entry.start + mark.end);
    }
    shown.push(entry);
    cursor = entry.end;
  }
  const flags = new Uint8Array(text.length);
  const blocks = parseBlocks(text);
  for (const block of blocks) {
    if (block.kind === "code") continue;
    for (const [a, b] of block.ranges || []) inlineStyles(text, a, b, flags);
    for (const item of block.items || []) for (const [a, b] of item) inlineStyles(text, a, b, flags);
  }

  const pieces = { sentences: new Map(), marks: new Map() }; // index / id -> elements made for it
  const nodes = blocks.map((block) => blockNode(block, text, { owner, markOf, flags, marks, pieces, answer }));
  finishPieces(answer, marks, pieces);
  const out = $("answer");
  if (!answer.done) {
    const caret = el("span", { className: "caret", "aria-hidden": "true" });
    const last = nodes.length ? lastTextContainer(nodes[nodes.length - 1]) : null;
    if (last) last.append(caret);
    else nodes.push(caret);
  } else if (answer.ending !== "done") {
    nodes.push(endingNote(answer));
  }
  out.replaceChildren(...nodes);
  renderReceived(answer, shown);
}

function lastTextContainer(node) {
  if (node.tagName === "UL" || node.tagName === "OL") return node.lastElementChild;
  if (node.tagName === "HR") return null;
  return node;
}

function blockNode(block, text, ctx) {
  const inline = (container, ranges) => {
    for (const [a, b] of ranges) renderRange(container, text, a, b, ctx);
    return container;
  };
  switch (block.kind) {
    case "code": {
      const code = el("code", { text: block.ranges.map(([a, b]) => text.slice(a, b)).join("").replace(/\n$/, "") });
      return el("pre", { className: "md-code" }, [code]);
    }
    case "hr":
      return el("hr");
    case "ul":
    case "ol": {
      const list = el(block.kind, block.kind === "ol" && block.start !== 1 ? { start: block.start } : {});
      for (const item of block.items) list.append(inline(el("li"), item));
      return list;
    }
    case "quote":
      return inline(el("blockquote", { className: "md-quote" }), block.ranges);
    case "p":
      return inline(el("p"), block.ranges);
    default:
      return inline(el(block.kind), block.ranges); // h1 … h6
  }
}

// Characters [a, b) of the text into `container`: grouped into sentence spans, mark spans
// and style runs; hidden Markdown markers left out.
function renderRange(container, text, a, b, ctx) {
  let sentenceIdx = -2;
  let sentenceNode = null;
  let markId = -2;
  let markBox = null;
  let run = "";
  let runFlags = 0;
  const target = () => markBox || sentenceNode || container;
  const flush = () => {
    if (!run) return;
    let node = document.createTextNode(run);
    if (runFlags & CODE) node = el("code", {}, [node]);
    if (runFlags & EM) node = el("em", {}, [node]);
    if (runFlags & BOLD) node = el("strong", {}, [node]);
    target().append(node);
    run = "";
  };
  for (let i = a; i < b; i++) {
    const f = ctx.flags[i];
    if (f & HIDDEN) continue;
    const s = ctx.owner[i];
    const m = ctx.markOf[i];
    if (s !== sentenceIdx) {
      flush();
      sentenceIdx = s;
      markId = -2;
      markBox = null;
      sentenceNode = s >= 0 ? sentenceElement(ctx.answer.sentences.get(s)) : null;
      if (sentenceNode) {
        container.append(sentenceNode);
        pushPiece(ctx.pieces.sentences, s, sentenceNode);
      }
    }
    if (m !== markId) {
      flush();
      markId = m;
      markBox = null;
      if (m >= 0) {
        const made = markElement(ctx.marks[m]);
        (sentenceNode || container).append(made.wrapper);
        pushPiece(ctx.pieces.marks, m, made);
        markBox = made.box;
      }
    }
    if ((f & (BOLD | EM | CODE)) !== runFlags) {
      flush();
      runFlags = f & (BOLD | EM | CODE);
    }
    run += text[i];
  }
  flush();
}

function pushPiece(map, key, value) {
  if (!map.has(key)) map.set(key, []);
  map.get(key).push(value);
}

// After the text is laid out: the struck original before an applied edit, the proposal
// after a suggested one, and the whole-sentence badges at the end of each sentence.
function finishPieces(answer, marks, pieces) {
  for (const mark of marks) {
    const made = pieces.marks.get(mark.id);
    if (!made) continue;
    if (mark.kind === "applied") made[0].wrapper.prepend(el("del", { text: mark.original }));
    const last = made[made.length - 1].wrapper;
    if (mark.kind === "suggested") last.append(el("span", { className: "suggestion", text: `${mark.replacement}?` }));
    last.append(el("sup", { className: "fava-type", text: mark.type }));
  }
  for (const [index, nodes] of pieces.sentences) {
    const entry = answer.sentences.get(index);
    nodes[nodes.length - 1].append(...sentenceBadges(entry));
  }
}

function markElement(mark) {
  const kind = mark.kind;
  const wrapper = el("span", {
    className: `edit ${kind} fava fava-${mark.type}`,
    dataset: { type: mark.type, kind },
    title: kind === "applied"
      ? `applied correction (${mark.type}): your client received “${mark.replacement}” instead of “${mark.original}”`
      : kind === "suggested"
        ? `suggested correction (${mark.type}): “${mark.replacement}”; not applied: your client received “${mark.original}”`
        : `${mark.type}: ${FAVA_WORDS[mark.type] || mark.type}`,
  });
  const box = el(kind === "applied" ? "ins" : "mark");
  wrapper.append(box);
  return { wrapper, box };
}

function verdictLabel(report) {
  return report.verdict ? report.verdict.label : "unverified";
}

// The verdict in words, with the reason an unverified or skipped sentence has one.
function verdictPhrase(report) {
  const verdict = report.verdict || {};
  const label = verdictLabel(report);
  if (label === "unverified") {
    if (verdict.reason === "timeout") return "unverified: timed out";
    if (typeof verdict.reason === "string" && verdict.reason.startsWith("error")) return "unverified: check failed";
    return verdict.reason ? `unverified: ${verdict.reason}` : "unverified";
  }
  if (label === "skipped" && verdict.reason) return `skipped: ${verdict.reason}`;
  return label;
}

function timedOut(report) {
  return verdictLabel(report) === "unverified" && report.verdict && report.verdict.reason === "timeout";
}

function sentenceTitle(entry) {
  const report = entry.report;
  const label = verdictLabel(report);
  const parts = [`${verdictPhrase(report)}: ${VERDICT_WORDS[label] || ""}`];
  for (const tag of (report.tags || []).filter((t) => isWhole(t, report))) {
    parts.push(`FAVA ${tag.type}: ${FAVA_WORDS[tag.type] || tag.type}`);
  }
  if (entry.outcome === "corrected") parts.push("corrected: your client received the corrected sentence");
  else if (entry.outcome === "suggested") parts.push("a correction is suggested; your client received the sentence as written");
  return parts.join(" · ");
}

function sentenceElement(entry) {
  const report = entry.report;
  const label = verdictLabel(report);
  const node = el("span", {
    className: `sentence verdict-${label}`,
    role: "button",
    tabindex: "0",
    title: sentenceTitle(entry),
    dataset: { index: report.index, verdict: label, outcome: entry.outcome },
  });
  if (timedOut(report)) node.dataset.timedOut = "true";
  if (ui.selected === report.index) node.classList.add("selected");
  node.addEventListener("click", () => showDetails(report.index));
  node.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      showDetails(report.index);
    }
  });
  return node;
}

// Badges after a sentence: whole-sentence FAVA tags (outlined, the kind of problem), the
// unverified reason (a timeout is said as such), a whole-sentence correction.
function sentenceBadges(entry) {
  const report = entry.report;
  const out = [];
  for (const tag of (report.tags || []).filter((t) => isWhole(t, report))) {
    out.push(favaBadge(tag.type));
  }
  if (verdictLabel(report) === "unverified") {
    out.push(el("span", { className: "badge status-unverified", text: timedOut(report) ? "timed out" : "not checked",
      title: verdictPhrase(report) }));
  }
  if (entry.wholeCorrection) {
    out.push(el("span", { className: "badge status-corrected", text: "corrected",
      title: `your client received the corrected sentence; the model wrote: “${report.text}”` }));
  }
  return out;
}

function favaBadge(type) {
  return el("span", { className: `badge fava-${type}`, text: type, title: `FAVA ${type}: ${FAVA_WORDS[type] || type}` });
}

function endingNote(answer) {
  const texts = {
    stopped: "■ Stopped: you pressed Stop, so the answer ends here, incomplete. Sentences still being checked got no report.",
    failed: `✕ The answer failed: ${answer.failure || "error"}. What is shown is what arrived before.`,
    lost: `✕ ${answer.failure || "Connection lost"}`,
    refused: `✕ ${answer.failure || "The server refused the message."}`,
  };
  return el("p", { className: `ending ending-${answer.ending}`, dataset: { ending: answer.ending },
    text: texts[answer.ending] || "" });
}

// What the client received, for the whole answer, in this mode.
function renderReceived(answer, entries) {
  const box = $("received");
  const corrected = entries.filter((e) => e.outcome === "corrected").length;
  const suggested = entries.filter((e) => e.outcome === "suggested").length;
  let text;
  if (answer.mode === "off") {
    text = "Off mode: your client received the model's answer unchanged, as it streamed. Nothing was checked.";
  } else if (answer.mode === "correct") {
    text = "Correct mode: your client received each sentence only after its check, " +
      (corrected
        ? `with ${corrected} correction${corrected === 1 ? "" : "s"} applied (struck → green: the green text is what it got)`
        : "with no correction applied") +
      (suggested ? `; ${suggested} sentence${suggested === 1 ? "" : "s"} with a suggested correction sent as written (not applied)` : "") +
      ". Everything else as the model wrote it.";
  } else {
    text = "Annotate mode: your client received the model's answer unchanged, as it streamed, and a report per sentence. " +
      (suggested ? `${suggested} sentence${suggested === 1 ? " has" : "s have"} a suggested correction (dashed): only suggested, not applied.`
        : "No correction was applied.");
  }
  if (answer.ending === "stopped") text += " You stopped it: it is incomplete.";
  box.textContent = text;
  box.dataset.mode = answer.mode;
  box.dataset.corrected = String(corrected);
  box.dataset.suggested = String(suggested);
  box.hidden = false;
  $("raw-text").textContent = answer.text;
  $("raw").hidden = !answer.text;
  renderMeta(answer);
}

function renderMeta(answer) {
  const parts = [];
  if (answer.firstTextAt !== null) {
    parts.push(`first text ${ms(answer.firstTextAt - answer.sentAt)} after Ask`);
    const reports = [...answer.sentences.values()].map((entry) => entry.reportAt);
    if (answer.mode === "correct" && reports.length) {
      // Correct mode holds each sentence until its check: the first one comes with its report.
      parts.push(`first checked sentence ${ms(Math.min(...reports) - answer.sentAt)} after Ask`);
    }
  } else if (answer.done) {
    parts.push("no text received");
  }
  if (answer.done && answer.doneAt !== null) parts.push(`answer ended ${ms(answer.doneAt - answer.sentAt)} after Ask`);
  if (answer.summary && answer.summary.added_latency_ms != null) {
    parts.push(`proxy's added latency after the model finished: ${ms(answer.summary.added_latency_ms)}`);
  }
  const meta = $("answer-meta");
  meta.textContent = parts.length ? `${parts.join(" · ")} (this page's clock)` : "";
  if (answer.firstTextAt !== null) meta.dataset.ttftMs = String(answer.firstTextAt - answer.sentAt);
  else delete meta.dataset.ttftMs;
  meta.hidden = !parts.length;
}

// ------------------------------------------------------------------ per-sentence rows and timings
function stageTotal(timings) {
  return Object.values(timings || {}).reduce((sum, value) => sum + value, 0);
}

// The sentence's times, this page's clock (ms since Ask), and the checker's stage total.
function timesOf(answer, entry) {
  const rel = (t) => (t === null || t === undefined ? null : t - answer.sentAt);
  const times = {
    textStart: rel(entry.textStartAt),
    textEnd: rel(entry.textEndAt),
    report: rel(entry.reportAt),
    stages: stageTotal(entry.report.timings_ms),
    hasStages: Object.keys(entry.report.timings_ms || {}).length > 0,
  };
  times.wall = answer.mode !== "correct" && times.textEnd !== null ? Math.max(0, times.report - times.textEnd) : null;
  times.other = times.wall !== null && times.hasStages ? Math.max(0, times.wall - times.stages) : null;
  return times;
}

function renderReports() {
  const answer = ui.answer;
  if (!answer) return;
  const entries = [...answer.sentences.values()].sort((a, b) => a.report.index - b.report.index);
  if (!entries.length) return;
  const all = entries.map((entry) => [entry, timesOf(answer, entry)]);
  // One time scale for every row: 0 = Ask, to the latest report (or the answer's end).
  let scale = 1;
  for (const [, t] of all) scale = Math.max(scale, t.report, t.hasStages ? t.stages : 0);
  if (answer.doneAt !== null) scale = Math.max(scale, answer.doneAt - answer.sentAt);
  const rows = all.map(([entry, times]) => reportRow(answer, entry, times, scale));
  $("report-rows").replaceChildren(...rows);
  $("axis").replaceChildren(...[0, 0.5, 1].map((f) => {
    const tick = el("span", { className: "tick", text: f === 0 ? "0" : ms(f * scale) });
    tick.style.left = `${f * 100}%`; // through the CSSOM: the page's CSP allows no style attributes
    return tick;
  }));
  $("axis").dataset.scaleMs = String(scale);
  $("timing-note").textContent = answer.mode === "correct"
    ? "Correct mode: a sentence's text reaches your client together with its report, after its check. " +
      "▮ arrival; stages: the checker's own stage timings, drawn ending at the arrival. " +
      "How long the proxy held each sentence is not visible to this page (it does not know when the model wrote it); " +
      "the summary's added latency is the proxy's measure after the model finished."
    : "Annotate mode: ░ the sentence's text arriving; ▬ waiting for its report (wall: from its last character to its report); " +
      "stages: the checker's own stage timings, drawn ending at the report; other = wall − stages " +
      "(waiting for the sentence's end to be recognised, for a check slot, and transport).";
  $("reports").hidden = false;
}

function pct(value, scale) {
  return `${Math.max(0, Math.min(100, (value / scale) * 100)).toFixed(3)}%`;
}

function timelineNode(answer, entry, times, scale) {
  const line = el("div", { className: "timeline", dataset: { scaleMs: scale } });
  const bar = (className, from, to, title, label) => {
    const node = el("span", { className, title, text: label || null });
    node.style.left = pct(from, scale);
    node.style.width = pct(Math.max(0, to - from), scale);
    line.append(node);
    return node;
  };
  if (answer.mode !== "correct" && times.textStart !== null && times.textEnd !== null) {
    bar("tl-text", times.textStart, times.textEnd, `text arriving: ${ms(times.textStart)} → ${ms(times.textEnd)}`);
  }
  if (times.wall !== null) {
    const waiting = bar(`tl-wait${timedOut(entry.report) ? " timeout" : ""}`, times.textEnd, times.report,
      `${timedOut(entry.report) ? "timed out after" : "waiting for the report"}: ${ms(times.wall)}`,
      timedOut(entry.report) ? "timed out" : null);
    waiting.dataset.ms = String(times.wall);
  }
  if (times.hasStages) {
    const stages = el("span", { className: "tl-stages", dataset: { ms: times.stages } });
    const start = Math.max(0, times.report - times.stages);
    stages.style.left = pct(start, scale);
    stages.style.width = pct(times.stages, scale);
    for (const [stage, value] of Object.entries(entry.report.timings_ms)) {
      if (!(value > 0)) continue;
      const part = el("span", { className: `stage stage-${stage}`, title: `${stage}: ${ms(value)}` });
      part.style.flexGrow = String(value);
      stages.append(part);
    }
    line.append(stages);
  }
  const tick = el("span", { className: "tl-tick", title: `report at ${ms(times.report)}` });
  tick.style.left = pct(times.report, scale);
  line.append(tick);
  return line;
}

function timesNode(answer, entry, times) {
  const lines = [];
  if (answer.mode === "correct") {
    lines.push(`arrived ${ms(times.report)} (text + report)`);
  } else {
    lines.push(`text end ${times.textEnd !== null ? ms(times.textEnd) : "–"} · report ${ms(times.report)}`);
    if (times.wall !== null) lines.push(`wall ${ms(times.wall)}`);
  }
  if (timedOut(entry.report)) {
    lines.push("checker: timed out (no stage timings)");
  } else if (times.hasStages) {
    lines.push(`stages ${ms(times.stages)}${times.other !== null ? ` · other ${ms(times.other)}` : ""}`);
  } else {
    lines.push("stages: none reported");
  }
  return el("div", { className: "times" }, lines.map((line) => el("div", { text: line })));
}

function reportRow(answer, entry, times, scale) {
  const report = entry.report;
  const label = verdictLabel(report);
  const dataset = { index: report.index, reportMs: times.report };
  if (times.wall !== null) dataset.wallMs = times.wall;
  if (times.hasStages) dataset.stagesMs = times.stages;
  if (timedOut(report)) dataset.timedOut = "true";
  const row = el("tr", { dataset, tabindex: "0" }, [
    el("td", { className: "num", text: report.index + 1 }),
    el("td", { className: "sentence-text", title: entry.received, text: entry.received }),
    el("td", {}, verdictCell(entry)),
    el("td", { className: "tl-cell" }, [timelineNode(answer, entry, times, scale)]),
    el("td", {}, [timesNode(answer, entry, times)]),
  ]);
  row.addEventListener("click", () => showDetails(report.index));
  return row;
}

// A sentence's verdict and tags, the same everywhere: one verdict chip (with the reason an
// unverified or skipped one has), then the whole-sentence FAVA tags, then what the client got.
function verdictCell(entry) {
  const report = entry.report;
  const label = verdictLabel(report);
  const out = [el("span", { className: `chip verdict-${label}`, text: verdictPhrase(report), title: VERDICT_WORDS[label] })];
  for (const tag of (report.tags || []).filter((t) => isWhole(t, report))) out.push(favaBadge(tag.type));
  for (const type of new Set(entry.marks.map((mark) => mark.type))) out.push(favaBadge(type));
  if (entry.outcome === "corrected") out.push(el("span", { className: "outcome applied", text: "corrected" }));
  if (entry.outcome === "suggested") out.push(el("span", { className: "outcome suggested", text: "suggestion only" }));
  return out;
}

// ------------------------------------------------------------------ details panel
function section(title, ...children) {
  return el("section", { className: "detail" }, [el("h3", { text: title }), ...children]);
}

function keyValues(pairs) {
  const list = el("dl", { className: "kv" });
  for (const [key, value] of pairs) {
    if (value === undefined || value === null || value === "") continue;
    list.append(el("dt", { text: key }), el("dd", { text: value }));
  }
  return list;
}

// Where a passage comes from: a link for an http(s) URL, otherwise its name as the proxy
// sends it (a file of the server's corpus by its corpus name, a place in the request).
function sourceNode(passage) {
  const url = safeUrl(passage.url) || safeUrl(passage.source);
  if (url) {
    return el("a", { href: url, target: "_blank", rel: "noopener noreferrer", className: "source-link",
      text: passage.source && safeUrl(passage.source) ? passage.source : url });
  }
  // Where it is from is said by the stylesheet (data-where), so the element's text is the name.
  const where = /^messages\[|^factcheck\./.test(passage.source || "") ? "request" : "corpus";
  return el("span", { className: "source-name", dataset: { where }, text: passage.source || passage.id });
}

function passageNode(passage, rank, supports) {
  const url = safeUrl(passage.url) || safeUrl(passage.source);
  const title = passage.title || passage.source || passage.id;
  const heading = url
    ? el("a", { href: url, target: "_blank", rel: "noopener noreferrer", className: "passage-title", text: title })
    : el("span", { className: "passage-title", text: title });
  return el("li", { className: "passage" }, [
    el("div", { className: "passage-head" }, [
      el("span", { className: "rank", text: `${rank + 1}.` }), heading,
      el("span", { className: "muted", text: ` ${passage.provider} · score ${Number(passage.score).toFixed(3)}` }),
    ]),
    el("blockquote", { text: passage.text }),
    el("div", { className: "muted source" }, [sourceNode(passage)]),
    supports && supports.length
      ? el("div", { className: "muted supports", text: `supports sentence${supports.length > 1 ? "s" : ""} ${supports.join(", ")}` })
      : null,
  ]);
}

function memoryText(memory) {
  const cb = Number(memory.closed_book_similarity).toFixed(2);
  const ctx = Number(memory.context_similarity).toFixed(2);
  return `${memory.flagged ? "flagged" : "not flagged"}: closed-book ${cb} vs context ${ctx} (margin ${Number(memory.margin).toFixed(2)})`;
}

function receivedSection(entry) {
  const report = entry.report;
  if (entry.outcome === "corrected") {
    return section("What your client received", el("p", { className: "received-text", text: entry.received }),
      el("p", { className: "muted", text: "corrected; the model wrote:" }), el("p", {}, [el("del", { text: report.text })]));
  }
  const revision = report.revision;
  const parts = [el("p", { className: "received-text", text: entry.received })];
  if (entry.outcome === "suggested") {
    parts.push(el("p", { className: "muted", text: "as written: the corrections below are suggestions only, not applied" +
      (revision && revision.reason ? ` (${revision.reason}${revision.rule ? `; gate rule ${revision.rule}` : ""})` : "") }));
  }
  return section("What your client received", ...parts);
}

function showDetails(index) {
  const answer = ui.answer;
  const entry = answer && answer.sentences.get(index);
  if (!entry) return;
  const report = entry.report;
  const verdict = report.verdict || {};
  const label = verdictLabel(report);
  ui.selected = index;
  $("details-title").textContent = `Sentence ${index + 1}: ${verdictPhrase(report)}`;
  const parts = [el("p", { className: `quote verdict-${label}`, text: report.text }), el("div", { className: "verdict-line" }, verdictCell(entry))];
  const scores = Object.entries(verdict.scores || {}).map(([k, v]) => `${k} ${Number(v).toFixed(2)}`).join(", ");
  parts.push(section("Verdict", keyValues([
    ["label", `${label} (${VERDICT_WORDS[label] || ""})`], ["reason", verdict.reason], ["scores", scores], ["backend", verdict.backend],
    ["QUIP", report.quip != null ? Number(report.quip).toFixed(2) : null],
    ["memory", report.memory ? memoryText(report.memory) : null],
  ])));
  parts.push(receivedSection(entry));
  if (verdict.evidence_sentence) {
    parts.push(section("Deciding evidence", el("blockquote", { className: "evidence", text: verdict.evidence_sentence })));
  }
  const proposals = (report.edits || []).length ? report.edits : (report.tags || []).filter((t) => t.replacement != null)
    .map((t) => ({ original: t.text, replacement: t.replacement, tag: t.type }));
  if (proposals.length) {
    const applied = entry.outcome === "corrected";
    const items = proposals.map((edit) => {
      const shown = applied
        ? [el("del", { text: edit.original }), el("ins", { text: edit.replacement })]
        : [el("mark", { text: edit.original }), el("span", { className: "suggestion", text: `${edit.replacement}?` })];
      return el("li", { className: `edit ${applied ? "applied" : "suggested"}` }, [
        ...shown, edit.tag ? favaBadge(edit.tag) : null,
        edit.evidence ? el("blockquote", { text: edit.evidence }) : null,
      ]);
    });
    parts.push(section(applied ? "Corrections applied" : "Corrections suggested (not applied)", el("ul", {}, items)));
  }
  if (report.revision && report.revision.suggested && entry.outcome !== "corrected") {
    parts.push(section("Proposed sentence (not applied)", el("p", { text: report.revision.suggested })));
  }
  if ((report.tags || []).length) {
    parts.push(section("FAVA tags", el("ul", {}, report.tags.map((tag) => el("li", {}, [
      favaBadge(tag.type),
      document.createTextNode(` ${FAVA_WORDS[tag.type] || ""}: “${tag.text}”${tag.replacement != null ? ` → “${tag.replacement}”` : ""}`),
    ])))));
  }
  if ((report.evidence || []).length) {
    parts.push(section("Evidence and sources", el("ol", { className: "passages" }, report.evidence.map((p, i) => passageNode(p, i)))));
  }
  if ((report.questions || []).length) {
    parts.push(section("Verification questions", el("ul", {}, report.questions.map((q) => el("li", { text: q.text })))));
  }
  parts.push(section("Timings", timingsDetail(answer, entry)));
  $("details-body").replaceChildren(...parts);
  $("details").hidden = false;
  render();
}

function timingsDetail(answer, entry) {
  const report = entry.report;
  const times = timesOf(answer, entry);
  const rows = [];
  const row = (name, value, className) =>
    rows.push(el("tr", className ? { className } : {}, [el("td", { text: name }), el("td", { className: "num", text: value })]));
  if (timedOut(report)) {
    row("checker", "timed out", "timeout");
  } else if (times.hasStages) {
    for (const [stage, value] of Object.entries(report.timings_ms)) row(stage, ms(value));
    row("stages total (checker)", ms(times.stages), "total");
  } else {
    row("checker", "no stage timings in this report");
  }
  if (answer.mode === "correct") {
    row("arrived (text + report), since Ask", ms(times.report));
  } else {
    if (times.textEnd !== null) row("last character received, since Ask", ms(times.textEnd));
    row("report received, since Ask", ms(times.report));
    if (times.wall !== null) row("wall: last character → report", ms(times.wall), "total");
    if (times.other !== null) row("other: wall − stages (queue, cut, transport)", ms(times.other));
  }
  const note = timedOut(report)
    ? el("p", { className: "muted", text: "The check ran past the per-sentence budget (check.sentence_budget_s) and " +
      "was stopped: no verdict and no stage timings." })
    : null;
  return el("div", {}, [el("table", { className: "timings" }, rows), note]);
}

// ------------------------------------------------------------------ summary
function renderSummary(summary) {
  const box = $("summary");
  const mix = Object.entries(summary.verdicts || {}).map(([label, count]) =>
    el("span", { className: `chip verdict-${label}`, text: `${label}: ${count}`, title: VERDICT_WORDS[label] }));
  const applied = summary.mode === "correct";
  const parts = [el("h2", { text: "Summary" }), el("div", { className: "mix" }, mix),
    keyValues([
      ["sentences", summary.sentences],
      ["mode", summary.mode],
      ["added latency", summary.added_latency_ms != null ? `${ms(summary.added_latency_ms)} after the model finished (proxy's clock)` : null],
      ["auto-AIS", summary.attr_auto != null ? Number(summary.attr_auto).toFixed(2) : null],
      [applied ? "edits applied" : "edits", (summary.edits || []).length || null],
      ["grounding prompt", summary.grounding_prompt ? summary.grounding_prompt.instruction : null],
    ])];
  if ((summary.attribution_report || []).length) {
    const supports = new Map();
    for (const [index, ids] of Object.entries(summary.alignment || {})) {
      for (const id of ids) pushPiece(supports, id, Number(index) + 1);
    }
    parts.push(el("h3", { text: "Attribution report" }),
      el("ol", { className: "passages" }, summary.attribution_report.map((p, i) => passageNode(p, i, supports.get(p.id)))));
  }
  box.replaceChildren(...parts);
  box.hidden = false;
  if (ui.answer) renderMeta(ui.answer);
}

// ------------------------------------------------------------------ start-up
async function loadModels() {
  try {
    const response = await fetch("/v1/models");
    if (!response.ok) return;
    const body = await response.json();
    const ids = (body.data || []).map((m) => m.id).filter((id) => typeof id === "string");
    $("models").replaceChildren(...ids.map((id) => el("option", { value: id })));
    if (ids.length && !$("model").value) $("model").value = ids[0];
  } catch {
    // the model list is a convenience; typing a model name works without it
  }
}

function restoreMode() {
  const saved = localStorage.getItem("factcheck-mode");
  const input = saved && document.querySelector(`input[name="mode"][value="${CSS.escape(saved)}"]`);
  if (input) input.checked = true;
  $("mode").addEventListener("change", () => localStorage.setItem("factcheck-mode", selectedMode()));
}

function init() {
  $("ask").addEventListener("submit", ask);
  $("stop").addEventListener("click", stop);
  $("question").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      $("ask").requestSubmit();
    }
  });
  $("close-details").addEventListener("click", () => {
    $("details").hidden = true;
    ui.selected = null;
    render();
  });
  restoreMode();
  loadModels();
  connect();
}

document.addEventListener("DOMContentLoaded", init);
