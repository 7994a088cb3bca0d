// The web UI's behaviour: live updates (server-sent events), pull and verify with progress,
// the SQL console. Data is only ever set with textContent: never parsed as HTML.

const csrf = document.querySelector('meta[name="csrf-token"]')?.content ?? "";

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  const value = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok && !value.error) value.error = `HTTP ${response.status}`;
  return value;
}

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

// --- logout --------------------------------------------------------------------------------

document.getElementById("logout")?.addEventListener("click", async () => {
  await post("/ui/logout", {});
  location.assign("/ui/login");
});

// --- live updates --------------------------------------------------------------------------

const jobs = new Map(); // job id -> the .job element showing it
const early = new Map(); // job id -> its events that came before the POST starting it returned

function setFields(scope, summary) {
  for (const field of ["records", "blocks", "size", "head", "updated", "watermark"]) {
    const node = scope.querySelector(`[data-field="${field}"]`);
    if (node && summary[field] !== undefined) {
      node.textContent = field === "updated" && node.tagName === "TD" ? summary.age : String(summary[field] ?? "");
      if (field === "updated" && node.tagName === "TD") node.title = summary.updated;
      node.classList.add("changed");
      setTimeout(() => node.classList.remove("changed"), 1500);
    }
  }
  const verified = scope.querySelector('[data-field="verified"]');
  if (verified && verified.textContent === "verified") verified.textContent = "changed since verified";
}

async function onCommit(data) {
  const scopes = [...document.querySelectorAll("[data-dataset]")].filter(
    (n) => n.dataset.dataset === data.dataset && !n.matches("button"),
  );
  if (scopes.length === 0) return;
  const response = await fetch(`/ui/api/datasets/${encodeURIComponent(data.dataset)}/summary`, {
    credentials: "same-origin",
  });
  if (!response.ok) return;
  const summary = await response.json();
  for (const scope of scopes) setFields(scope, summary);
  const history = document.querySelector('[data-live="history"][data-top]:not([data-top=""])');
  if (history) await addBlocks(history, data.dataset);
  const notice = document.getElementById("stale");
  if (document.querySelector("#tab-data") && !notice) {
    const bar = el("p", "New blocks were committed: ", "notice");
    bar.id = "stale";
    const again = el("a", "show them");
    again.href = location.href;
    bar.append(again);
    document.querySelector("section.tab")?.prepend(bar);
  }
  document.body.dataset.commits = String(Number(document.body.dataset.commits ?? 0) + 1);
}

// new blocks on top of a history shown from the head, built with textContent only
async function addBlocks(history, dataset) {
  const url = `/ui/api/datasets/${encodeURIComponent(dataset)}/blocks?${new URLSearchParams({ after: history.dataset.top })}`;
  const response = await fetch(url, { credentials: "same-origin" });
  if (!response.ok) return;
  const { blocks } = await response.json();
  for (const block of [...blocks].reverse()) {
    const article = el("article", null, "block new");
    const header = el("header");
    header.append(el("span", `#${block.seq}`, "seq"), " ", el("strong", block.kind), " ", el("time", block.time));
    article.append(header, el("p", `block ${block.hash}`, "hash"));
    if (block.files.length) {
      const table = el("table", null, "files");
      const head = table.createTHead().insertRow();
      for (const c of ["file", "size", "offsets", "logical hash", "physical hash"]) head.append(el("th", c));
      const body = table.createTBody();
      for (const row of block.files) {
        const tr = body.insertRow();
        for (const v of row) tr.append(el("td", v));
      }
      article.append(table);
    }
    const details = el("details");
    details.append(el("summary", "event"), el("pre", block.yaml, "yaml"));
    article.append(details);
    history.prepend(article);
  }
  if (blocks.length) history.dataset.top = blocks[0].hash;
}

function onJob(data) {
  const box = jobs.get(data.job);
  if (!box) {
    if (!early.has(data.job)) early.set(data.job, []);
    early.get(data.job).push(data);
    return;
  }
  const bar = box.querySelector("progress");
  if (data.bytes !== undefined && bar) {
    if (data.total) { bar.max = data.total; bar.value = Math.min(data.bytes, data.total); }
  }
  if (data.text) box.querySelector(".job-lines").append(el("li", data.text));
  if (data.done) {
    if (bar) { bar.max = 1; bar.value = 1; }
    box.classList.add(data.ok ? "ok" : "bad");
    box.dataset.done = data.ok ? "ok" : "failed";
    const head = box.closest("[data-dataset]");
    const verified = head?.querySelector('[data-field="verified"]');
    if (verified && data.verified) verified.textContent = data.verified;
    for (const b of document.querySelectorAll("button[data-action]")) b.disabled = false;
  }
}

let source = null;
function listen() {
  if (!csrf) return;
  source = new EventSource("/ui/events");
  const dot = document.getElementById("live");
  source.addEventListener("open", () => dot?.classList.add("on"));
  source.addEventListener("error", () => dot?.classList.remove("on"));
  source.addEventListener("commit", (e) => onCommit(JSON.parse(e.data)));
  source.addEventListener("job", (e) => onJob(JSON.parse(e.data)));
}
listen();

for (const button of document.querySelectorAll("button[data-action]")) {
  button.addEventListener("click", async () => {
    const head = button.closest(".dataset-head");
    const box = head.querySelector(".job");
    box.hidden = false;
    box.classList.remove("ok", "bad");
    delete box.dataset.done;
    box.querySelector(".job-lines").replaceChildren();
    const bar = box.querySelector("progress");
    bar.removeAttribute("value");
    for (const b of document.querySelectorAll("button[data-action]")) b.disabled = true;
    const started = await post(`/ui/api/${button.dataset.action}`, { dataset: button.dataset.dataset });
    if (started.error) {
      box.querySelector(".job-lines").append(el("li", started.error));
      box.classList.add("bad");
      for (const b of document.querySelectorAll("button[data-action]")) b.disabled = false;
      return;
    }
    jobs.set(started.job, box);
    for (const data of early.get(started.job) ?? []) onJob(data);
    early.delete(started.job);
  });
}

// --- the SQL console -----------------------------------------------------------------------

const form = document.getElementById("sql-form");
if (form) {
  const text = document.getElementById("sql");
  let page = 1;
  const downloads = { csv: document.getElementById("download-csv"), parquet: document.getElementById("download-parquet") };
  const refreshLinks = () => {
    for (const [format, a] of Object.entries(downloads)) {
      a.href = `/ui/sql/download?${new URLSearchParams({ sql: text.value, format })}`;
    }
  };
  text.addEventListener("input", refreshLinks);
  refreshLinks();
  for (const b of document.querySelectorAll("button.insert")) {
    b.addEventListener("click", () => {
      const at = text.selectionStart ?? text.value.length;
      text.setRangeText(b.dataset.text, at, text.selectionEnd ?? at, "end");
      text.focus();
      refreshLinks();
    });
  }
  // completion of dataset and column names: Tab or Enter takes the chosen one
  const suggest = document.getElementById("sql-suggest");
  const names = [...new Set([...document.querySelectorAll("button.insert")].map((b) => b.dataset.text))];
  let chosen = 0;
  const wordBefore = () => /[A-Za-z0-9_.]+$/.exec(text.value.slice(0, text.selectionStart))?.[0] ?? "";
  const hide = () => { suggest.hidden = true; suggest.replaceChildren(); };
  const take = (name) => {
    const at = text.selectionStart;
    text.setRangeText(name, at - wordBefore().length, at, "end");
    hide();
    refreshLinks();
  };
  const show = () => {
    const word = wordBefore().toLowerCase();
    const found = word ? names.filter((n) => n.toLowerCase().startsWith(word) && n.toLowerCase() !== word).slice(0, 8) : [];
    if (found.length === 0) { hide(); return; }
    chosen = Math.min(chosen, found.length - 1);
    suggest.replaceChildren(...found.map((n, i) => {
      const item = el("li", n, i === chosen ? "chosen" : "");
      item.setAttribute("role", "option");
      item.addEventListener("mousedown", (e) => { e.preventDefault(); take(n); });
      return item;
    }));
    suggest.hidden = false;
  };
  text.addEventListener("input", () => { chosen = 0; show(); });
  text.addEventListener("blur", hide);
  text.addEventListener("keydown", (e) => {
    if (suggest.hidden) return;
    const items = [...suggest.children];
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      chosen = (chosen + (e.key === "ArrowDown" ? 1 : items.length - 1)) % items.length;
      show();
    } else if ((e.key === "Tab" || e.key === "Enter") && !e.ctrlKey && !e.metaKey) {
      e.preventDefault();
      take(items[chosen].textContent);
    } else if (e.key === "Escape") {
      hide();
    }
  });

  async function run() {
    const status = document.getElementById("sql-status");
    const error = document.getElementById("sql-error");
    const result = document.getElementById("sql-result");
    status.textContent = "running ...";
    error.hidden = true;
    const value = await post("/ui/api/query", { sql: text.value, page });
    status.textContent = "";
    if (value.error) {
      error.hidden = false;
      error.replaceChildren();
      error.append(el("span", value.error));
      if (value.line) {
        const line = text.value.split("\n")[value.line - 1] ?? "";
        error.append(el("span", `\n${line}\n${" ".repeat(Math.max(0, value.column))}^ line ${value.line}, column ${value.column + 1}`, "where"));
      }
      result.replaceChildren();
      document.getElementById("sql-pager").hidden = true;
      return;
    }
    const table = el("table", null, "data");
    const head = table.createTHead().insertRow();
    for (const c of value.columns) head.append(el("th", c));
    const body = table.createTBody();
    for (const row of value.rows) {
      const tr = body.insertRow();
      for (const cell of row) tr.append(el("td", cell));
    }
    result.replaceChildren(table);
    status.textContent = `${value.total} rows (${value.seconds} s)`;
    document.getElementById("sql-pager").hidden = value.pages <= 1;
    document.getElementById("sql-page").textContent = `page ${value.page} of ${value.pages}`;
    document.getElementById("sql-prev").disabled = value.page <= 1;
    document.getElementById("sql-next").disabled = value.page >= value.pages;
  }
  form.addEventListener("submit", (e) => { e.preventDefault(); page = 1; run(); });
  document.getElementById("sql-prev").addEventListener("click", () => { page -= 1; run(); });
  document.getElementById("sql-next").addEventListener("click", () => { page += 1; run(); });
  text.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); page = 1; run(); }
  });
  if (text.value.trim()) run();
}
