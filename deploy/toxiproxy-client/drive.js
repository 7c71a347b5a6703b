// Drives a running `anyplay-chaos up --api ADDR` with Toxiproxy's own Node client, unchanged:
// lists the proxies, creates, lists, updates and deletes toxics of every type the issue names
// (latency, bandwidth, timeout, reset_peer), disables a proxy and enables it again, resets, and
// checks Toxiproxy's errors. Each change holds a few seconds, so the players meet it.
// Usage: node drive.js http://127.0.0.1:8474   (exit 0: every step as Toxiproxy would answer)
"use strict";
const assert = require("node:assert/strict");
const { Toxiproxy } = require("toxiproxy-node-client");

const host = process.argv[2];
const toxiproxy = new Toxiproxy(host);
const api = toxiproxy.getApi();
const hold = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const step = (what) => console.log(`ok ${what}`);

// The status of a request the client refused, from its error message.
async function status(promise) {
  try {
    await promise;
  } catch (error) {
    const match = /status code (\d+)/.exec(error.message);
    if (match) return Number(match[1]);
    throw error;
  }
  return 200;
}

async function main() {
  const version = JSON.parse(await toxiproxy.getVersion());
  assert.match(version.version, /^2\./);
  step(`version ${version.version}`);

  const all = await toxiproxy.getAll();
  for (const name of ["node-1-players", "node-2-players", "node-1-postgres", "node-2-nats"]) {
    assert.ok(all[name], `${name} in ${Object.keys(all)}`);
    assert.equal(all[name].enabled, true);
  }
  step(`proxies ${Object.keys(all).join(" ")}`);

  // Toxiproxy's errors: a proxy that exists, one that does not, bad toxics.
  const players1 = await toxiproxy.get("node-1-players");
  assert.equal(
    await status(toxiproxy.createProxy({ name: "node-1-players", listen: "127.0.0.1:0", upstream: players1.upstream })),
    409,
  );
  assert.equal(await status(toxiproxy.get("node-9-players")), 404);
  assert.equal(await status(players1.addToxic({ type: "nope", attributes: {} })), 400);
  assert.equal(await status(players1.addToxic({ type: "latency", attributes: { latency: "slow" } })), 400);
  assert.equal(await status(players1.getToxic("latency_downstream")), 404);
  step("errors 409 404 400 400 404");

  // Latency both ways, one toxic per stream, listed, updated, removed.
  const down = await players1.addToxic({ type: "latency", attributes: { latency: 200, jitter: 20 } });
  assert.equal(down.name, "latency_downstream");
  assert.equal(down.stream, "downstream");
  assert.equal(down.toxicity, 1);
  const up = await players1.addToxic({
    name: "latency_up", type: "latency", stream: "upstream", toxicity: 1, attributes: { latency: 50 },
  });
  assert.deepEqual(up.attributes, { latency: 50, jitter: 0 });
  assert.equal(
    await status(players1.addToxic({ name: "latency_up", type: "latency", stream: "upstream", attributes: {} })),
    409,
  );
  const listed = (await api.get(`${host}/proxies/node-1-players/toxics`)).data;
  assert.deepEqual(listed.map((t) => t.name).sort(), ["latency_downstream", "latency_up"]);
  step("latency up and down, listed");
  await hold(2000);
  const updated = await down.update({ attributes: { latency: 100 } });
  assert.deepEqual(updated.attributes, { latency: 100, jitter: 20 });
  assert.deepEqual((await players1.getToxic("latency_downstream")).attributes, { latency: 100, jitter: 20 });
  step("latency updated");
  await hold(2000);
  await updated.remove();
  await up.remove();
  assert.deepEqual((await api.get(`${host}/proxies/node-1-players/toxics`)).data, []);
  step("latency removed");

  const players2 = await toxiproxy.get("node-2-players");
  const bandwidth = await players2.addToxic({ type: "bandwidth", attributes: { rate: 16 } });
  await hold(3000);
  await bandwidth.remove();
  step("bandwidth");

  const timeout = await players2.addToxic({ type: "timeout", toxicity: 0.5, attributes: { timeout: 1000 } });
  assert.equal(timeout.toxicity, 0.5);
  await hold(3000);
  await timeout.remove();
  step("timeout");

  const reset = await players1.addToxic({ type: "reset_peer", stream: "upstream", attributes: { timeout: 500 } });
  assert.equal(reset.name, "reset_peer_upstream");
  await hold(2000);
  await reset.remove();
  step("reset_peer");

  const nats2 = await toxiproxy.get("node-2-nats");
  const disabled = await nats2.update({ enabled: false });
  assert.equal(disabled.enabled, false);
  assert.equal((await toxiproxy.get("node-2-nats")).enabled, false);
  await hold(3000);
  const enabled = await nats2.update({ enabled: true });
  assert.equal(enabled.enabled, true);
  step("proxy disabled and enabled");

  // Reset heals everything at once.
  const postgres1 = await toxiproxy.get("node-1-postgres");
  await postgres1.addToxic({ type: "latency", attributes: { latency: 20 } });
  await players2.update({ enabled: false });
  await hold(1000);
  await toxiproxy.reset();
  const healed = await toxiproxy.getAll();
  for (const proxy of Object.values(healed)) {
    assert.equal(proxy.enabled, true, proxy.name);
    assert.deepEqual((await api.get(`${host}/proxies/${proxy.name}/toxics`)).data, [], proxy.name);
  }
  step("reset");
}

main().then(
  () => console.log("done"),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
