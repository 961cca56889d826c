// The websocket client: connects to the proxy's /v1/ws (and reconnects), sends a question as
// a chat request and Stop as a cancel, and hands each message to answer.js.

import { $ } from "./dom.js";
import { ui } from "./state.js";
import { setStatus, connected, updateButtons, maxMessageBytes, showError, selectedMode } from "./controls.js";
import { startAnswer, finishAnswer, onMessage } from "./answer.js";

export function connect() {
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

export function ask(event) {
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

export function stop() {
  if (!ui.answer || ui.answer.done) return;
  ui.answer.stopRequested = true;
  if (connected()) ui.ws.send(JSON.stringify({ type: "cancel" }));
}
