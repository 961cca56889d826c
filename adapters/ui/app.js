// factcheck UI: asks through the proxy's websocket (/v1/ws) and shows the answer as it
// streams, rendered as Markdown, each sentence coloured by its verdict when its report
// arrives, with what the client actually received stated per answer.
//
// Everything that comes from the model or from evidence is untrusted: it only ever reaches
// the page through createElement / createTextNode / textContent, never through an HTML
// parser (tests/adapters/ui checks every module for the HTML sinks), and only http(s) URLs
// become links.
//
// This entry module wires the others (native ES modules, no build step):
// stream_client.js (the websocket), answer.js (the answer's state), markdown.js (the Markdown
// parser), render.js (the answer), timelines.js (the sentence table), details.js (the details
// panel), summary.js, controls.js, verdicts.js, state.js and dom.js (shared helpers).

import { $, el } from "./dom.js";
import { ui } from "./state.js";
import { selectedMode } from "./controls.js";
import { render } from "./render.js";
import { showDetails } from "./details.js";
import { connect, ask, stop } from "./stream_client.js";

// Clicking a sentence opens the details panel (render.js and timelines.js call it through
// the state: details.js imports them).
ui.showDetails = showDetails;

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
