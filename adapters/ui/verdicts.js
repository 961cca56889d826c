// The verdict and FAVA vocabulary: a sentence's verdict label and phrase, the words that
// explain each verdict and tag, and the badge that shows a tag.

import { el } from "./dom.js";

// Tags FAVA defines over a whole sentence; other types mark a span.
const SENTENCE_TAGS = new Set(["contradictory", "subjective", "unverifiable"]);

export const VERDICT_WORDS = {
  attributable: "supported: a passage found says the same thing",
  extrapolatory: "not supported: the passages found neither confirm nor contradict it",
  contradictory: "contradicted: a passage found says otherwise",
  unverified: "the check did not finish, so nothing is known",
  skipped: "not checked on purpose: not a factual claim",
};

export const FAVA_WORDS = {
  entity: "a wrong name, number or date",
  relation: "the right things in a wrong relation",
  contradictory: "the whole sentence is contradicted",
  invented: "names something no source knows",
  subjective: "an opinion, not a fact",
  unverifiable: "no passage found can confirm or refute it",
  edit: "a correction",
};

export function isWhole(tag, report) {
  return SENTENCE_TAGS.has(tag.type) || (tag.start <= report.start && tag.end >= report.end);
}

export function verdictLabel(report) {
  return report.verdict ? report.verdict.label : "unverified";
}

// The verdict in words, with the reason an unverified or skipped sentence has one.
export function verdictPhrase(report) {
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

export function timedOut(report) {
  return verdictLabel(report) === "unverified" && report.verdict && report.verdict.reason === "timeout";
}

export function favaBadge(type) {
  return el("span", { className: `badge fava-${type}`, text: type, title: `FAVA ${type}: ${FAVA_WORDS[type] || type}` });
}
