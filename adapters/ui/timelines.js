// The sentence table: a row per report with its verdict, its timeline (text arriving, waiting
// for the report, the checker's stages) on one time scale from Ask, and its times.

import { $, el, ms } from "./dom.js";
import { ui, holdsSentences } from "./state.js";
import { VERDICT_WORDS, isWhole, verdictLabel, verdictPhrase, timedOut, favaBadge } from "./verdicts.js";

function stageTotal(timings) {
  return Object.values(timings || {}).reduce((sum, value) => sum + value, 0);
}

// The sentence's times, this page's clock (ms since Ask), and the checker's stage total.
export function timesOf(answer, entry) {
  const rel = (t) => (t === null || t === undefined ? null : t - answer.sentAt);
  const times = {
    textStart: rel(entry.textStartAt),
    textEnd: rel(entry.textEndAt),
    report: rel(entry.reportAt),
    stages: stageTotal(entry.report.timings_ms),
    hasStages: Object.keys(entry.report.timings_ms || {}).length > 0,
  };
  times.wall = !holdsSentences(answer.mode) && times.textEnd !== null ? Math.max(0, times.report - times.textEnd) : null;
  times.other = times.wall !== null && times.hasStages ? Math.max(0, times.wall - times.stages) : null;
  return times;
}

export function renderReports() {
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
  $("timing-note").textContent = holdsSentences(answer.mode)
    ? `${answer.mode === "block" ? "Block" : "Correct"} mode: a sentence's text reaches your client together with its report, after its check. ` +
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
  if (!holdsSentences(answer.mode) && times.textStart !== null && times.textEnd !== null) {
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
  if (holdsSentences(answer.mode)) {
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
  row.addEventListener("click", () => ui.showDetails(report.index));
  return row;
}

// A sentence's verdict and tags, the same everywhere: one verdict chip (with the reason an
// unverified or skipped one has), then the whole-sentence FAVA tags, then what the client got.
export function verdictCell(entry) {
  const report = entry.report;
  const label = verdictLabel(report);
  const out = [el("span", { className: `chip verdict-${label}`, text: verdictPhrase(report), title: VERDICT_WORDS[label] })];
  for (const tag of (report.tags || []).filter((t) => isWhole(t, report))) out.push(favaBadge(tag.type));
  for (const type of new Set(entry.marks.map((mark) => mark.type))) out.push(favaBadge(type));
  if (entry.outcome === "corrected") out.push(el("span", { className: "outcome applied", text: "corrected" }));
  if (entry.outcome === "suggested") out.push(el("span", { className: "outcome suggested", text: "suggestion only" }));
  return out;
}
