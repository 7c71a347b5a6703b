//! Drives a running `anyplay-chaos up --api ADDR` with crates.io's toxiproxy_rust (the Rust
//! client Toxiproxy's README lists), unchanged: version, the proxies, populate with a topology
//! proxy as listed, toxics made with its helpers (slicer with a size variation among them),
//! listed and removed, a proxy down and up, a reset. The client ignores error statuses, so each
//! step is checked by reading the state back. Exit 0: every step as Toxiproxy answers.
//! Usage: anyplay-toxiproxy-rust 127.0.0.1:8474

use std::collections::HashMap;
use std::thread::sleep;
use std::time::Duration;

use toxiproxy_rust::client::Client;
use toxiproxy_rust::proxy::ProxyPack;

fn step(what: &str) {
    println!("ok {what}");
}

fn main() -> Result<(), String> {
    let addr = std::env::args().nth(1).ok_or("usage: anyplay-toxiproxy-rust HOST:PORT")?;
    let client = Client::new(addr.as_str());
    assert!(client.is_running());
    let version = client.version()?;
    assert!(version.contains("\"version\""), "{version}");
    step(&format!("version {}", version.trim()));

    let all = client.all()?;
    for name in ["node-1-players", "node-2-players", "node-1-postgres", "node-2-nats"] {
        let proxy = all.get(name).ok_or(format!("{name} missing"))?;
        assert!(proxy.proxy_pack.enabled, "{name} enabled");
    }
    step("proxies");

    // A topology's proxy, given as it is listed, populates; the answer is the proxy.
    let listed = &all["node-2-players"].proxy_pack;
    let pack = ProxyPack::new(
        listed.name.clone(),
        listed.listen.clone(),
        listed.upstream.clone(),
    );
    let populated = client.populate(vec![pack])?;
    assert_eq!(populated.len(), 1);
    assert_eq!(populated[0].proxy_pack.name, "node-2-players");
    step("populate");

    let players = client.find_and_reset_proxy("node-2-players")?;
    players
        .with_latency("downstream".into(), 100, 10, 1.0)
        .with_slicer("upstream".into(), 64, 16, 500, 1.0);
    let toxics: HashMap<String, _> = players
        .toxics()?
        .into_iter()
        .map(|toxic| (toxic.name.clone(), toxic))
        .collect();
    let slicer = toxics.get("slicer_upstream").ok_or(format!("{toxics:?}"))?;
    assert_eq!(slicer.attributes["size_variation"], 16);
    assert_eq!(toxics["latency_downstream"].attributes["latency"], 100);
    step("latency and slicer");
    sleep(Duration::from_secs(1));
    players.delete_all_toxics()?;
    assert!(players.toxics()?.is_empty());
    step("toxics removed");

    let postgres = client.find_proxy("node-1-postgres")?;
    postgres.apply(|| {
        postgres.with_timeout("upstream".into(), 1000, 0.5);
        sleep(Duration::from_secs(1));
    })?;
    assert!(postgres.toxics()?.is_empty());
    step("timeout applied");

    let nats = client.find_proxy("node-2-nats")?;
    nats.with_down(|| {
        let down = client.find_proxy("node-2-nats").expect("the proxy");
        assert!(!down.proxy_pack.enabled);
        sleep(Duration::from_secs(1));
    })?;
    assert!(client.find_proxy("node-2-nats")?.proxy_pack.enabled);
    step("down and up");

    players.with_bandwidth("downstream".into(), 32, 1.0);
    client.reset()?;
    assert!(players.toxics()?.is_empty());
    step("reset");
    println!("done");
    Ok(())
}
