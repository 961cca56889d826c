// The answer's state: the text the client received and when, and each sentence's report with
// its outcome and inline marks, updated per websocket message.

import { $, now } from "./dom.js";
import { ui, holdsSentences } from "./state.js";
import { isWhole } from "./verdicts.js";
import { updateButtons, showError } from "./controls.js";
import { scheduleRender, render } from "./render.js";
import { renderReports } from "./timelines.js";
import { renderSummary } from "./summary.js";

export function startAnswer(question, mode) {
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
    ending: null, // done | blocked | stopped | failed | lost | refused
    blocked: null, // block mode: the {reason, report} of the sentence the answer stopped at
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

export function finishAnswer(ending, message) {
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

export function onMessage(message) {
  const answer = ui.answer;
  if (message.type === "done") {
    if (answer && !answer.done) {
      const ending = answer.failure ? "failed" : answer.blocked ? "blocked" : answer.stopRequested ? "stopped" : "done";
      finishAnswer(ending, answer.failure);
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
  if (message.type === "blocked") {
    // Block mode: the answer stopped before this sentence; it never reached the client.
    withTexts(answer, message.report.evidence);
    answer.blocked = { reason: message.reason, report: message.report };
    onFactcheck({ type: "summary", summary: message.summary });
    scheduleRender();
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
  if (holdsSentences(answer.mode)) {
    // Correct and block mode: the sentence's text, as sent to the client (corrected or as
    // written), is the content chunk just before its report; both arrive together.
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
