// The page's state, shared by the modules: the websocket, the answer being shown, the
// selected sentence.

// Modes in which the proxy holds each sentence until its check: its text and report arrive together.
export function holdsSentences(mode) {
  return mode === "correct" || mode === "block";
}

export const ui = {
  ws: null,
  retryMs: 500,
  answer: null,
  selected: null,
  renderQueued: false,
  showDetails: null, // details.js's showDetails, set by app.js
};
