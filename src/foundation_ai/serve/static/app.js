// foundation-ai web chat. Plain JavaScript, no build step. Model output is never parsed as HTML:
// every piece of text reaches the page through textContent, and the Markdown subset below builds
// DOM nodes itself (paragraphs, line breaks, ``` code blocks, `code`, **bold**, *italic*).
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = { key: localStorage.getItem("fai-key") || "", session: null, running: false, agent: null, pending: new Set() };

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

// ---- safe Markdown subset ---------------------------------------------------------------
function inline(parent, text) {
  const re = /(`[^`\n]+`|\*\*[^*\n]+\*\*|\*[^*\n]+\*)/g;
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
    const tok = m[0];
    if (tok.startsWith("`")) parent.append(el("code", null, tok.slice(1, -1)));
    else if (tok.startsWith("**")) parent.append(el("strong", null, tok.slice(2, -2)));
    else parent.append(el("em", null, tok.slice(1, -1)));
    last = m.index + tok.length;
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
}

function renderMarkdown(target, text) {
  const frag = document.createDocumentFragment();
  const parts = text.split("```");
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      const nl = part.indexOf("\n");
      const code = nl >= 0 && /^[\w+-]*$/.test(part.slice(0, nl)) ? part.slice(nl + 1) : part;
      const pre = el("pre");
      pre.append(el("code", null, code));
      frag.append(pre);
      return;
    }
    for (const para of part.split(/\n{2,}/)) {
      if (!para.trim()) continue;
      const p = el("p");
      para.split("\n").forEach((line, j) => {
        if (j > 0) p.append(el("br"));
        inline(p, line);
      });
      frag.append(p);
    }
  });
  target.replaceChildren(frag);
}

// ---- HTTP -------------------------------------------------------------------------------
async function api(method, path, body) {
  const headers = { "Content-Type": "application/json" };
  if (state.key) headers["Authorization"] = "Bearer " + state.key;
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 401) {
    $("#keybar").classList.remove("hidden");
    throw new Error("enter a valid API key");
  }
  if (!res.ok) {
    let msg = res.statusText;
    try { msg = (await res.json()).error.message; } catch (e) { /* not JSON */ }
    throw new Error(msg);
  }
  return res;
}

function status(text) { $("#status").textContent = text || ""; }

// ---- rendering a conversation -----------------------------------------------------------
const view = { texts: new Map(), panels: new Map(), done: new Set() };

function resetView() {
  view.texts.clear(); view.panels.clear(); view.done.clear();
  state.pending.clear();
  $("#log").replaceChildren();
}

function scrollDown() { const log = $("#log"); log.scrollTop = log.scrollHeight; }

function userMessage(text) { $("#log").append(el("div", "msg user", text)); scrollDown(); }

function textPiece(mid, piece) {
  let entry = view.texts.get(mid);
  if (!entry) {
    const node = el("div", "msg assistant");
    node.dataset.mid = mid;
    $("#log").append(node);
    entry = { node, text: "" };
    view.texts.set(mid, entry);
  }
  entry.text += piece;
  renderMarkdown(entry.node, entry.text);
  scrollDown();
}

function thinkingPiece(mid, piece) {
  let entry = view.texts.get(mid);
  if (!entry) {
    const node = el("details", "thinking");
    node.dataset.mid = mid;
    node.append(el("summary", null, "Thinking"));
    const pre = el("pre");
    node.append(pre);
    $("#log").append(node);
    entry = { node, pre, text: "" };
    view.texts.set(mid, entry);
  }
  entry.text += piece;
  entry.pre.textContent = entry.text;
}

function toolCall(call, mid) {
  if (view.panels.has(call.id)) return;
  const node = el("details", "tool-panel");
  node.open = true;
  if (mid) node.dataset.mid = mid;
  node.append(el("summary", null, "Tool: " + call.name));
  node.append(el("pre", "args", JSON.stringify(call.arguments ?? {}, null, 2)));
  const result = el("pre", "result", "running...");
  node.append(result);
  node.dataset.callId = call.id;
  $("#log").append(node);
  view.panels.set(call.id, { node, result });
  scrollDown();
}

function toolResult(res) {
  const panel = view.panels.get(res.tool_call_id);
  const content = res.content && res.content.type === "text" ? res.content.content : "[" + (res.content && res.content.type) + "]";
  const text = res.error_detail ? "error: " + res.error_detail : content;
  if (panel) {
    panel.result.textContent = text;
    if (res.error_detail) panel.result.classList.add("error");
    const ask = panel.node.querySelector(".approval");
    if (ask && ask.querySelector("button")) ask.remove();  // decided elsewhere: no buttons left
    panel.node.classList.remove("pending");
    state.pending.delete(res.tool_call_id);
  }
}

// ---- approvals --------------------------------------------------------------------------
// A tool call waiting for a decision gets Approve / Deny buttons (and an optional reason) in its
// panel; the last decision continues the turn, whose events are then followed in the page.
function askApproval(sid, call) {
  if (!view.panels.has(call.id)) toolCall(call);
  const panel = view.panels.get(call.id);
  if (panel.node.querySelector(".approval")) return;
  state.pending.add(call.id);
  panel.node.open = true;
  panel.node.classList.add("pending");
  panel.result.textContent = "waiting for your approval";
  const box = el("div", "approval");
  const reason = el("input", "reason");
  reason.type = "text";
  reason.placeholder = "reason (optional, sent to the model on deny)";
  const yes = el("button", "approve", "Approve");
  const no = el("button", "deny", "Deny");
  yes.type = no.type = "button";
  yes.addEventListener("click", () => decide(sid, call.id, "approve", box));
  no.addEventListener("click", () => decide(sid, call.id, "deny", box, reason.value.trim()));
  box.append(yes, no, reason);
  panel.node.append(box);
  setRunning(false);
  status("A tool call is waiting for your approval.");
  loadSessions();
  scrollDown();
}

async function decide(sid, callId, decision, box, reason) {
  for (const b of box.querySelectorAll("button, input")) b.disabled = true;
  const body = { decision };
  if (decision === "deny" && reason) body.reason = reason;
  try {
    const res = await (await api("POST", `/v1/sessions/${encodeURIComponent(sid)}/approvals/${encodeURIComponent(callId)}`, body)).json();
    state.pending.delete(callId);
    const panel = view.panels.get(callId);
    box.replaceChildren(el("span", "decided " + decision, decision === "approve" ? "approved" : "denied"));
    if (panel) panel.node.classList.remove("pending");
    if (sid !== state.session) return;
    if (res.continued) {
      status("");
      follow(sid, res.events_from);
    } else {
      setRunning(false);
    }
  } catch (e) {
    for (const b of box.querySelectorAll("button, input")) b.disabled = false;
    status(e.message);
  }
}

async function loadApprovals(sid) {
  const res = await (await api("GET", `/v1/sessions/${encodeURIComponent(sid)}/approvals`)).json();
  if (sid !== state.session) return;
  for (const call of res.data) askApproval(sid, call);
}

function retract(ids) {
  for (const id of ids) {
    const entry = view.texts.get(id);
    if (entry) entry.node.remove();
    view.texts.delete(id);
  }
}

function usageLine(summary) {
  const u = summary.usage || {};
  const cost = typeof u.cost_usd === "number" ? " · $" + u.cost_usd.toFixed(6) : "";
  const outcome = summary.outcome && summary.outcome !== "completed" ? " · " + summary.outcome : "";
  const line = el("div", "turn-usage",
    `tokens: ${u.input || 0} in · ${u.output || 0} out · ${u.total_tokens || 0} total${cost}${outcome}`);
  $("#log").append(line);
  scrollDown();
}

function renderRecords(records) {
  for (const r of records) {
    if (r.type === "conversation") {
      const m = r.message;
      if (m.type === "user") {
        // the JSON omits role "user" (the default)
        if ((m.role ?? "user") === "user" && m.content.type === "text") userMessage(m.content.content);
      } else if (m.type === "assistant") {
        const c = m.content;
        if (c.type === "text" && c.content) textPiece(m.id, c.content);
        else if (c.type === "thinking") thinkingPiece(m.id, c.thinking || "");
        else if (c.type === "tool_call") toolCall(c, m.id);
        view.done.add(m.id);
      } else if (m.type === "tool_result") {
        toolResult(m);
        view.done.add("result:" + m.tool_call_id);
      }
    } else if (r.type === "retracted") {
      retract(r.message_ids || []);
    } else if (r.type === "summary") {
      const paused = (r.awaiting_approval || []).length > 0;
      usageLine({ usage: r.usage, outcome: paused ? "awaiting_approval" : "completed" });
    }
  }
}

function onEvent(kind, ev) {
  if (kind === "text" && !view.done.has(ev.message_id)) textPiece(ev.message_id, ev.text);
  else if (kind === "thinking" && !view.done.has(ev.message_id)) thinkingPiece(ev.message_id, ev.text);
  else if (kind === "tool_call") toolCall(ev.call, ev.message_id);
  else if (kind === "tool_result" && !view.done.has("result:" + ev.result.tool_call_id)) toolResult(ev.result);
  else if (kind === "retract") retract(ev.message_ids);
  else if (kind === "failed") { status("The turn failed: " + ev.error.message); usageLine(ev.summary); }
  else if (kind === "done") usageLine(ev.summary);
  // a replayed turn may have been decided since: ask the server which calls still wait
  else if (kind === "awaiting_approval") loadApprovals(ev.session_id).catch((e) => status(e.message));
}

// ---- following a turn -------------------------------------------------------------------
async function follow(sid, from) {
  setRunning(true);
  try {
    const res = await api("GET", `/v1/sessions/${encodeURIComponent(sid)}/events?from=${from || 0}`);
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        let kind = "message", data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event: ")) kind = line.slice(7);
          else if (line.startsWith("data: ")) data += line.slice(6);
        }
        if (kind === "end" || sid !== state.session) continue;
        onEvent(kind, JSON.parse(data));
      }
    }
  } catch (e) {
    status(e.message);
  } finally {
    if (sid === state.session) setRunning(false);
    loadSessions();
  }
}

function setRunning(on) {
  state.running = on;
  $("#stop").disabled = !on && state.pending.size === 0;  // Stop also ends a turn waiting for approvals
  $("#send").disabled = on || state.pending.size > 0;  // a new turn waits for the decisions
}

// ---- sessions ---------------------------------------------------------------------------
async function loadSessions() {
  try {
    const data = (await (await api("GET", "/v1/sessions")).json()).data;
    const list = $("#sessions");
    list.replaceChildren();
    for (const s of data) {
      const li = el("li", "session" + (s.id === state.session ? " active" : "") + (s.running ? " running" : "") +
        (s.awaiting_approval ? " waiting" : ""), s.title || "(new chat)");
      li.dataset.id = s.id;
      li.title = s.awaiting_approval ? s.id + " (a tool call waits for approval)" : s.id;
      li.addEventListener("click", () => openSession(s.id));
      list.append(li);
    }
  } catch (e) { status(e.message); }
}

async function openSession(sid) {
  state.session = sid;
  localStorage.setItem("fai-session", sid);
  status("");
  resetView();
  try {
    const s = await (await api("GET", `/v1/sessions/${encodeURIComponent(sid)}`)).json();
    if (state.session !== sid) return; // the user moved on meanwhile
    if (s.model) $("#agent").value = s.model;
    renderRecords(s.records || []);
    setRunning(false);
    if (s.running) follow(sid);
    else await loadApprovals(sid);
  } catch (e) { status(e.message); }
  loadSessions();
}

async function send(ev) {
  ev.preventDefault();
  const text = $("#prompt").value;
  if (!text.trim() || state.running) return;
  if (state.pending.size) { status("Approve or deny the waiting tool call first."); return; }
  status("");
  try {
    if (!state.session) {
      const s = await (await api("POST", "/v1/sessions", { model: $("#agent").value })).json();
      state.session = s.id;
      localStorage.setItem("fai-session", s.id);
    }
    await api("POST", `/v1/sessions/${encodeURIComponent(state.session)}/turns`, { input: text });
    $("#prompt").value = "";
    userMessage(text);
    follow(state.session);
  } catch (e) { status(e.message); }
}

async function stop() {
  if (!state.session) return;
  const sid = state.session;
  try {
    const res = await (await api("POST", `/v1/sessions/${encodeURIComponent(sid)}/abort`)).json();
    // a turn waiting for approvals ends: none of its calls runs; follow it to its end
    if (res.events_from === undefined || sid !== state.session) return;
    for (const id of state.pending) {
      const panel = view.panels.get(id);
      if (!panel) continue;
      panel.node.classList.remove("pending");
      const box = panel.node.querySelector(".approval");
      if (box) box.replaceChildren(el("span", "decided deny", "aborted"));
    }
    state.pending.clear();
    status("");
    follow(sid, res.events_from);
  } catch (e) { status(e.message); }
}

async function start() {
  try {
    const models = (await (await api("GET", "/v1/models")).json()).data;
    $("#keybar").classList.add("hidden");
    const sel = $("#agent");
    sel.replaceChildren();
    for (const m of models) {
      const o = el("option", null, m.id);
      o.value = m.id;
      sel.append(o);
    }
    await loadSessions();
    const last = localStorage.getItem("fai-session");
    if (last && document.querySelector(`#sessions li[data-id="${CSS.escape(last)}"]`)) await openSession(last);
    document.body.dataset.ready = "1";
  } catch (e) { status(e.message); }
}

document.addEventListener("DOMContentLoaded", () => {
  $("#composer").addEventListener("submit", send);
  $("#prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("#composer").requestSubmit(); }
  });
  $("#stop").addEventListener("click", stop);
  $("#new").addEventListener("click", () => {
    state.session = null;
    localStorage.removeItem("fai-session");
    resetView();
    setRunning(false);
    loadSessions();
  });
  $("#save-key").addEventListener("click", () => {
    state.key = $("#key").value.trim();
    localStorage.setItem("fai-key", state.key);
    $("#key").value = "";
    start();
  });
  start();
});
