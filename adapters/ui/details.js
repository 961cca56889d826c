// The details panel of one sentence: verdict, what the client received, corrections, FAVA
// tags, evidence and sources, verification questions, timings.

import { $, el, safeUrl, ms } from "./dom.js";
import { ui, holdsSentences } from "./state.js";
import { VERDICT_WORDS, FAVA_WORDS, verdictLabel, verdictPhrase, timedOut, favaBadge } from "./verdicts.js";
import { render } from "./render.js";
import { timesOf, verdictCell } from "./timelines.js";

function section(title, ...children) {
  return el("section", { className: "detail" }, [el("h3", { text: title }), ...children]);
}

export function keyValues(pairs) {
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

export function passageNode(passage, rank, supports) {
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

export function showDetails(index) {
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
  if (holdsSentences(answer.mode)) {
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
