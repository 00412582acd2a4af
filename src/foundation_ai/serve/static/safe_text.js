// Text from the model, a tool or the server, made safe to show: the rule of the CLI
// (src/foundation_ai/_cli/safe_text.py), so the page and the terminal show the same thing.
// C0 controls except newline and tab (and "\r\n", read as a newline), DEL, C1 controls, the
// bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069)
// and U+2028/U+2029 are replaced by printable escapes ("\x1b", "\r", "\u202e", ...), so a
// "Trojan Source" command (https://trojansource.codes/) cannot show one thing and run another.
"use strict";

const SafeText = (() => {
  const NAMED = { "\r": "\\r", "\n": "\\n", "\t": "\\t", "\x1b": "\\x1b", "\x7f": "\\x7f" };
  const BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029";
  const UNSAFE = new RegExp(`[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f${BIDI}]`, "g");
  const UNSAFE_LINE = new RegExp(`[\\x00-\\x1f\\x7f-\\x9f${BIDI}]`, "g");

  function escape(ch) {
    if (NAMED[ch]) return NAMED[ch];
    const code = ch.charCodeAt(0);
    return code <= 0xff ? "\\x" + code.toString(16).padStart(2, "0") : "\\u" + code.toString(16).padStart(4, "0");
  }

  // visible(text): newlines and tabs kept; visibleLine(text): every control escaped (one line)
  function visible(text) {
    text = String(text ?? "");
    UNSAFE.lastIndex = 0;
    if (!UNSAFE.test(text)) return text;
    return text.replace(/\r\n/g, "\n").replace(UNSAFE, escape);
  }
  function visibleLine(text) {
    text = String(text ?? "");
    return text.replace(UNSAFE_LINE, escape);
  }
  function countControls(text) {
    return (String(text ?? "").match(UNSAFE) || []).length;
  }

  // The same text as DOM nodes: each escape is a <span class="ctl"> (styled, with the code
  // point in its title) so an escaped character stands out from text that looks like one.
  function nodes(text, oneLine) {
    text = String(text ?? "");
    const re = oneLine ? UNSAFE_LINE : UNSAFE;
    if (!oneLine) text = text.includes("\r\n") ? text.replace(/\r\n/g, "\n") : text;
    const out = [];
    let last = 0;
    re.lastIndex = 0;
    for (const m of text.matchAll(re)) {
      if (m.index > last) out.push(document.createTextNode(text.slice(last, m.index)));
      const span = document.createElement("span");
      span.className = "ctl";
      span.textContent = escape(m[0]);
      span.title = "U+" + m[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0") + " (shown escaped)";
      out.push(span);
      last = m.index + 1;
    }
    if (last < text.length || !out.length) out.push(document.createTextNode(text.slice(last)));
    return out;
  }

  // Escape every text node under ``root`` in place (after Markdown rendering).
  function escapeTree(root) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const hits = [];
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      UNSAFE.lastIndex = 0;
      if (UNSAFE.test(n.data)) hits.push(n);
    }
    for (const n of hits) n.replaceWith(...nodes(n.data, false));
  }

  return { visible, visibleLine, countControls, nodes, escapeTree, UNSAFE_LINE };
})();
