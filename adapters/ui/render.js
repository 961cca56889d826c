// Rendering the answer: the received text as Markdown built into DOM nodes, each sentence a
// span coloured by its verdict with its corrections marked, and what the client received.

import { $, el, ms, pushPiece } from "./dom.js";
import { ui, holdsSentences } from "./state.js";
import { VERDICT_WORDS, FAVA_WORDS, isWhole, verdictLabel, verdictPhrase, timedOut, favaBadge } from "./verdicts.js";
import { parseBlocks, BOLD, EM, CODE, HIDDEN, inlineStyles } from "./markdown.js";

export function scheduleRender() {
  if (ui.renderQueued) return;
  ui.renderQueued = true;
  requestAnimationFrame(() => {
    ui.renderQueued = false;
    render();
  });
}

export function render() {
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
  node.addEventListener("click", () => ui.showDetails(report.index));
  node.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      ui.showDetails(report.index);
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

function endingNote(answer) {
  const blocked = answer.blocked;
  const texts = {
    blocked: blocked && `✕ Blocked: the model's next sentence was judged ${blocked.reason} ` +
      `(“${blocked.report.text}”), so your client received the answer up to here; the rest was withheld ` +
      "and the model's stream closed.",
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
  } else if (answer.mode === "block") {
    text = "Block mode: your client received each sentence only after its check, as the model wrote it" +
      (answer.blocked ? `, until one was judged ${answer.blocked.reason}: that sentence and the rest were withheld.`
        : "; nothing was blocked.");
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

export function renderMeta(answer) {
  const parts = [];
  if (answer.firstTextAt !== null) {
    parts.push(`first text ${ms(answer.firstTextAt - answer.sentAt)} after Ask`);
    const reports = [...answer.sentences.values()].map((entry) => entry.reportAt);
    if (holdsSentences(answer.mode) && reports.length) {
      // Correct and block mode hold each sentence until its check: the first one comes with its report.
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
