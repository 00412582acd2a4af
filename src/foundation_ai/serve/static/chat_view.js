// The conversation as DOM: user and assistant messages (with Copy / Edit / Regenerate), folded
// thinking, tool panels, the approval panel and each turn's usage footer. Every text that came
// from the model, a tool or the server goes through SafeText (the CLI's escaping rule); nothing
// of it is ever parsed as HTML except through Markdown.render (marked + DOMPurify).
"use strict";

const View = (() => {
  const $ = (sel) => document.querySelector(sel);
  const hooks = { copy: null, edit: null, regenerate: null, decide: null };
  const view = { texts: new Map(), panels: new Map(), done: new Set(), lastUser: null, prompts: 0, dirty: new Set() };

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // ``text`` from outside the page as escaped nodes in a new element
  function safe(tag, cls, text, oneLine) {
    const node = el(tag, cls);
    node.append(...SafeText.nodes(text, oneLine));
    return node;
  }

  // a line-drawn icon (SVG path ``d`` in a 24x24 box), hidden from assistive technology
  function glyph(d) {
    const NS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("class", "glyph");
    svg.setAttribute("aria-hidden", "true");
    const path = document.createElementNS(NS, "path");
    path.setAttribute("d", d);
    svg.append(path);
    return svg;
  }

  function button(label, cls, onClick, aria) {
    const b = el("button", cls, label);
    b.type = "button";
    if (aria) b.setAttribute("aria-label", aria);
    b.addEventListener("click", onClick);
    return b;
  }

  function log() { return $("#log"); }
  function scrollDown() { const l = log(); l.scrollTop = l.scrollHeight; }

  function reset() {
    view.texts.clear(); view.panels.clear(); view.done.clear(); view.dirty.clear();
    view.lastUser = null; view.prompts = 0;
    log().replaceChildren();
  }

  function entry(kind, prompt) {
    const wrap = el("div", "entry from-" + kind);
    wrap.dataset.prompt = String(prompt);
    log().append(wrap);
    return wrap;
  }

  // ---- user messages ----------------------------------------------------------------------
  // One bubble per prompt: its images and its text (the consecutive user messages of a turn).
  function userBubble() {
    if (view.lastUser) return view.lastUser;
    const prompt = view.prompts++;
    const wrap = entry("user", prompt);
    const msg = el("div", "msg user");
    const actions = el("div", "msg-actions");
    const node = { wrap, msg, text: "", prompt };
    actions.append(
      button("Copy", "act copy", (e) => hooks.copy(SafeText.visible(node.text), e.currentTarget), "Copy the message"),
      button("Edit", "act edit", () => startEdit(node), "Edit and resend the message"),
    );
    wrap.append(msg, actions);
    view.lastUser = node;
    return node;
  }

  function userText(text) {
    const node = userBubble();
    node.text += (node.text ? "\n" : "") + text;
    node.msg.append(safe("div", "user-text", text));
    scrollDown();
  }

  const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

  function userImage(url, label) {
    const node = userBubble();
    const m = /^data:(image\/[a-z]+);base64,([A-Za-z0-9+/=]+)$/.exec(url);
    if (!m || !IMAGE_TYPES.includes(m[1])) { node.msg.append(el("div", "user-text", "[image]")); return; }
    const img = el("img", "thumb");
    img.src = url;
    img.alt = label || "attached image";
    node.msg.append(img);
    scrollDown();
  }

  function endUser() { view.lastUser = null; }

  function startEdit(node) {
    if (node.msg.querySelector(".edit-box")) return;
    const box = el("div", "edit-box");
    const area = el("textarea", "edit-text");
    area.value = SafeText.visible(node.text);
    area.setAttribute("aria-label", "Edited message");
    area.rows = Math.min(10, area.value.split("\n").length + 1);
    const row = el("div", "edit-buttons");
    row.append(
      button("Send", "primary edit-send", () => hooks.edit(node.prompt, area.value)),
      button("Cancel", "edit-cancel", () => box.remove()),
    );
    box.append(area, row);
    node.msg.append(box);
    area.focus();
  }

  // ---- assistant messages -----------------------------------------------------------------
  function flush() {
    for (const e of view.dirty) Markdown.render(e.body, e.text, hooks.copy);
    view.dirty.clear();
    scrollDown();
  }

  function textPiece(mid, piece) {
    endUser();
    let e = view.texts.get(mid);
    if (!e) {
      const prompt = Math.max(0, view.prompts - 1);
      const wrap = entry("assistant", prompt);
      const msg = el("div", "msg assistant");
      msg.dataset.mid = mid;
      const actions = el("div", "msg-actions");
      e = { node: wrap, body: msg, text: "" };
      actions.append(
        button("Copy", "act copy", (ev) => hooks.copy(SafeText.visible(e.text), ev.currentTarget), "Copy the answer"),
        button("Regenerate", "act regenerate", () => hooks.regenerate(prompt), "Regenerate the answer"),
      );
      wrap.append(msg, actions);
      view.texts.set(mid, e);
    }
    e.text += piece;
    if (!view.dirty.size) requestAnimationFrame(flush);
    view.dirty.add(e);
  }

  function thinkingPiece(mid, piece) {
    endUser();
    let e = view.texts.get(mid);
    if (!e) {
      const node = el("details", "thinking");
      node.dataset.mid = mid;
      node.append(el("summary", null, "Thinking"));
      const pre = el("pre");
      node.append(pre);
      log().append(node);
      e = { node, pre, text: "" };
      view.texts.set(mid, e);
    }
    e.text += piece;
    e.pre.replaceChildren(...SafeText.nodes(e.text));
  }

  function retract(ids) {
    for (const id of ids) {
      const e = view.texts.get(id);
      if (e) { e.node.remove(); view.dirty.delete(e); }
      view.texts.delete(id);
    }
  }

  // ---- tools ------------------------------------------------------------------------------
  function toolCall(call, mid) {
    endUser();
    if (view.panels.has(call.id)) return;
    const node = el("details", "tool-panel");
    node.open = true;
    if (mid) node.dataset.mid = mid;
    const summary = el("summary");
    summary.append("Tool: ", ...SafeText.nodes(call.name, true));
    node.append(summary);
    node.append(safe("pre", "args", JSON.stringify(call.arguments ?? {}, null, 2)));
    const result = el("pre", "result", "running...");
    node.append(result);
    node.dataset.callId = call.id;
    log().append(node);
    view.panels.set(call.id, { node, result });
    scrollDown();
  }

  function toolResult(res) {
    const panel = view.panels.get(res.tool_call_id);
    if (!panel) return;
    const c = res.content;
    const content = c && c.type === "text" ? c.content : "[" + (c && c.type) + "]";
    const text = res.error_detail ? "error: " + res.error_detail : content;
    panel.result.replaceChildren(...SafeText.nodes(text));
    panel.result.classList.toggle("error", Boolean(res.error_detail));
    const ask = panel.node.querySelector(".approval");
    if (ask && ask.querySelector("button")) ask.remove();  // decided elsewhere: no buttons left
    panel.node.classList.remove("pending");
    settlePaused(res.tool_call_id);
  }

  // ---- approvals --------------------------------------------------------------------------
  // A string argument shown as the CLI's approval question shows a command
  // (src/foundation_ai/_cli/approval.py): one numbered row per line, controls escaped, runs of
  // more than 8 spaces/tabs and of more than 2 empty lines shortened, and its size stated.
  const MAX_BLANK_RUN = 8, MAX_EMPTY_LINES = 2;
  const plural = (n, w) => `${n.toLocaleString("en-US")} ${w}${n === 1 ? "" : "s"}`;

  function lineNodes(text) {
    const out = [];
    const re = new RegExp(`[ \\t]{${MAX_BLANK_RUN + 1},}`, "g");
    let last = 0;
    for (const m of text.matchAll(re)) {
      out.push(...SafeText.nodes(text.slice(last, m.index), true), el("span", "ctl", `⟨${m[0].length} spaces⟩`));
      last = m.index + m[0].length;
    }
    out.push(...SafeText.nodes(text.slice(last), true));
    return out;
  }

  function argumentView(name, value) {
    const box = el("div", "will-run");
    const lines = value.replace(/\r\n/g, "\n").split("\n");
    const controls = SafeText.countControls(value.replace(/\n/g, ""));
    const note = controls ? `; ${plural(controls, "control character")} shown escaped` : "";
    const head = el("div", "will-run-head");
    head.append(el("code", null, SafeText.visibleLine(name)), ` (${plural(lines.length, "line")}, ${plural(value.length, "character")}${note}):`);
    const rows = el("ol", "lines");
    for (let i = 0; i < lines.length;) {
      let j = i;
      while (j < lines.length && !lines[j].replace(/[ \t]/g, "")) j++;
      if (j - i > MAX_EMPTY_LINES) {
        rows.append(el("li", "gap", `⟨${j - i} empty lines⟩`));
        i = j;
        continue;
      }
      const li = el("li");
      li.value = i + 1;
      li.append(...lineNodes(lines[i]));
      rows.append(li);
      i++;
    }
    box.append(head, rows);
    return box;
  }

  function askApproval(sid, call) {
    if (!view.panels.has(call.id)) toolCall(call);
    const panel = view.panels.get(call.id);
    if (panel.node.querySelector(".approval")) return false;
    panel.node.open = true;
    panel.node.classList.add("pending");
    panel.result.textContent = "waiting for your approval";
    const box = el("div", "approval");
    const args = call.arguments && typeof call.arguments === "object" ? call.arguments : {};
    const strings = Object.entries(args).filter(([, v]) => typeof v === "string");
    if (strings.length) {
      const what = el("div", "will-run-all");
      what.append(el("div", "will-run-title", "What will run if you approve:"));
      for (const [k, v] of strings) what.append(argumentView(k, v));
      box.append(what);
    }
    const reason = el("input", "reason");
    reason.type = "text";
    reason.placeholder = "reason (optional, sent to the model on deny)";
    reason.setAttribute("aria-label", "Reason for denying (optional)");
    const row = el("div", "approval-buttons");
    const yes = button("Approve", "approve", () => hooks.decide(sid, call.id, "approve", box));
    const no = button("Deny", "deny", () => hooks.decide(sid, call.id, "deny", box, reason.value.trim()));
    row.append(yes, no, reason);
    box.append(row);
    panel.node.append(box);
    scrollDown();
    return true;
  }

  function decided(callId, box, text, cls) {
    const panel = view.panels.get(callId);
    box.replaceChildren(el("span", "decided " + cls, text));
    if (panel) panel.node.classList.remove("pending");
  }

  // ---- usage footers ----------------------------------------------------------------------
  // A turn paused for approval gets a footer saying it waits; once its calls have results
  // (approved, denied or aborted, here or elsewhere) the footer says so instead.
  function usageLine(summary, waiting) {
    endUser();
    if (view.dirty.size) flush();  // the turn's last pieces are drawn before its end is
    const u = summary.usage || {};
    const cost = typeof u.cost_usd === "number" ? " · $" + u.cost_usd.toFixed(6) : "";
    const base = `tokens: ${u.input || 0} in · ${u.output || 0} out · ${u.total_tokens || 0} total${cost}`;
    const line = el("div", "turn-usage");
    line.dataset.base = base;
    if (waiting && waiting.length) {
      line.dataset.waiting = waiting.join(" ");
      line.classList.add("paused");
      line.textContent = base + " · paused: waiting for approval";
      waiting.forEach((id) => { if (view.done.has("result:" + id)) settlePaused(id, line); });
    } else {
      const outcome = summary.outcome && summary.outcome !== "completed" ? " · " + SafeText.visibleLine(summary.outcome) : "";
      line.textContent = base + outcome;
    }
    log().append(line);
    scrollDown();
  }

  function settlePaused(callId, only) {
    const lines = only ? [only] : log().querySelectorAll(".turn-usage.paused");
    for (const line of lines) {
      const left = (line.dataset.waiting || "").split(" ").filter((id) => id && id !== callId);
      line.dataset.waiting = left.join(" ");
      if (!left.length) {
        line.classList.remove("paused");
        line.textContent = line.dataset.base + " · paused for approval, then continued";
      }
    }
  }

  function markDone(id) { view.done.add(id); }
  function isDone(id) { return view.done.has(id); }

  return {
    hooks, el, safe, button, glyph, reset, userText, userImage, endUser, textPiece, thinkingPiece, retract,
    toolCall, toolResult, askApproval, decided, usageLine, markDone, isDone, scrollDown,
    promptCount: () => view.prompts,
  };
})();
