// What both pages share: talking to the signalling server (signalling.py), waiting for ICE
// gathering, and one console line a second of the call's statistics (W3C webrtc-stats). The
// wrapper (webrtc.py) forwards console lines to its standard error; a line that starts with
// "FATAL " ends the scheme with that message.
"use strict";

const POLL_MS = 100;
const STATS_INTERVAL_MS = 1000;

function fatal(what, error) {
  console.error(`FATAL ${what}: ${error && error.message ? error.message : error}`);
}

async function post(path, text) {
  const reply = await fetch(path, {method: "POST", body: text, headers: {"Content-Type": "application/sdp"}});
  if (!reply.ok) throw new Error(`POST ${path} answered ${reply.status}`);
}

// The other side's description, once it has posted it.
async function poll(path) {
  for (;;) {
    const reply = await fetch(path, {cache: "no-store"});
    if (reply.status === 200) return await reply.text();
    if (reply.status !== 204) throw new Error(`GET ${path} answered ${reply.status}`);
    await new Promise(resolve => setTimeout(resolve, POLL_MS));
  }
}

// Without trickle ICE the description is sent once every host candidate is in it.
function gathered(pc) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise(resolve => pc.addEventListener("icegatheringstatechange", () => {
    if (pc.iceGatheringState === "complete") resolve();
  }));
}

function mbps(bytes, ms) {
  return (bytes * 8 / (ms * 1000)).toFixed(2);
}

// Logs the chosen candidate pair once connected, and `line(report, previous, elapsed_ms)` each second.
function reportStats(pc, role, line) {
  let previous = null;
  let announced = false;
  pc.addEventListener("connectionstatechange", () => console.log(`${role}: connection ${pc.connectionState}`));
  setInterval(async () => {
    const report = await pc.getStats();
    const byType = type => [...report.values()].filter(s => s.type === type);
    const pair = byType("candidate-pair").find(p => p.nominated && p.state === "succeeded");
    if (pair && !announced) {
      const local = report.get(pair.localCandidateId), remote = report.get(pair.remoteCandidateId);
      console.log(`${role}: ICE pair ${local.address}:${local.port} <-> ${remote.address}:${remote.port} ${local.protocol}`);
      announced = true;
    }
    const now = {t_ms: performance.now(), byType, pair};
    if (previous) console.log(`${role}: ${line(now, previous, now.t_ms - previous.t_ms)}`);
    previous = now;
  }, STATS_INTERVAL_MS);
}
