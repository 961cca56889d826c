// The Markdown parser of the received text: blocks (ranges of the text, markup left out) and
// inline styles (flags per character). It returns ranges and flags, never HTML: render.js
// builds the DOM nodes from them, text as text.

// Blocks of the received text: headings, paragraphs, lists, quotes, fenced code, rules.
// Each block holds ranges of the text (markup prefixes left out); nothing is ever parsed as
// HTML: text stays text.
export function parseBlocks(text) {
  const blocks = [];
  let open = null; // the paragraph, list or quote that the next line may continue
  let fence = null;
  let pos = 0;
  while (pos < text.length) {
    const newline = text.indexOf("\n", pos);
    const end = newline < 0 ? text.length : newline;
    const line = text.slice(pos, end);
    const next = newline < 0 ? text.length : newline + 1;
    if (fence) {
      if (/^\s{0,3}(```|~~~)\s*$/.test(line) && line.trim().startsWith(fence.marker)) {
        fence = null;
      } else {
        fence.block.ranges.push([pos, next]);
      }
      pos = next;
      continue;
    }
    let m;
    if ((m = /^\s{0,3}(```+|~~~+)/.exec(line))) {
      fence = { marker: m[1].slice(0, 3), block: { kind: "code", ranges: [] } };
      blocks.push(fence.block);
      open = null;
    } else if (!line.trim()) {
      open = null;
    } else if ((m = /^ {0,3}(#{1,6})[ \t]+/.exec(line)) || /^ {0,3}#{1,6}$/.test(line)) {
      const prefix = m ? m[0].length : line.length;
      blocks.push({ kind: `h${m ? m[1].length : line.trim().length}`, ranges: [[pos + prefix, end]] });
      open = null;
    } else if (/^ {0,3}([-*_])( *\1){2,} *$/.test(line)) {
      blocks.push({ kind: "hr", ranges: [] });
      open = null;
    } else if ((m = /^(\s*)([-*+]|\d{1,9}[.)])[ \t]+/.exec(line))) {
      const ordered = /\d/.test(m[2]);
      if (!open || open.kind !== (ordered ? "ol" : "ul")) {
        open = { kind: ordered ? "ol" : "ul", items: [], start: ordered ? parseInt(m[2], 10) : null };
        blocks.push(open);
      }
      open.items.push([[pos + m[0].length, end]]);
    } else if ((m = /^ {0,3}> ?/.exec(line))) {
      if (!open || open.kind !== "quote") {
        open = { kind: "quote", ranges: [] };
        blocks.push(open);
      }
      open.ranges.push([pos + m[0].length, next]);
    } else if (open && (open.kind === "ul" || open.kind === "ol")) {
      const item = open.items[open.items.length - 1];
      item.push([pos - 1, end]); // a continuation line of the item (with its line break)
    } else if (open && open.kind === "p") {
      open.ranges[0][1] = end;
    } else {
      open = { kind: "p", ranges: [[pos, end]] };
      blocks.push(open);
    }
    pos = next;
  }
  return blocks;
}

export const BOLD = 1;

export const EM = 2;

export const CODE = 4;

export const HIDDEN = 8;

// Inline Markdown of text[a, b): `code`, **strong** / __strong__, *em* / _em_, as flags per
// character (the markers themselves HIDDEN).
export function inlineStyles(text, a, b, flags) {
  const slice = text.slice(a, b);
  const set = (from, to, flag) => {
    for (let i = from; i < to; i++) flags[a + i] |= flag;
  };
  const free = (from, to) => {
    for (let i = from; i < to; i++) if (flags[a + i] & (CODE | HIDDEN)) return false;
    return true;
  };
  for (const m of slice.matchAll(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g)) {
    set(m.index, m.index + m[1].length, HIDDEN);
    set(m.index + m[1].length, m.index + m[0].length - m[1].length, CODE);
    set(m.index + m[0].length - m[1].length, m.index + m[0].length, HIDDEN);
  }
  const pairs = [
    [/\*\*(?=\S)([\s\S]*?\S)\*\*/g, BOLD, 2],
    [/(?<![\w_])__(?=\S)([\s\S]*?\S)__(?![\w_])/g, BOLD, 2],
    [/(?<!\*)\*(?=[^\s*])([^*]*?[^\s*])\*(?!\*)/g, EM, 1],
    [/(?<![\w_])_(?=[^\s_])([^_]*?[^\s_])_(?![\w_])/g, EM, 1],
  ];
  for (const [re, flag, width] of pairs) {
    for (const m of slice.matchAll(re)) {
      const start = m.index;
      const stop = m.index + m[0].length;
      if (!free(start, start + width) || !free(stop - width, stop)) continue;
      set(start, start + width, HIDDEN);
      set(start + width, stop - width, flag);
      set(stop - width, stop, HIDDEN);
    }
  }
}
