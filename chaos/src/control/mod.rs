//! A control API while the topology is up (chaos-plan v1.2): Toxiproxy's HTTP API over the
//! run's fault proxies, so that clients written for Toxiproxy drive them unchanged.
//!
//! - [`toxiproxy`]: Toxiproxy's JSON shapes and what each toxic is on the fault proxy.
//! - [`server`]: the HTTP routes, bounded and on the address given only.
//! - `actions`: anyplay's service actions, plan entries fired as the timeline fires them.
//! - `replay`: what the API did, as a plan's timeline for `rerun`.
//! - [`metrics`]: `--metrics`, the run's own series while it runs (on `run` too).
//!
//! [`Control`] holds what the API set (each proxy's toxics and whether it is enabled), sets it
//! on the proxies and records each change in the history as a timeline action: a toxic added is
//! an `action_start`, removed an `action_end`, an update both; a disabled proxy is a partition.

mod actions;
pub mod metrics;
mod replay;
pub mod server;
pub mod toxiproxy;

use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::events::{Event, EventLog};
use crate::plan::{ActionKind, Entry, Plan};
use crate::proxy::{
    Endpoint, LinkFault, LinkFaultKind, LinkName, PartitionMode, Proxy, Toxicity, Ways,
};
use crate::runner::topology::Topology;
use toxiproxy::{ApiError, Attributes, ProxyJson, ToxicJson, ToxicType};

/// The Toxiproxy version `GET /version` gives: the 2.x API this serves.
pub const TOXIPROXY_VERSION: &str = "2.12.0";

/// What a disabled proxy is: as Toxiproxy's closed listener, new connections are refused and
/// what is sent is lost.
const DISABLED: LinkFault = LinkFault::Partition(PartitionMode::Drop);

/// The run's proxies under the API, and the history its changes go to.
pub struct Control {
    plan: Plan,
    topology: Arc<Topology>,
    /// The topology's proxied links, in a fixed order that `state` follows.
    links: Vec<LinkName>,
    log: EventLog,
    /// Offset zero of the run's timeline: an action's `at` counts from here.
    zero: Instant,
    /// The run's seed, from which each toxic's toxicity draws its connections.
    seed: u64,
    state: Mutex<Vec<Held>>,
    /// The service actions under way (a `pause` lasts its `for`).
    actions: Mutex<JoinSet<()>>,
    /// Every change done, as a plan's timeline entry: what `rerun` replays.
    done: Mutex<Vec<Entry>>,
}

/// What the API holds on one proxy.
#[derive(Debug, Default)]
struct Held {
    /// The `at` of the partition that disables it, while it is disabled.
    disabled: Option<f64>,
    /// Deleted: gone from the API (404) and disabled, until populated or created again.
    deleted: bool,
    /// In the order they were added, as Toxiproxy lists them.
    toxics: Vec<Toxic>,
}

#[derive(Debug, Clone)]
struct Toxic {
    name: String,
    ways: Ways,
    toxicity: f32,
    attributes: Attributes,
    /// What the attributes are on the proxy.
    fault: LinkFault,
    /// The `at` of its `action_start`.
    at: f64,
}

impl Toxic {
    fn json(&self) -> ToxicJson {
        ToxicJson {
            name: self.name.clone(),
            kind: self.attributes.kind().name().to_owned(),
            stream: toxiproxy::stream_name(self.ways).to_owned(),
            toxicity: self.toxicity,
            attributes: self.attributes.to_json(),
        }
    }

    /// The slot it takes on its proxy: one fault of a kind per direction.
    fn slot(&self) -> (LinkFaultKind, Ways) {
        (self.fault.kind(), self.ways)
    }
}

/// A link's two ends, the node first.
fn ends(link: LinkName) -> (Endpoint, Endpoint) {
    if matches!(link.from, Endpoint::Node(_)) {
        (link.from, link.to)
    } else {
        (link.to, link.from)
    }
}

/// A proxy's name in the API: its link's two ends joined by a dash (`node-1-postgres`).
pub fn proxy_name(link: LinkName) -> String {
    let (node, peer) = ends(link);
    format!("{node}-{peer}")
}

/// The link as actions name it in the history (`node-1<->postgres`).
fn target(link: LinkName) -> String {
    let (node, peer) = ends(link);
    format!("{node}<->{peer}")
}

impl Control {
    pub fn new(plan: &Plan, topology: Arc<Topology>, log: EventLog, zero: Instant) -> Control {
        let links: Vec<LinkName> = topology.proxies().iter().map(Proxy::name).collect();
        let state = links.iter().map(|_| Held::default()).collect();
        Control {
            plan: plan.clone(),
            topology,
            links,
            log,
            zero,
            seed: plan.seed,
            state: Mutex::new(state),
            actions: Mutex::new(JoinSet::new()),
            done: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Held>> {
        crate::sync::lock(&self.state)
    }

    /// The index of the link whose proxy is named `name`, deleted or not.
    fn link(&self, name: &str) -> Result<usize, ApiError> {
        self.links
            .iter()
            .position(|link| proxy_name(*link) == name)
            .ok_or_else(ApiError::proxy_not_found)
    }

    /// The index of the proxy named `name`, while it is not deleted.
    fn find(&self, state: &[Held], name: &str) -> Result<usize, ApiError> {
        self.link(name)
            .ok()
            .filter(|&index| !state[index].deleted)
            .ok_or_else(ApiError::proxy_not_found)
    }

    fn proxy_at(&self, index: usize) -> &Proxy {
        // `links` came from this same set, which never changes.
        self.topology
            .proxies()
            .get(&self.links[index])
            .expect("a link of the topology has its proxy")
    }

    fn json(&self, index: usize, held: &Held) -> ProxyJson {
        let proxy = self.proxy_at(index);
        ProxyJson {
            name: proxy_name(proxy.name()),
            listen: proxy.listen_addr().to_string(),
            upstream: proxy.upstream().to_string(),
            enabled: held.disabled.is_none(),
            toxics: held.toxics.iter().map(Toxic::json).collect(),
        }
    }

    /// `GET /proxies`: every proxy by name.
    pub fn proxies(&self) -> serde_json::Map<String, Value> {
        let state = self.lock();
        (0..self.links.len())
            .filter(|&i| !state[i].deleted)
            .map(|i| {
                let json = self.json(i, &state[i]);
                (json.name.clone(), to_value(&json))
            })
            .collect()
    }

    /// `GET /proxies/{name}`.
    pub fn proxy(&self, name: &str) -> Result<ProxyJson, ApiError> {
        let state = self.lock();
        let index = self.find(&state, name)?;
        Ok(self.json(index, &state[index]))
    }

    /// `POST /proxies`: a proxy that exists is a 409, as Toxiproxy answers; a deleted one
    /// comes back when given at its link's addresses, enabled unless it says; no other can be
    /// made, since every proxy is a link of the topology and forwards nowhere else.
    pub fn create(&self, body: &Value) -> Result<ProxyJson, ApiError> {
        for field in ["name", "upstream"] {
            if body
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .is_empty()
            {
                return Err(ApiError::bad_request(format!(
                    "missing required field: {field}"
                )));
            }
        }
        let name = body.get("name").and_then(Value::as_str).unwrap_or_default();
        let index = self.link(name).map_err(|_| self.not_a_link(name, body))?;
        let mut state = self.lock();
        if !state[index].deleted {
            return Err(ApiError::conflict("proxy already exists"));
        }
        self.same_addresses(index, body)?;
        let enabled = enabled(body, true)?;
        self.restore(index, &mut state[index], enabled);
        Ok(self.json(index, &state[index]))
    }

    /// Why a proxy named `name` cannot be made: none is the topology's, and each forwards only
    /// to the topology's own services (those that reach the `upstream` asked for, if any do).
    fn not_a_link(&self, name: &str, body: &Value) -> ApiError {
        let names: Vec<String> = self.links.iter().map(|link| proxy_name(*link)).collect();
        let mut error = format!(
            "proxies are the topology's links and cannot be created: `{}` is none of {}",
            crate::printable::line(name),
            names.join(", ")
        );
        if let Some(upstream) = body.get("upstream").and_then(Value::as_str) {
            let reaching: Vec<String> = (0..self.links.len())
                .map(|index| self.proxy_at(index))
                .filter(|proxy| proxy.upstream().to_string() == upstream)
                .map(|proxy| proxy_name(proxy.name()))
                .collect();
            let upstream = crate::printable::line(upstream);
            error += &if reaching.is_empty() {
                format!(
                    "; upstream {upstream} is none of the topology's services, the only ones \
                     its proxies forward to"
                )
            } else {
                format!(
                    "; upstream {upstream} is reached through {}",
                    reaching.join(", ")
                )
            };
        }
        ApiError::bad_request(error)
    }

    /// `POST /populate`: each proxy named must be one of the topology's, at its addresses;
    /// each is enabled or disabled as it says (enabled by default), a deleted one made again.
    /// Nothing changes when one is refused.
    pub fn populate(&self, body: &Value) -> Result<Vec<ProxyJson>, ApiError> {
        let list = body
            .as_array()
            .ok_or_else(|| ApiError::bad_request("bad request body: a list of proxies"))?;
        let mut wanted = Vec::with_capacity(list.len());
        for entry in list {
            let name = entry
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let index = self.link(name).map_err(|_| self.not_a_link(name, entry))?;
            self.same_addresses(index, entry)?;
            wanted.push((index, enabled(entry, true)?));
        }
        let mut state = self.lock();
        for &(index, enabled) in &wanted {
            self.restore(index, &mut state[index], enabled);
        }
        Ok(wanted
            .iter()
            .map(|&(index, _)| self.json(index, &state[index]))
            .collect())
    }

    /// `POST|PATCH /proxies/{name}`: `enabled: false` is a partition, `true` its end.
    pub fn update(&self, name: &str, body: &Value) -> Result<ProxyJson, ApiError> {
        let mut state = self.lock();
        let index = self.find(&state, name)?;
        self.same_addresses(index, body)?;
        let enabled = enabled(body, state[index].disabled.is_none())?;
        self.enable(index, &mut state[index], enabled);
        Ok(self.json(index, &state[index]))
    }

    /// Refuses a `listen` or `upstream` other than the proxy's: they are its link's in the
    /// topology; given again unchanged (as clients that save a whole proxy do) they pass.
    fn same_addresses(&self, index: usize, body: &Value) -> Result<(), ApiError> {
        let proxy = self.proxy_at(index);
        for (key, addr) in [
            ("listen", proxy.listen_addr()),
            ("upstream", proxy.upstream()),
        ] {
            let given = body.get(key).filter(|v| !v.is_null());
            if given.is_some_and(|given| given.as_str() != Some(addr.to_string().as_str())) {
                return Err(ApiError::bad_request(format!(
                    "{}: a proxy's {key} is its link's in the topology ({addr}) and cannot change",
                    proxy_name(proxy.name())
                )));
            }
        }
        Ok(())
    }

    /// `DELETE /proxies/{name}`: as Toxiproxy's, the proxy is gone (404 from then on, and
    /// `POST /reset` does not bring it back), its toxics with it, and nothing passes: new
    /// connections are refused as by a disabled proxy. Its link is the topology's, so it is
    /// cut rather than unmade, until `POST /populate` or `POST /proxies` gives it again.
    pub fn delete(&self, name: &str) -> Result<(), ApiError> {
        let mut state = self.lock();
        let index = self.find(&state, name)?;
        let held = &mut state[index];
        self.remove_toxics(index, held);
        self.enable(index, held, false);
        held.deleted = true;
        Ok(())
    }

    /// `POST /reset`: every proxy enabled and every toxic removed; deleted ones stay deleted.
    pub fn reset(&self) {
        let mut state = self.lock();
        for (index, held) in state.iter_mut().enumerate() {
            if !held.deleted {
                self.clear(index, held);
            }
        }
    }

    /// At the run's end: every proxy back, enabled, without toxics.
    pub fn heal(&self) {
        let mut state = self.lock();
        for (index, held) in state.iter_mut().enumerate() {
            held.deleted = false;
            self.clear(index, held);
        }
    }

    fn clear(&self, index: usize, held: &mut Held) {
        self.enable(index, held, true);
        self.remove_toxics(index, held);
    }

    fn remove_toxics(&self, index: usize, held: &mut Held) {
        for toxic in std::mem::take(&mut held.toxics) {
            self.remove(index, &toxic);
        }
    }

    /// A deleted proxy made again (or one that exists, left), enabled or not.
    fn restore(&self, index: usize, held: &mut Held, enabled: bool) {
        held.deleted = false;
        self.enable(index, held, enabled);
    }

    fn enable(&self, index: usize, held: &mut Held, enabled: bool) {
        let proxy = self.proxy_at(index);
        let target = target(proxy.name());
        match (held.disabled, enabled) {
            (None, false) => {
                let at = self.at();
                proxy.set(DISABLED, Ways::Both, None);
                self.record_start(ActionKind::Partition, &target, at, None);
                held.disabled = Some(at);
            }
            (Some(at), true) => {
                proxy.clear(DISABLED.kind(), Ways::Both);
                self.record_end(ActionKind::Partition, &target, at);
                self.done_on_link(index, DISABLED, Ways::Both, 1.0, at);
                held.disabled = None;
            }
            _ => {}
        }
    }

    /// `GET /proxies/{name}/toxics`.
    pub fn toxics(&self, name: &str) -> Result<Vec<ToxicJson>, ApiError> {
        let state = self.lock();
        let index = self.find(&state, name)?;
        Ok(state[index].toxics.iter().map(Toxic::json).collect())
    }

    /// `GET /proxies/{name}/toxics/{toxic}`.
    pub fn toxic(&self, name: &str, toxic: &str) -> Result<ToxicJson, ApiError> {
        let state = self.lock();
        let index = self.find(&state, name)?;
        let found = state[index].toxics.iter().find(|t| t.name == toxic);
        found.map(Toxic::json).ok_or_else(ApiError::toxic_not_found)
    }

    /// `POST /proxies/{name}/toxics`: named `{type}_{stream}` unless it says; 409 for a name
    /// the proxy has, or for a fault the proxy holds already on that direction (one of a kind
    /// per direction: `timeout` and `reset_peer` share one).
    pub fn add(&self, name: &str, body: &Value) -> Result<ToxicJson, ApiError> {
        let text = |key: &str| -> Result<Option<&str>, ApiError> {
            match body.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s)),
                Some(other) => Err(ApiError::bad_request(format!(
                    "bad request body: `{key}` is a string, not {other}"
                ))),
            }
        };
        if !body.is_object() {
            return Err(ApiError::bad_request("bad request body: a toxic object"));
        }
        let ways = toxiproxy::parse_stream(text("stream")?)?;
        let kind = ToxicType::parse(text("type")?.unwrap_or_default())?;
        let toxic_name = match text("name")? {
            Some(given) if !given.is_empty() => bounded_name(given)?,
            _ => format!("{}_{}", kind.name(), toxiproxy::stream_name(ways)),
        };
        let attributes = Attributes::read(kind, body.get("attributes"), None)?;
        let toxicity = toxiproxy::parse_toxicity(body.get("toxicity"), 1.0)?;
        let mut state = self.lock();
        let index = self.find(&state, name)?;
        let held = &mut state[index];
        if held.toxics.iter().any(|t| t.name == toxic_name) {
            return Err(ApiError::conflict("toxic already exists"));
        }
        let mut toxic = Toxic {
            name: toxic_name,
            ways,
            toxicity,
            attributes,
            fault: attributes.fault()?,
            at: 0.0,
        };
        if let Some(other) = held.toxics.iter().find(|t| t.slot() == toxic.slot()) {
            return Err(ApiError::conflict(format!(
                "`{}` holds the {} {} of this proxy already: the fault proxy holds one {} \
                 per direction (update or remove it)",
                other.name,
                toxiproxy::stream_name(ways),
                ActionKind::from(toxic.fault.kind()),
                ActionKind::from(toxic.fault.kind()),
            )));
        }
        toxic.at = self.apply(index, &toxic);
        let json = toxic.json();
        held.toxics.push(toxic);
        Ok(json)
    }

    /// `POST|PATCH /proxies/{name}/toxics/{toxic}`: new attributes (those not given stay) and
    /// toxicity; in the history the old toxic ends and the new one starts.
    pub fn change(&self, name: &str, toxic: &str, body: &Value) -> Result<ToxicJson, ApiError> {
        let mut state = self.lock();
        let index = self.find(&state, name)?;
        let held = &mut state[index];
        let found = held
            .toxics
            .iter_mut()
            .find(|t| t.name == toxic)
            .ok_or_else(ApiError::toxic_not_found)?;
        let attributes = Attributes::read(
            found.attributes.kind(),
            body.get("attributes"),
            Some(found.attributes),
        )?;
        let toxicity = toxiproxy::parse_toxicity(body.get("toxicity"), found.toxicity)?;
        let fault = attributes.fault()?;
        self.remove(index, found);
        found.attributes = attributes;
        found.fault = fault;
        found.toxicity = toxicity;
        found.at = self.apply(index, found);
        Ok(found.json())
    }

    /// `DELETE /proxies/{name}/toxics/{toxic}`.
    pub fn remove_toxic(&self, name: &str, toxic: &str) -> Result<(), ApiError> {
        let mut state = self.lock();
        let index = self.find(&state, name)?;
        let held = &mut state[index];
        let at = held
            .toxics
            .iter()
            .position(|t| t.name == toxic)
            .ok_or_else(ApiError::toxic_not_found)?;
        let toxic = held.toxics.remove(at);
        self.remove(index, &toxic);
        Ok(())
    }

    /// Sets `toxic` on its proxy and records its start; its `at`.
    fn apply(&self, index: usize, toxic: &Toxic) -> f64 {
        let proxy = self.proxy_at(index);
        let toxicity = (toxic.toxicity < 1.0).then(|| Toxicity {
            share: f64::from(toxic.toxicity),
            seed: self.seed,
        });
        let fault = toxic.fault;
        proxy.set(fault, toxic.ways, toxicity);
        let at = self.at();
        let target = target(proxy.name());
        self.record_start(fault.kind().into(), &target, at, Some(toxic.json()));
        at
    }

    fn remove(&self, index: usize, toxic: &Toxic) {
        let proxy = self.proxy_at(index);
        let (kind, ways) = toxic.slot();
        proxy.clear(kind, ways);
        self.record_end(kind.into(), &target(proxy.name()), toxic.at);
        self.done_on_link(index, toxic.fault, toxic.ways, toxic.toxicity, toxic.at);
    }

    /// Now, as an offset of the timeline.
    fn at(&self) -> f64 {
        self.zero.elapsed().as_secs_f64()
    }

    fn record_start(&self, action: ActionKind, target: &str, at: f64, toxic: Option<ToxicJson>) {
        let _ = self.log.record(Event::ActionStart {
            action,
            target: target.to_owned(),
            at,
            via: None,
            to: None,
            toxic,
        });
    }

    fn record_end(&self, action: ActionKind, target: &str, at: f64) {
        let _ = self.log.record(Event::ActionEnd {
            action,
            target: target.to_owned(),
            at,
            error: None,
        });
    }
}

/// A proxy's `enabled`, or `default` when it says nothing.
fn enabled(body: &Value, default: bool) -> Result<bool, ApiError> {
    match body.get("enabled") {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(enabled)) => Ok(*enabled),
        Some(other) => Err(ApiError::bad_request(format!(
            "bad request body: `enabled` is true or false, not {other}"
        ))),
    }
}

/// A toxic's name as given: kept (it is only ever compared and echoed), within bounds.
fn bounded_name(name: &str) -> Result<String, ApiError> {
    const LONGEST: usize = 200;
    if name.len() > LONGEST || name.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "bad request body: a toxic's name is at most {LONGEST} printable characters"
        )));
    }
    Ok(name.to_owned())
}

fn to_value(json: &ProxyJson) -> Value {
    serde_json::to_value(json).unwrap_or(Value::Null)
}
