// sagacity inbox: the WebAuthn calls, and nothing else. The server builds what is
// signed (a decision's or a resolution's statement, or the registration options); this
// file only hands them to the browser's authenticator and posts its answer back.
"use strict";

function say(text, bad) {
  const status = document.getElementById("passkey-status");
  status.textContent = text;
  status.className = bad ? "error" : "";
}

async function post(url, csrf, body) {
  const response = await fetch(url, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(body),
  });
  let answer = {};
  try { answer = await response.json(); } catch (e) { answer = { error: "the inbox answered " + response.status }; }
  if (!response.ok) { throw new Error(answer.error || ("the inbox answered " + response.status)); }
  return answer;
}

// One path for every signed action: the server drafts it from the page's fields, the
// passkey signs the draft's challenge, the server sends it to the saga; then its answer.
async function signAction(form, path, what, fields) {
  const base = "/sagas/" + form.dataset.saga + path;
  const csrf = form.dataset.csrf;
  say("asking your passkey to sign this " + what + "…", false);
  const draft = await post(base + "/draft", csrf, fields);
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(draft.options);
  const credential = await navigator.credentials.get({ publicKey: publicKey });
  say("sending the signed " + what + " to the saga…", false);
  const done = await post(base + "/finish", csrf, { credential: credential.toJSON() });
  window.location.assign(done.next);
}

async function decide(form, approve) {
  await signAction(form, "/decision", "decision", {
    key_id: form.elements["key_id"].value,
    approve: approve,
    reason: form.elements["reason"].value,
    step: Number(form.dataset.step),
    payload_sha256: form.dataset.sha256,
  });
}

async function resolveWithPasskey(form) {
  const value = (name) => (form.elements[name] ? form.elements[name].value : "");
  await signAction(form, "/resolve", "action", {
    key_id: document.getElementById("resolve-passkey").value,
    action: value("action"),
    step: value("step"),
    steps: value("steps"),
    result: value("result"),
    reason: value("reason"),
  });
}

async function enroll(form) {
  const csrf = form.dataset.csrf;
  say("asking your authenticator for a new passkey…", false);
  const made = await post("/enroll/options", csrf, {
    approver: form.elements["approver"].value,
    code: form.elements["code"].value,
  });
  const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(made.options);
  const credential = await navigator.credentials.create({ publicKey: publicKey });
  const done = await post("/enroll/finish", csrf, { credential: credential.toJSON() });
  window.location.assign(done.next);
}

function guard(work) {
  return (event) => {
    event.preventDefault();
    work(event).catch((error) => say("not done: " + (error && error.message ? error.message : error), true));
  };
}

const decisionForm = document.getElementById("decision-form");
if (decisionForm) {
  for (const id of ["approve", "reject"]) {
    const button = document.getElementById(id);
    button.addEventListener("click", guard(() => decide(decisionForm, button.dataset.approve === "true")));
  }
}
for (const form of document.querySelectorAll("form.passkey-action")) {
  form.addEventListener("submit", guard(() => resolveWithPasskey(form)));
}
const enrollForm = document.getElementById("enroll-form");
if (enrollForm) {
  enrollForm.addEventListener("submit", guard(() => enroll(enrollForm)));
}
