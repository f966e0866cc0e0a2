// countersign review page. Loaded from /review/static/review.js under a CSP that allows no
// inline script: everything the script needs is in data- attributes of the page.
"use strict";

// Where the signed-in person's pages live: /review/s/KEY, a path only this origin knows (the
// session cookie is sent to that path alone), or /review on the development-only page.
const BASE_KEY = "countersign-review-base";
function base() {
  return document.body.dataset.base || "/review";
}

const b64u = {
  enc(buf) {
    const bytes = new Uint8Array(buf);
    let s = "";
    for (const b of bytes) s += String.fromCharCode(b);
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  },
  dec(text) {
    let t = text.replace(/-/g, "+").replace(/_/g, "/");
    while (t.length % 4) t += "=";
    const s = atob(t);
    const out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  },
};

function say(text, ok) {
  const s = document.getElementById("status");
  if (!s) return;
  s.textContent = text;
  s.className = ok ? "ok" : "err";
}

function fail(e) {
  if (e && e.code) say(e.code + ": " + (e.message || ""), false);
  else say("ERROR: " + (e && e.message ? e.message : String(e)), false);
}

async function post(path, body) {
  const r = await fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body || {}),
    credentials: "same-origin",
  });
  let j = {};
  try {
    j = await r.json();
  } catch (_) {
    j = {};
  }
  if (!r.ok) throw j.error || { code: "HTTP_" + r.status, message: r.statusText };
  return j;
}

// One WebAuthn assertion over `challenge`, in the form the server parses. Without `allow` the
// authenticator offers the passkeys it holds for this origin (sign-in names nobody).
async function assertion(challenge, allow) {
  const cred = await navigator.credentials.get({
    publicKey: {
      challenge,
      allowCredentials: (allow || []).map((id) => ({ type: "public-key", id: b64u.dec(id) })),
      userVerification: "required",
      rpId: location.hostname,
      timeout: 120000,
    },
  });
  const r = cred.response;
  return JSON.stringify({
    id: b64u.enc(cred.rawId),
    clientDataJSON: b64u.enc(r.clientDataJSON),
    authenticatorData: b64u.enc(r.authenticatorData),
    signature: b64u.enc(r.signature),
  });
}

// Asks for a statement over `items`, signs its digest, posts both.
async function approve(statementPath, approvePath, request) {
  const s = await post(statementPath, request);
  const a = await assertion(b64u.dec(s.digest), s.allow);
  return post(approvePath, { statement: s.statement, assertion: a });
}

function on(id, fn) {
  const el = document.getElementById(id);
  if (el) el.addEventListener("click", (ev) => { ev.preventDefault(); fn(el); });
}

// Where to go after signing in: a page under /review named by `next`, as a path under the
// session's base.
function nextPage() {
  const next = new URLSearchParams(location.search).get("next") || "";
  const m = /^\/review(\/(?!s\/|login|static\/|enroll)[^\\]*)?$/.exec(next);
  return m && m[1] && !m[1].startsWith("//") ? m[1] : "/";
}

function login() {
  const again = new URLSearchParams(location.search).get("again");
  if (again) localStorage.removeItem(BASE_KEY);
  const known = localStorage.getItem(BASE_KEY);
  if (known && /^\/review\/s\/[A-Za-z0-9_-]+$/.test(known)) {
    // Signed in already in this browser: continue under the session's path.
    location.replace(known + nextPage());
    return;
  }
  on("signin", async () => {
    try {
      const c = await post("/review/login/challenge", {});
      const a = await assertion(b64u.dec(c.challenge), []);
      const r = await post("/review/login", { challenge: c.challenge, assertion: a });
      localStorage.setItem(BASE_KEY, r.base);
      location.assign(r.base + nextPage());
    } catch (e) {
      fail(e);
    }
  });
}

// Fetches the list page again and swaps in its rows: each row is rendered on the server only,
// where every value is escaped. The boxes the person ticked stay ticked.
async function refresh() {
  let fresh;
  try {
    const r = await fetch(base(), { credentials: "same-origin" });
    if (!r.ok) return;
    fresh = new DOMParser().parseFromString(await r.text(), "text/html");
  } catch (_) {
    return;
  }
  const body = document.querySelector("#pending tbody");
  const rows = fresh.querySelector("#pending tbody");
  if (!body || !rows) return;
  const picked = new Set([...document.querySelectorAll(".pick:checked")].map((c) => c.value));
  for (const box of rows.querySelectorAll(".pick")) box.checked = picked.has(box.value);
  body.replaceChildren(...[...rows.children].map((tr) => document.importNode(tr, true)));
  const empty = document.getElementById("empty");
  if (empty) empty.hidden = body.children.length > 0;
}

function list() {
  setInterval(refresh, 3000);
  on("batch", () => {
    const ids = [...document.querySelectorAll(".pick:checked")].map((c) => c.value);
    if (ids.length === 0) return say("select at least one draft", false);
    location.assign(base() + "/batch?" + ids.map((i) => "d=" + encodeURIComponent(i)).join("&"));
  });
}

function draft() {
  const id = document.body.dataset.draft;
  const revision = document.body.dataset.revision;
  const here = base() + "/draft/" + encodeURIComponent(id);
  on("approve", async () => {
    try {
      if (document.body.dataset.dev) {
        // Development-only page: an unsigned approval, no passkey.
        await post(here + "/approve", { revision });
      } else {
        say("waiting for your passkey…", true);
        await approve(here + "/statement", here + "/approve", { revision });
      }
      say("approved revision " + revision, true);
    } catch (e) {
      fail(e);
    }
  });
  on("reject", async () => {
    try {
      const reason = document.getElementById("reason").value;
      await post(here + "/reject", { reason });
      say("rejected", true);
    } catch (e) {
      fail(e);
    }
  });
  const form = document.getElementById("edit");
  if (form) {
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      // Only what the person changed: a browser rewrites what it shows in a form (line ends,
      // a textarea's first line feed, NUL), so an untouched field is never sent back.
      const values = {};
      for (const el of form.querySelectorAll("[data-pointer]")) {
        if (el.value !== el.defaultValue) values[el.dataset.pointer] = el.value;
      }
      if (Object.keys(values).length === 0) return say("nothing was changed", false);
      try {
        const r = await post(here + "/edit", { expected: form.dataset.expected, values });
        location.assign(r.location);
      } catch (e) {
        fail(e);
      }
    });
  }
}

function batch() {
  on("approve-all", async () => {
    const items = [...document.querySelectorAll("section.draft")].map((s) => [
      s.dataset.draft,
      s.dataset.revision,
    ]);
    try {
      say("waiting for your passkey…", true);
      const r = await approve(base() + "/batch/statement", base() + "/batch/approve", { items });
      say("approved " + r.approved.length + " drafts", true);
    } catch (e) {
      fail(e);
    }
  });
}

function enroll() {
  on("enroll", async () => {
    const d = document.body.dataset;
    try {
      const cred = await navigator.credentials.create({
        publicKey: {
          challenge: b64u.dec(d.challenge),
          rp: { id: location.hostname, name: "countersign" },
          user: { id: b64u.dec(d.user), name: d.name, displayName: d.name },
          pubKeyCredParams: [
            { type: "public-key", alg: -7 },
            { type: "public-key", alg: -8 },
          ],
          authenticatorSelection: { userVerification: "required", residentKey: "preferred" },
          attestation: "none",
          timeout: 120000,
        },
      });
      // A link's query carries what lets this page register; a loopback page has none.
      const made = await post(location.pathname + location.search, {
        clientDataJSON: b64u.enc(cred.response.clientDataJSON),
        attestationObject: b64u.enc(cred.response.attestationObject),
      });
      if (location.search) {
        const line = document.getElementById("line");
        line.textContent = made.line;
        line.hidden = false;
        say("passkey made: add this line to the approvers file", true);
      } else {
        say("passkey made: the command prints the line for the approvers file", true);
      }
    } catch (e) {
      fail(e);
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  on("logout", async () => {
    try {
      localStorage.removeItem(BASE_KEY);
      await fetch(base() + "/logout", { method: "POST", credentials: "same-origin" });
    } finally {
      location.assign("/review/login");
    }
  });
  const pages = { login, list, draft, batch, enroll };
  const run = pages[document.body.dataset.page];
  if (run) run();
});
