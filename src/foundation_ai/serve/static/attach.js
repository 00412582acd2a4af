// Images attached to the next message: chosen with the paperclip, dropped on the composer or
// pasted. Each becomes a data: URL (the sessions API takes image parts as data URLs); a large
// picture is first scaled down in a canvas (longest side MAX_SIDE px, JPEG) so that the request
// stays under the server's body limit (Limits.max_body_bytes, 1 MB by default).
"use strict";

const Attach = (() => {
  const TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
  const KEEP_BYTES = 300_000, MAX_SIDE = 1280;
  const list = () => document.querySelector("#attachments");

  const asDataUrl = (blob) => new Promise((ok, fail) => {
    const r = new FileReader();
    r.onload = () => ok(String(r.result));
    r.onerror = () => fail(r.error);
    r.readAsDataURL(blob);
  });

  async function shrink(file) {
    const bitmap = await createImageBitmap(file);
    const scale = Math.min(1, MAX_SIDE / Math.max(bitmap.width, bitmap.height));
    const canvas = document.createElement("canvas");
    canvas.width = Math.round(bitmap.width * scale);
    canvas.height = Math.round(bitmap.height * scale);
    canvas.getContext("2d").drawImage(bitmap, 0, 0, canvas.width, canvas.height);
    return canvas.toDataURL("image/jpeg", 0.85);
  }

  async function add(files) {
    for (const file of files) {
      if (!TYPES.includes(file.type)) { status(`${file.name}: not a PNG, JPEG, GIF or WebP image`); continue; }
      try {
        const url = file.size <= KEEP_BYTES ? await asDataUrl(file) : await shrink(file);
        state.attachments.push({ url, name: file.name });
      } catch (e) { status(`${file.name}: ${e.message || "could not be read"}`); }
    }
    render();
  }

  function render() {
    const ul = list();
    ul.replaceChildren();
    state.attachments.forEach((a, i) => {
      const li = View.el("li", "chip");
      const img = View.el("img");
      img.src = a.url;
      img.alt = a.name;
      const name = View.safe("span", "chip-name", a.name, true);
      const del = View.button("✕", "icon remove-attachment", () => { state.attachments.splice(i, 1); render(); },
        "Remove " + SafeText.visibleLine(a.name));
      li.append(img, name, del);
      ul.append(li);
    });
    ul.hidden = !state.attachments.length;
  }

  function clear() { state.attachments = []; render(); }

  function init() {
    const input = document.querySelector("#file");
    input.addEventListener("change", () => { add([...input.files]); input.value = ""; });
    const form = document.querySelector("#composer");
    form.addEventListener("dragover", (e) => { e.preventDefault(); form.classList.add("drop"); });
    form.addEventListener("dragleave", () => form.classList.remove("drop"));
    form.addEventListener("drop", (e) => { e.preventDefault(); form.classList.remove("drop"); add([...e.dataTransfer.files]); });
    document.querySelector("#prompt").addEventListener("paste", (e) => {
      const files = [...(e.clipboardData?.files || [])].filter((f) => TYPES.includes(f.type));
      if (files.length) { e.preventDefault(); add(files); }
    });
    render();
  }

  return { init, clear, add };
})();
