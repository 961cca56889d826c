// DOM helpers shared by the UI's modules: an element by id, an element built from props and
// children (text only ever through textContent), http(s)-only URLs, times in words.

export const $ = (id) => document.getElementById(id);

export function el(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null) continue;
    if (key === "text") node.textContent = String(value);
    else if (key === "className") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child !== null && child !== undefined && child !== false) node.append(child);
  }
  return node;
}

export function safeUrl(url) {
  if (typeof url !== "string" || !url) return null;
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch {
    return null;
  }
}

export function ms(value) {
  const n = Number(value);
  if (!Number.isFinite(n)) return "–";
  if (n >= 10000) return `${(n / 1000).toFixed(1)} s`;
  return `${n.toFixed(n < 10 ? 1 : 0)} ms`;
}

export function now() {
  return performance.now();
}

export function pushPiece(map, key, value) {
  if (!map.has(key)) map.set(key, []);
  map.get(key).push(value);
}
