// The answer's summary: the verdict mix, the added latency, auto-AIS, edits and the
// attribution report.

import { $, el, ms, pushPiece } from "./dom.js";
import { ui } from "./state.js";
import { VERDICT_WORDS } from "./verdicts.js";
import { renderMeta } from "./render.js";
import { keyValues, passageNode } from "./details.js";

export function renderSummary(summary) {
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
