// foundation-ai web chat: plain JavaScript, no build step, no framework. The page talks to the
// sessions API (docs/serve.md); rendering lives in chat_view.js, Markdown in markdown.js, the
// escaping of outside text in safe_text.js.
"use strict";

const $ = (sel) => document.querySelector(sel);
const { el } = View;
const state = {
  key: localStorage.getItem("fai-key") || "", session: null, running: false, pending: new Set(),
  attachments: [], sessions: [], query: "",
};
const PHONE = window.matchMedia("(max-width: 799px)");

// ---- HTTP -------------------------------------------------------------------------------
async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (state.key) headers["Authorization"] = "Bearer " + state.key;
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 401) {
    $("#keybar").classList.remove("hidden");
    if (PHONE.matches) openSide(true);
    throw new Error("enter a valid API key");
  }
  if (!res.ok) {
    let msg = res.statusText || "HTTP " + res.status;
    try { msg = (await res.json()).error.message; } catch (e) { /* not JSON */ }
    throw new Error(msg);
  }
  return res;
}
const sessionPath = (sid, rest) => `/v1/sessions/${encodeURIComponent(sid)}${rest || ""}`;

// an error (red), or with ``info`` a notice
function status(text, info) {
  $("#status").replaceChildren(...(text ? SafeText.nodes(text, true) : []));
  $("#status").classList.toggle("info", Boolean(info));
}

// ---- copying ----------------------------------------------------------------------------
async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch (e) {  // no clipboard permission (an insecure origin): the selection way
    const area = el("textarea", "sr-only");
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  if (!button) return;
  const label = button.textContent;
  button.textContent = "Copied";
  button.classList.add("copied");
  setTimeout(() => { button.textContent = label; button.classList.remove("copied"); }, 1500);
}

// ---- records and events -----------------------------------------------------------------
function renderUser(m) {
  const c = m.content;
  if (c.type === "text") View.userText(c.content);
  else if (c.type === "image") View.userImage(`data:${c.mime_type || "image/png"};base64,${c.b64}`);
}

function renderRecords(records) {
  for (const r of records) {
    if (r.type === "conversation") {
      const m = r.message;
      if (m.type === "user") {
        if ((m.role ?? "user") === "user") renderUser(m);  // the JSON omits role "user" (the default)
      } else if (m.type === "assistant") {
        const c = m.content;
        if (c.type === "text" && c.content) View.textPiece(m.id, c.content);
        else if (c.type === "thinking") View.thinkingPiece(m.id, c.thinking || "");
        else if (c.type === "tool_call") View.toolCall(c, m.id);
        View.markDone(m.id);
      } else if (m.type === "tool_result") {
        View.toolResult(m);
        View.markDone("result:" + m.tool_call_id);
      }
    } else if (r.type === "retracted") {
      View.retract(r.message_ids || []);
    } else if (r.type === "summary") {
      const waiting = (r.awaiting_approval || []).map((c) => c.id || c);
      View.usageLine({ usage: r.usage, outcome: "completed" }, waiting);
    }
  }
}

function onEvent(kind, ev) {
  if (kind === "text" && !View.isDone(ev.message_id)) View.textPiece(ev.message_id, ev.text);
  else if (kind === "thinking" && !View.isDone(ev.message_id)) View.thinkingPiece(ev.message_id, ev.text);
  else if (kind === "tool_call") View.toolCall(ev.call, ev.message_id);
  else if (kind === "tool_result" && !View.isDone("result:" + ev.result.tool_call_id)) View.toolResult(ev.result);
  else if (kind === "retract") View.retract(ev.message_ids);
  else if (kind === "failed") { status("The turn failed: " + ev.error.message); View.usageLine(ev.summary); }
  else if (kind === "done") {
    const paused = ev.summary.outcome === "awaiting_approval";
    View.usageLine(ev.summary, paused ? ["?"] : null);  // the calls are named by the next event
  }
  // a replayed turn may have been decided since: ask the server which calls still wait
  else if (kind === "awaiting_approval") {
    const line = [...document.querySelectorAll(".turn-usage.paused")].pop();
    if (line) line.dataset.waiting = (ev.calls || []).map((c) => c.id).join(" ");
    loadApprovals(ev.session_id).catch((e) => status(e.message));
  }
}

async function follow(sid, from) {
  setRunning(true);
  try {
    const res = await api("GET", sessionPath(sid, `/events?from=${from || 0}`));
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
  const busy = on || state.pending.size > 0;
  $("#stop").disabled = !busy;  // Stop also ends a turn waiting for approvals
  $("#send").disabled = busy;  // a new turn waits for the decisions
  document.body.classList.toggle("busy", busy);
}

// ---- approvals --------------------------------------------------------------------------
async function loadApprovals(sid) {
  const res = await (await api("GET", sessionPath(sid, "/approvals"))).json();
  if (sid !== state.session) return;
  for (const call of res.data) {
    state.pending.add(call.id);
    if (View.askApproval(sid, call)) status("A tool call is waiting for your approval.", true);
  }
  setRunning(state.running);
  if (res.data.length) loadSessions();
}

View.hooks.decide = async (sid, callId, decision, box, reason) => {
  for (const b of box.querySelectorAll("button, input")) b.disabled = true;
  const body = { decision };
  if (decision === "deny" && reason) body.reason = reason;
  try {
    const res = await (await api("POST", sessionPath(sid, `/approvals/${encodeURIComponent(callId)}`), body)).json();
    state.pending.delete(callId);
    View.decided(callId, box, decision === "approve" ? "approved" : "denied", decision);
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
};

async function stop() {
  if (!state.session) return;
  const sid = state.session;
  try {
    const res = await (await api("POST", sessionPath(sid, "/abort"))).json();
    // a turn waiting for approvals ends: none of its calls runs; follow it to its end
    if (res.events_from === undefined || sid !== state.session) return;
    for (const id of state.pending) {
      const box = document.querySelector(`.tool-panel[data-call-id="${CSS.escape(id)}"] .approval`);
      if (box) View.decided(id, box, "aborted", "deny");
    }
    state.pending.clear();
    status("");
    follow(sid, res.events_from);
  } catch (e) { status(e.message); }
}

// ---- sessions ---------------------------------------------------------------------------
function setTitle(text) {
  $("#chat-title").replaceChildren(...SafeText.nodes(text || "New chat", true));
  document.title = SafeText.visibleLine(text || "New chat") + " · foundation-ai";
}

async function loadSessions() {
  try {
    const q = state.query ? "?q=" + encodeURIComponent(state.query) : "";
    state.sessions = (await (await api("GET", "/v1/sessions" + q)).json()).data;
    Sessions.render(state.sessions);
    const current = state.sessions.find((s) => s.id === state.session);
    if (current) setTitle(current.title);
  } catch (e) { status(e.message); }
}

async function openSession(sid) {
  state.session = sid;
  localStorage.setItem("fai-session", sid);
  status("");
  state.pending.clear();
  View.reset();
  if (PHONE.matches) openSide(false);
  try {
    const s = await (await api("GET", sessionPath(sid))).json();
    if (state.session !== sid) return; // the user moved on meanwhile
    if (s.model) $("#agent").value = s.model;
    setTitle(s.title);
    renderRecords(s.records || []);
    setRunning(false);
    if (s.running) follow(sid);
    else await loadApprovals(sid);
  } catch (e) { status(e.message); }
  loadSessions();
}

function newChat() {
  state.session = null;
  localStorage.removeItem("fai-session");
  state.pending.clear();
  View.reset();
  setTitle("");
  setRunning(false);
  loadSessions();
  if (PHONE.matches) openSide(false);
  $("#prompt").focus();
}

const Sessions = {
  render(list) {
    const ul = $("#sessions");
    ul.replaceChildren();
    if (!list.length) ul.append(el("li", "empty", state.query ? "No chat matches." : "No chats yet."));
    for (const s of list) ul.append(this.item(s));
  },
  item(s) {
    const li = el("li", "session" + (s.id === state.session ? " active" : "") + (s.running ? " running" : "") +
      (s.awaiting_approval ? " waiting" : ""));
    li.dataset.id = s.id;
    const open = View.safe("button", "open", s.title || "(new chat)", true);
    open.type = "button";
    open.title = SafeText.visibleLine(s.title || s.id) + (s.awaiting_approval ? " (a tool call waits for approval)" : "");
    if (s.id === state.session) open.setAttribute("aria-current", "page");
    li.addEventListener("click", (e) => { if (e.target === li || e.target.closest(".open")) openSession(s.id); });
    const rename = View.button("✎", "icon rename", () => this.rename(li, s), "Rename the chat");
    const del = View.button("", "icon delete", () => this.confirmDelete(li, s), "Delete the chat");
    del.append(View.glyph("M4 7h16M9 7V4h6v3M6 7l1 13h10l1-13M10 11v6M14 11v6"));
    li.append(open, rename, del);
    return li;
  },
  rename(li, s) {
    const input = el("input", "rename-input");
    input.value = SafeText.visibleLine(s.title || "");
    input.setAttribute("aria-label", "New title");
    input.maxLength = 120;
    const save = async () => {
      const title = input.value.trim();
      if (!title) { this.render(state.sessions); return; }
      try { await api("PATCH", sessionPath(s.id), { title }); } catch (e) { status(e.message); }
      loadSessions();
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") { e.preventDefault(); save(); }
      if (e.key === "Escape") this.render(state.sessions);
    });
    li.replaceChildren(input, View.button("Save", "small save-title", save));
    input.focus();
    input.select();
  },
  confirmDelete(li, s) {
    const yes = View.button("Delete", "small danger confirm-delete", async () => {
      try { await api("DELETE", sessionPath(s.id)); } catch (e) { status(e.message); return; }
      if (s.id === state.session) newChat();
      else loadSessions();
    });
    const no = View.button("Cancel", "small cancel-delete", () => this.render(state.sessions));
    li.replaceChildren(View.safe("span", "ask", "Delete “" + (s.title || "(new chat)") + "”?", true), yes, no);
    yes.focus();
  },
};

// ---- regenerate / edit-and-resend -------------------------------------------------------
// The conversation up to a prompt is copied into a new session that takes the old one's place
// (POST /v1/sessions/{id}/fork with replace), then the prompt is sent again, as it was or edited.
async function promptIds(sid) {
  const s = await (await api("GET", sessionPath(sid))).json();
  const ids = [];
  let prevUser = false;
  for (const r of s.records || []) {
    if (r.type !== "conversation") continue;
    const m = r.message;
    const user = m.type === "user" && (m.role ?? "user") === "user";
    if (user && !prevUser) ids.push(m.id);
    prevUser = user;
  }
  return ids;
}

async function redo(prompt, editedText) {
  if (!state.session || state.running || state.pending.size) { status("Wait for the turn to end first."); return; }
  try {
    const ids = await promptIds(state.session);
    if (prompt >= ids.length) { status("That message is not stored yet."); return; }
    const fork = await (await api("POST", sessionPath(state.session, "/fork"), { before: ids[prompt], replace: true })).json();
    let input = fork.input;
    if (editedText !== undefined) {
      input = input.filter((p) => p.type !== "text");
      if (editedText.trim()) input.push({ type: "text", text: editedText });
    }
    if (!input.length) { status("The message is empty."); return; }
    await openSession(fork.id);
    await startTurn(input);
  } catch (e) { status(e.message); }
}
View.hooks.copy = copyText;
View.hooks.regenerate = (prompt) => redo(prompt);
View.hooks.edit = (prompt, text) => redo(prompt, text);

// ---- composing --------------------------------------------------------------------------
async function startTurn(input) {
  await api("POST", sessionPath(state.session, "/turns"), { input });
  const parts = typeof input === "string" ? [{ type: "text", text: input }] : input;
  for (const p of parts) {
    if (p.type === "text") View.userText(p.text);
    else View.userImage(p.image_url.url);
  }
  follow(state.session);
}

async function send(ev) {
  ev.preventDefault();
  const text = $("#prompt").value;
  const images = state.attachments.map((a) => ({ type: "image_url", image_url: { url: a.url } }));
  if ((!text.trim() && !images.length) || state.running) return;
  if (state.pending.size) { status("Approve or deny the waiting tool call first."); return; }
  status("");
  try {
    if (!state.session) {
      const s = await (await api("POST", "/v1/sessions", { model: $("#agent").value })).json();
      state.session = s.id;
      localStorage.setItem("fai-session", s.id);
    }
    const input = images.length ? [...images, ...(text.trim() ? [{ type: "text", text }] : [])] : text;
    await startTurn(input);
    $("#prompt").value = "";
    autosize();
    Attach.clear();
  } catch (e) { status(e.message); }
}

function autosize() {
  const box = $("#prompt");
  box.style.height = "";  // empty: the CSS height (an empty box's scrollHeight counts the placeholder)
  if (box.value) box.style.height = Math.min(box.scrollHeight + 2, 220) + "px";
}

// ---- chrome: drawer, theme --------------------------------------------------------------
function openSide(on) {
  document.body.classList.toggle("side-open", on);
  $("#scrim").hidden = !on;
  $("#open-side").setAttribute("aria-expanded", String(on));
  if (on) $("#new").focus();
}

const THEMES = ["system", "light", "dark"];
function applyTheme(theme) {
  if (theme === "system") { delete document.documentElement.dataset.theme; localStorage.removeItem("fai-theme"); }
  else { document.documentElement.dataset.theme = theme; localStorage.setItem("fai-theme", theme); }
  const next = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
  $("#theme").setAttribute("aria-label", `Theme: ${theme} (switch to ${next})`);
  $("#theme").title = `Theme: ${theme}`;
  $("#theme").textContent = { system: "◐", light: "☀", dark: "☾" }[theme];
}
const currentTheme = () => document.documentElement.dataset.theme || "system";

async function start() {
  try {
    const models = (await (await api("GET", "/v1/models")).json()).data;
    $("#keybar").classList.add("hidden");
    const sel = $("#agent");
    sel.replaceChildren();
    for (const m of models) {
      const o = el("option", null, SafeText.visibleLine(m.id));
      o.value = m.id;
      if (m.description) o.title = SafeText.visibleLine(m.description);
      sel.append(o);
    }
    await loadSessions();
    const last = localStorage.getItem("fai-session");
    if (last && state.sessions.some((s) => s.id === last)) await openSession(last);
    document.body.dataset.ready = "1";
  } catch (e) { status(e.message); }
}

document.addEventListener("DOMContentLoaded", () => {
  $("#composer").addEventListener("submit", send);
  $("#prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("#composer").requestSubmit(); }
  });
  $("#prompt").addEventListener("input", autosize);
  $("#stop").addEventListener("click", stop);
  $("#new").addEventListener("click", newChat);
  $("#open-side").addEventListener("click", () => openSide(true));
  $("#close-side").addEventListener("click", () => openSide(false));
  $("#scrim").addEventListener("click", () => openSide(false));
  document.addEventListener("keydown", (e) => { if (e.key === "Escape" && document.body.classList.contains("side-open")) openSide(false); });
  PHONE.addEventListener("change", () => openSide(false));
  applyTheme(currentTheme());
  $("#theme").addEventListener("click", () => applyTheme(THEMES[(THEMES.indexOf(currentTheme()) + 1) % THEMES.length]));
  let timer = null;
  $("#search").addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => { state.query = $("#search").value.trim(); loadSessions(); }, 200);
  });
  Attach.init();
  $("#save-key").addEventListener("click", () => {
    state.key = $("#key").value.trim();
    localStorage.setItem("fai-key", state.key);
    $("#key").value = "";
    start();
  });
  start();
});
