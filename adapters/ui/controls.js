// The page's controls: the connection status, the Ask and Stop buttons, the error box, the
// chosen mode and the largest message the server accepts.

import { $ } from "./dom.js";
import { ui } from "./state.js";

export function setStatus(state, text) {
  const status = $("status");
  status.dataset.state = state;
  status.textContent = text;
}

export function connected() {
  return ui.ws && ui.ws.readyState === WebSocket.OPEN;
}

export function updateButtons() {
  const streaming = Boolean(ui.answer && !ui.answer.done);
  $("send").disabled = streaming || !connected();
  $("stop").disabled = !streaming;
}

export function maxMessageBytes() {
  const limit = Number(document.body.dataset.maxMessageBytes);
  return Number.isFinite(limit) && limit > 0 ? limit : null;
}

export function showError(text) {
  const box = $("error");
  box.hidden = !text;
  box.textContent = text || "";
  delete box.dataset.kind;
}

export function selectedMode() {
  const checked = document.querySelector('input[name="mode"]:checked');
  return checked ? checked.value : "annotate";
}
