// Model Markdown to DOM: marked (GFM: lists, headings, tables, code, links) then DOMPurify,
// both vendored in vendor/ (see vendor/README.md). Raw HTML written by the model is shown as
// text, never parsed; images from the model become links (no request leaves the page unasked);
// links open in a new tab without a referrer, and only http(s) and mailto links are kept;
// every text node is then escaped by SafeText (the CLI's rule). Code blocks get a Copy button.
"use strict";

const Markdown = (() => {
  const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const parser = new marked.Marked({ gfm: true, breaks: true });
  parser.use({
    // raw HTML is no Markdown construct here: "<b>" stays the text "<b>" (and Markdown around
    // it still works); a tokenizer returning nothing lets the next one (text) take the input
    tokenizer: { html() { return undefined; }, tag() { return undefined; } },
    renderer: {
      html(token) { return esc(token.text); },
      image(token) { return `<a href="${esc(token.href)}">[image: ${esc(token.text || token.href)}]</a>`; },
    },
  });
  const PURIFY = {
    RETURN_DOM_FRAGMENT: true,
    FORBID_TAGS: ["style", "img", "svg", "math", "form", "input", "button", "textarea", "select", "iframe"],
    FORBID_ATTR: ["style", "id", "name"],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:)/i,
  };

  function decorate(frag, onCopy) {
    for (const a of frag.querySelectorAll("a")) {
      const href = a.getAttribute("href") || "";
      if (!/^(?:https?:|mailto:)/i.test(href) || SafeText.countControls(href) || /\s/.test(href)) {
        a.replaceWith(...a.childNodes);  // not a link we follow: keep its text
        continue;
      }
      a.target = "_blank";
      a.rel = "noopener noreferrer nofollow";
      a.title = SafeText.visibleLine(href);
    }
    for (const pre of frag.querySelectorAll("pre")) {
      const box = document.createElement("div");
      box.className = "code";
      const bar = document.createElement("div");
      bar.className = "code-bar";
      const code = pre.querySelector("code");
      const lang = code && /language-([\w+-]+)/.exec(code.className || "");
      const label = document.createElement("span");
      label.textContent = lang ? lang[1] : "code";
      const copy = document.createElement("button");
      copy.type = "button";
      copy.className = "copy-code";
      copy.textContent = "Copy";
      copy.setAttribute("aria-label", "Copy the code");
      copy.addEventListener("click", () => onCopy(pre.textContent, copy));
      bar.append(label, copy);
      pre.replaceWith(box);
      box.append(bar, pre);
    }
    for (const table of frag.querySelectorAll("table")) {
      const wrap = document.createElement("div");
      wrap.className = "table-wrap";
      table.replaceWith(wrap);
      wrap.append(table);
    }
  }

  // Render ``text`` (Markdown) into ``target``; ``onCopy(text, button)`` copies a code block.
  function render(target, text, onCopy) {
    const html = parser.parse(String(text ?? "").replace(/\r\n/g, "\n"), { async: false });
    const frag = DOMPurify.sanitize(html, PURIFY);
    decorate(frag, onCopy);
    SafeText.escapeTree(frag);
    target.replaceChildren(frag);
  }

  return { render };
})();
