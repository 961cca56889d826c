// The page's state, shared by the modules: the websocket, the answer being shown, the
// selected sentence.

export const ui = {
  ws: null,
  retryMs: 500,
  answer: null,
  selected: null,
  renderQueued: false,
  showDetails: null, // details.js's showDetails, set by app.js
};
