// factcheck UI: asks through the proxy's websocket (/v1/ws) and shows the answer as it
// streams, each sentence coloured by its verdict when its report arrives, FAVA tags inline.
// Everything that comes from the model or from evidence is untrusted: it is only ever put
// in the page with textContent (never innerHTML), and links only get http(s) URLs.
"use strict";

const WHOLE_SENTENCE_TAGS = new Set(["contradictory", "invented", "subjective", "unverifiable"]);
const $ = (id) => document.getElementById(id);

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
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

function safeUrl(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch {
    return null;
  }
}

function ms(value) {
  return `${Number(value).toFixed(value < 10 ? 1 : 0)} ms`;
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
  ws.addEventListener("close", () => {
    setStatus("closed", "disconnected, retrying…");
    if (ui.answer && !ui.answer.done) finishAnswer("connection lost");
    updateButtons();
    setTimeout(connect, ui.retryMs);
    ui.retryMs = Math.min(ui.retryMs * 2, 8000);
  });
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
  const request = {
    model: $("model").value.trim() || undefined,
    messages: [{ role: "user", content: question }],
    ...extra,
    stream: true,
    factcheck: { ...(extra.factcheck || {}), mode: selectedMode() },
  };
  return request;
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
  startAnswer(question, request.factcheck.mode);
  ui.ws.send(JSON.stringify({ type: "chat", request }));
  updateButtons();
}

function stop() {
  if (connected()) ui.ws.send(JSON.stringify({ type: "cancel" }));
}

// ------------------------------------------------------------------ the answer's state
function startAnswer(question, mode) {
  ui.answer = {
    question,
    mode,
    text: "",
    lastContentStart: 0,
    sentences: new Map(), // index -> {report, start, end} in the text as shown
    passages: new Map(), // provider + id -> text: a passage's text comes once per answer
    summary: null,
    done: false,
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

function finishAnswer(reason) {
  if (!ui.answer) return;
  ui.answer.done = true;
  $("answer").dataset.state = reason ? "stopped" : "done";
  if (reason) showError(reason);
  updateButtons();
  scheduleRender();
}

function onMessage(message) {
  if (message.type === "done") {
    finishAnswer(null);
    return;
  }
  if (message.error) {
    showError(message.error.message || "error");
    return;
  }
  const answer = ui.answer;
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
        answer.lastContentStart = answer.text.length;
        answer.text += content;
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

function onFactcheck(factcheck) {
  const answer = ui.answer;
  if (factcheck.type === "sentence" && factcheck.report) {
    const report = factcheck.report;
    withTexts(answer, report.evidence);
    // In correct mode a sentence's (possibly corrected) text is the chunk just before its
    // report; otherwise the report's offsets are offsets in the text as streamed.
    const span = answer.mode === "correct"
      ? { start: answer.lastContentStart, end: answer.text.length }
      : { start: report.start, end: report.end };
    answer.sentences.set(report.index, { report, ...span });
    addReportRow(report);
  } else if (factcheck.type === "summary") {
    withTexts(answer, factcheck.summary.attribution_report);
    answer.summary = factcheck.summary;
    renderSummary(factcheck.summary);
  }
}

function showError(text) {
  const box = $("error");
  box.hidden = !text;
  box.textContent = text || "";
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
  const out = $("answer");
  if (!answer) return;
  const nodes = [];
  const sentences = [...answer.sentences.values()].sort((a, b) => a.start - b.start);
  let cursor = 0;
  for (const sentence of sentences) {
    if (sentence.start < cursor || sentence.end > answer.text.length) continue;
    if (sentence.start > cursor) nodes.push(document.createTextNode(answer.text.slice(cursor, sentence.start)));
    nodes.push(sentenceNode(sentence.report));
    cursor = sentence.end;
  }
  if (cursor < answer.text.length) {
    nodes.push(el("span", { className: "pending", text: answer.text.slice(cursor) }));
  }
  if (!answer.done) nodes.push(el("span", { className: "caret", "aria-hidden": "true" }));
  out.replaceChildren(...nodes);
}

// Inline marks of a sentence: FAVA span tags, and suggested edits no tag covers. Offsets are
// made relative to the sentence's own text.
function inlineMarks(report) {
  const marks = [];
  const inside = (start, end) => start >= report.start && end <= report.end && end > start;
  for (const tag of report.tags || []) {
    const whole = WHOLE_SENTENCE_TAGS.has(tag.type) || (tag.start <= report.start && tag.end >= report.end);
    if (whole || !inside(tag.start, tag.end)) continue;
    const edit = (report.edits || []).find((e) => e.start === tag.start && e.end === tag.end);
    const replacement = tag.replacement ?? (edit ? edit.replacement : null);
    marks.push({ type: tag.type, start: tag.start - report.start, end: tag.end - report.start, replacement });
  }
  for (const edit of report.edits || []) {
    const covered = marks.some((m) => m.start + report.start < edit.end && edit.start < m.end + report.start);
    if (covered || !inside(edit.start, edit.end)) continue;
    marks.push({
      type: edit.tag || "edit", start: edit.start - report.start, end: edit.end - report.start,
      replacement: edit.replacement,
    });
  }
  marks.sort((a, b) => a.start - b.start);
  return marks;
}

function sentenceNode(report) {
  const label = report.verdict ? report.verdict.label : "unverified";
  const node = el("span", {
    className: `sentence verdict-${label}`,
    role: "button",
    tabindex: "0",
    title: report.verdict && report.verdict.reason ? `${label}: ${report.verdict.reason}` : label,
    dataset: { index: report.index, verdict: label },
  });
  if (ui.selected === report.index) node.classList.add("selected");
  const text = report.text;
  let cursor = 0;
  for (const mark of inlineMarks(report)) {
    if (mark.start < cursor) continue;
    node.append(document.createTextNode(text.slice(cursor, mark.start)));
    node.append(markNode(mark, text.slice(mark.start, mark.end)));
    cursor = mark.end;
  }
  node.append(document.createTextNode(text.slice(cursor)));
  for (const tag of report.tags || []) {
    const whole = WHOLE_SENTENCE_TAGS.has(tag.type) || (tag.start <= report.start && tag.end >= report.end);
    if (whole) node.append(el("span", { className: `badge fava-${tag.type}`, text: tag.type }));
  }
  node.addEventListener("click", () => showDetails(report.index));
  node.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      showDetails(report.index);
    }
  });
  return node;
}

// FAVA markup as elements: <entity><delete>wrong</delete><mark>right</mark></entity>.
function markNode(mark, original) {
  const wrapper = el("span", {
    className: `fava fava-${mark.type}`,
    title: mark.replacement != null ? `${mark.type}: "${original}" → "${mark.replacement}"` : mark.type,
    dataset: { type: mark.type },
  });
  if (mark.replacement != null) {
    wrapper.append(el("del", { text: original }), el("ins", { text: mark.replacement }));
  } else {
    wrapper.append(el("mark", { text: original }));
  }
  wrapper.append(el("sup", { className: "fava-type", text: mark.type }));
  return wrapper;
}

// ------------------------------------------------------------------ per-sentence rows and timings
function timingBar(timings) {
  const entries = Object.entries(timings || {}).filter(([, value]) => value > 0);
  const bar = el("div", { className: "timing-bar" });
  for (const [stage, value] of entries) {
    const part = el("span", { className: `stage stage-${stage}`, title: `${stage}: ${ms(value)}`, text: stage });
    part.style.flexGrow = String(value);
    bar.append(part);
  }
  if (!entries.length) bar.append(el("span", { className: "muted", text: "no timings" }));
  return bar;
}

function totalMs(timings) {
  return Object.values(timings || {}).reduce((sum, value) => sum + value, 0);
}

function addReportRow(report) {
  const label = report.verdict ? report.verdict.label : "unverified";
  const row = el("tr", { dataset: { index: report.index }, tabindex: "0" }, [
    el("td", { text: report.index + 1 }),
    el("td", {}, [el("span", { className: `chip verdict-${label}`, text: label })]),
    el("td", {}, [timingBar(report.timings_ms)]),
    el("td", { className: "num", text: ms(totalMs(report.timings_ms)) }),
  ]);
  row.addEventListener("click", () => showDetails(report.index));
  const rows = $("report-rows");
  const after = [...rows.children].find((r) => Number(r.dataset.index) > report.index);
  rows.insertBefore(row, after || null);
  $("reports").hidden = false;
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

function passageNode(passage, rank) {
  const url = safeUrl(passage.url || passage.source);
  const title = passage.title || passage.source || passage.id;
  const heading = url
    ? el("a", { href: url, target: "_blank", rel: "noopener noreferrer nofollow", text: title })
    : el("span", { text: title });
  return el("li", { className: "passage" }, [
    el("div", { className: "passage-head" }, [
      el("span", { className: "rank", text: `${rank + 1}.` }), heading,
      el("span", { className: "muted", text: ` ${passage.provider} · score ${Number(passage.score).toFixed(3)}` }),
    ]),
    el("blockquote", { text: passage.text }),
    passage.source && passage.source !== title ? el("div", { className: "muted source", text: passage.source }) : null,
  ]);
}

function memoryText(memory) {
  const cb = Number(memory.closed_book_similarity).toFixed(2);
  const ctx = Number(memory.context_similarity).toFixed(2);
  return `${memory.flagged ? "flagged" : "not flagged"}: closed-book ${cb} vs context ${ctx} (margin ${Number(memory.margin).toFixed(2)})`;
}

function showDetails(index) {
  const entry = ui.answer && ui.answer.sentences.get(index);
  if (!entry) return;
  const report = entry.report;
  const verdict = report.verdict || {};
  ui.selected = index;
  $("details-title").textContent = `Sentence ${index + 1}: ${verdict.label}`;
  const parts = [el("p", { className: `quote verdict-${verdict.label}`, text: report.text })];
  const scores = Object.entries(verdict.scores || {}).map(([k, v]) => `${k} ${Number(v).toFixed(2)}`).join(", ");
  parts.push(section("Verdict", keyValues([
    ["label", verdict.label], ["reason", verdict.reason], ["scores", scores], ["backend", verdict.backend],
    ["QUIP", report.quip != null ? Number(report.quip).toFixed(2) : null],
    ["memory", report.memory ? memoryText(report.memory) : null],
  ])));
  if (verdict.evidence_sentence) {
    parts.push(section("Deciding evidence", el("blockquote", { className: "evidence", text: verdict.evidence_sentence })));
  }
  if ((report.edits || []).length) {
    parts.push(section("Corrections", el("ul", {}, report.edits.map((edit) => el("li", { className: "edit" }, [
      el("del", { text: edit.original }), document.createTextNode(" → "), el("ins", { text: edit.replacement }),
      edit.tag ? el("span", { className: `badge fava-${edit.tag}`, text: edit.tag }) : null,
      edit.evidence ? el("blockquote", { text: edit.evidence }) : null,
    ])))));
  }
  if (report.corrected_text) parts.push(section("Corrected sentence", el("p", { text: report.corrected_text })));
  if ((report.tags || []).length) {
    parts.push(section("FAVA tags", el("ul", {}, report.tags.map((tag) => el("li", {}, [
      el("span", { className: `badge fava-${tag.type}`, text: tag.type }),
      document.createTextNode(` “${tag.text}”${tag.replacement != null ? ` → “${tag.replacement}”` : ""}`),
    ])))));
  }
  if ((report.evidence || []).length) {
    parts.push(section("Evidence and sources", el("ol", { className: "passages" }, report.evidence.map(passageNode))));
  }
  if ((report.questions || []).length) {
    parts.push(section("Verification questions", el("ul", {}, report.questions.map((q) => el("li", { text: q.text })))));
  }
  const timings = Object.entries(report.timings_ms || {});
  parts.push(section("Timings", timings.length
    ? el("table", { className: "timings" }, [
      ...timings.map(([stage, value]) => el("tr", {}, [el("td", { text: stage }), el("td", { className: "num", text: ms(value) })])),
      el("tr", { className: "total" }, [el("td", { text: "total" }), el("td", { className: "num", text: ms(totalMs(report.timings_ms)) })]),
    ])
    : el("p", { className: "muted", text: "no stage timings in this report" })));
  $("details-body").replaceChildren(...parts);
  $("details").hidden = false;
  render();
}

// ------------------------------------------------------------------ summary
function renderSummary(summary) {
  const box = $("summary");
  const mix = Object.entries(summary.verdicts || {}).map(([label, count]) =>
    el("span", { className: `chip verdict-${label}`, text: `${label}: ${count}` }));
  const parts = [el("h2", { text: "Summary" }), el("div", { className: "mix" }, mix),
    keyValues([
      ["sentences", summary.sentences],
      ["mode", summary.mode],
      ["added latency", summary.added_latency_ms != null ? ms(summary.added_latency_ms) : null],
      ["auto-AIS", summary.attr_auto != null ? Number(summary.attr_auto).toFixed(2) : null],
      ["edits", (summary.edits || []).length || null],
    ])];
  if ((summary.attribution_report || []).length) {
    parts.push(el("h3", { text: "Attribution report" }),
      el("ol", { className: "passages" }, summary.attribution_report.map(passageNode)));
  }
  box.replaceChildren(...parts);
  box.hidden = false;
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
