//! The plan as serde reads it from YAML: exact key names, unknown keys refused, and where a
//! key sits in the source (for errors that name the line).
//!
//! Scalars that need parsing (durations, targets) stay strings here; `validate` types them.

use std::collections::BTreeMap;
use std::fmt;

use anyplay_cloud::duration;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::hosts::LOCAL;
use super::{
    Backend, Dependency, During, Host, LatencyGate, Plan, PlanError, Quantile, Reconnect, Service,
    Store, Version, VersionName, VersionSource,
};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPlan {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub seed: Option<u64>,
    pub backend: Option<Backend>,
    pub store: Option<Store>,
    /// Hosts by name, each `local`, `netns` or `{docker: URL, tls: …}`; services name theirs
    /// with `host:`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hosts: BTreeMap<String, Host>,
    /// The builds the nodes may run, by name: `{binary: PATH}`, `{image: IMAGE}` or `{git: REV}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub versions: BTreeMap<String, RawVersion>,
    pub services: Option<RawServices>,
    pub load: Option<RawLoad>,
    #[serde(default)]
    pub timeline: Vec<RawEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<RawClient>,
    pub settle: Option<String>,
    pub checks: Option<RawChecks>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abort: Option<RawAbort>,
}

/// One entry of `versions:`: exactly one source, and environment of its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawVersion {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git: Option<String>,
    #[serde(rename = "built-in", skip_serializing_if = "Option::is_none")]
    pub built_in: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, serde_yaml::Value>>,
}

/// `abort: { when: {…}, for: 10s }`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAbort {
    #[serde(default)]
    pub when: RawAbortWhen,
    #[serde(rename = "for", skip_serializing_if = "Option::is_none")]
    pub for_: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAbortWhen {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_error_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub players_online_below: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServices {
    // `postgres:` with nothing after it declares the service just like `postgres: {}`.
    #[serde(
        default,
        deserialize_with = "declared",
        skip_serializing_if = "Option::is_none"
    )]
    pub postgres: Option<RawDependency>,
    #[serde(
        default,
        deserialize_with = "declared",
        skip_serializing_if = "Option::is_none"
    )]
    pub nats: Option<RawDependency>,
    pub nodes: Option<RawNodes>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDependency {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// PostgreSQL only: fsync and synchronous commit on (the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub durable: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNodes {
    pub count: Option<u32>,
    pub drain_timeout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_connections: Option<u32>,
    // Values stay YAML scalars so `PORT: 8080` is as good as `PORT: "8080"`.
    pub env: Option<BTreeMap<String, serde_yaml::Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The version every node starts on (a name of `versions`, or `built-in`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// One host for every node, or one per node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<RawNodeHosts>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RawNodeHosts {
    All(String),
    Each(Vec<String>),
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLoad {
    pub players: u32,
    pub login_rate: Option<u32>,
    pub friends: Option<u32>,
    pub reconnect: Option<Reconnect>,
    pub presence_rate: Option<u32>,
    pub session_rate: Option<u32>,
    pub cards_rate: Option<u32>,
    pub through_proxy: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub friend_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub churn_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub privacy_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logout_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub second_devices: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_readers: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_leaves_first: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limits: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agents: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agents_local: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats: Option<String>,
}

/// One timeline entry: `at` plus exactly one action key and that action's parameters, read
/// and refused by [`super::actions`] (which names the keys an entry may hold).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RawEntry {
    pub at: String,
    #[serde(flatten)]
    pub keys: serde_yaml::Mapping,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClient {
    pub name: String,
    pub cmd: String,
    pub expect_exit: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawChecks {
    pub players_back: Option<String>,
    pub duplicate_sessions: Option<u64>,
    pub presence_missing: Option<u64>,
    pub events_missing: Option<u64>,
    pub lost_writes: Option<u64>,
    pub http_error_ratio: Option<f64>,
    pub failover: Option<String>,
    pub stale_online: Option<u64>,
    pub event_order: Option<u64>,
    pub session_integrity: Option<u64>,
    pub unexpected_events: Option<u64>,
    pub unexplained_disconnects: Option<u64>,
    pub cards_privacy: Option<u64>,
    /// Budgets by the name of an operation the load times.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub latency: BTreeMap<String, RawLatencyGate>,
}

/// `checks.latency.<op>`: one or more budgets, and which samples they judge.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLatencyGate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p95: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub during: Option<String>,
}

impl RawVersion {
    fn of(version: &Version) -> RawVersion {
        let mut raw = RawVersion {
            env: (!version.env.is_empty()).then(|| {
                version
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_yaml::Value::String(v.clone())))
                    .collect()
            }),
            ..RawVersion::default()
        };
        match &version.source {
            VersionSource::Binary(path) => raw.binary = Some(path.display().to_string()),
            VersionSource::Image(image) => raw.image = Some(image.clone()),
            VersionSource::Git(rev) => raw.git = Some(rev.clone()),
            VersionSource::BuiltIn => raw.built_in = Some(true),
        }
        raw
    }
}

impl RawLatencyGate {
    fn of(gate: &LatencyGate) -> RawLatencyGate {
        let mut raw = RawLatencyGate {
            during: (gate.during != During::All).then(|| gate.during.to_string()),
            ..RawLatencyGate::default()
        };
        for &(quantile, budget) in &gate.budgets {
            let slot = match quantile {
                Quantile::P50 => &mut raw.p50,
                Quantile::P95 => &mut raw.p95,
                Quantile::P99 => &mut raw.p99,
                Quantile::Max => &mut raw.max,
            };
            *slot = Some(duration::format(budget));
        }
        raw
    }

    /// The budget written for `quantile`.
    pub fn budget(&self, quantile: Quantile) -> Option<&str> {
        match quantile {
            Quantile::P50 => self.p50.as_deref(),
            Quantile::P95 => self.p95.as_deref(),
            Quantile::P99 => self.p99.as_deref(),
            Quantile::Max => self.max.as_deref(),
        }
    }
}

fn declared<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Some(
        Option::<T>::deserialize(deserializer)?.unwrap_or_default(),
    ))
}

/// Reads YAML into a [`RawPlan`]; a syntax error, an unknown key or a wrong type names its line.
pub fn parse(src: &str) -> Result<RawPlan, PlanError> {
    serde_yaml::from_str(src).map_err(|err| from_yaml_error(src, &err))
}

/// Splits serde_norway's `path: message at line L column C` into our line, key and message.
fn from_yaml_error(src: &str, err: &serde_yaml::Error) -> PlanError {
    let text = err.to_string();
    let line = err.location().map_or(1, |loc| loc.line());
    let text = match err.location() {
        Some(loc) => {
            let suffix = format!(" at line {} column {}", loc.line(), loc.column());
            text.strip_suffix(&suffix).unwrap_or(&text).to_owned()
        }
        None => text,
    };
    // A path has no spaces (`timeline[2].at`); serde's own messages always do.
    let (path, message) = match text.split_once(": ") {
        Some((path, rest)) if !path.is_empty() && !path.contains(char::is_whitespace) => {
            (path.to_owned(), rest.to_owned())
        }
        _ => (String::new(), text),
    };
    let field = ["unknown field `", "missing field `", "duplicate field `"]
        .iter()
        .find_map(|lead| message.strip_prefix(lead))
        .and_then(|rest| rest.split('`').next());
    let key = match (field, path.is_empty()) {
        (Some(field), true) => field.to_owned(),
        (Some(field), false) => format!("{path}.{field}"),
        (None, false) => path.clone(),
        (None, true) => "(document)".to_owned(),
    };
    // serde_norway stamps a duplicate with its mapping's position: the duplicate's own line
    // is that of the key's second occurrence there.
    let line = match (
        message.starts_with("duplicate field `"),
        field,
        KeyPath::parse(&path),
    ) {
        (true, Some(field), Some(mapping)) => {
            let mut again = mapping;
            again.0.push(Seg::Again(field.to_owned()));
            locate(src, &again)
        }
        _ => line,
    };
    PlanError::Invalid { line, key, message }
}

/// One step of a key path: a mapping key or a sequence index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
    /// A key's second occurrence in its mapping (a duplicate), to locate it.
    Again(String),
}

/// A path to a value in the plan, written the way serde_norway writes it: `timeline[3].start`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPath(pub Vec<Seg>);

impl KeyPath {
    pub fn key(&self, key: &str) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Key(key.to_owned()));
        Self(segs)
    }

    pub fn index(&self, index: usize) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Index(index));
        Self(segs)
    }

    /// Reads a path as serde_norway writes it (`timeline[3].start`; empty: the document).
    fn parse(text: &str) -> Option<Self> {
        let mut segs = Vec::new();
        for part in text.split('.').filter(|p| !p.is_empty()) {
            let (key, indexes) = part.split_once('[').unwrap_or((part, ""));
            if !key.is_empty() {
                segs.push(Seg::Key(key.to_owned()));
            }
            for index in indexes.split('[').filter(|i| !i.is_empty()) {
                segs.push(Seg::Index(index.strip_suffix(']')?.parse().ok()?));
            }
        }
        Some(Self(segs))
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(key) | Seg::Again(key) if i == 0 => write!(f, "{key}")?,
                Seg::Key(key) | Seg::Again(key) => write!(f, ".{key}")?,
                Seg::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// The line of `path` in `src`, or of its nearest ancestor that is written there.
///
/// serde_norway keeps no spans, but it stamps the position of the node being read on every
/// error; so we read the source again with a seed that fails exactly at `path` and take the
/// position from that error. It works for block and flow style alike.
pub fn locate(src: &str, path: &KeyPath) -> usize {
    let mut segs = path.0.as_slice();
    loop {
        let probe = Probe { path: segs };
        if let Err(err) = probe.deserialize(serde_yaml::Deserializer::from_str(src)) {
            if let Some(loc) = err.location() {
                return loc.line();
            }
        }
        match segs.split_last() {
            Some((_, parent)) => segs = parent,
            None => return 1,
        }
    }
}

/// Walks the document along `path`, skipping everything else, and fails at its end.
struct Probe<'a> {
    path: &'a [Seg],
}

impl<'de> DeserializeSeed<'de> for Probe<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        match self.path.split_first() {
            // Any visitor method left at its default refuses the node: that is the hit.
            None => deserializer.deserialize_any(Hit),
            Some((Seg::Key(key), rest)) => {
                deserializer.deserialize_any(InMap { key, rest, skip: 0 })
            }
            Some((Seg::Again(key), rest)) => {
                deserializer.deserialize_any(InMap { key, rest, skip: 1 })
            }
            Some((Seg::Index(index), rest)) => deserializer.deserialize_any(InSeq {
                index: *index,
                rest,
            }),
        }
    }
}

struct Hit;

impl Visitor<'_> for Hit {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("nothing (position probe)")
    }
}

struct InMap<'a> {
    key: &'a str,
    rest: &'a [Seg],
    /// Occurrences of `key` to pass over first (a duplicate is the second).
    skip: usize,
}

impl<'de> Visitor<'de> for InMap<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let hit_key = self.rest.is_empty();
        let mut passed = 0;
        while let Some(found) = map.next_key_seed(KeyProbe {
            key: self.key,
            hit: hit_key && passed == self.skip,
        })? {
            if found && passed < self.skip {
                passed += 1;
                map.next_value::<IgnoredAny>()?;
            } else if found {
                map.next_value_seed(Probe { path: self.rest })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// Reads one mapping key: `Ok(true)` when it is the key sought, an error when the path ends
/// at this key (so the position is the key's own, not its value's).
struct KeyProbe<'a> {
    key: &'a str,
    hit: bool,
}

impl<'de> DeserializeSeed<'de> for KeyProbe<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Visitor<'_> for KeyProbe<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        match (v == self.key, self.hit) {
            (true, true) => Err(E::custom("position probe")),
            (found, _) => Ok(found),
        }
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
}

struct InSeq<'a> {
    index: usize,
    rest: &'a [Seg],
}

impl<'de> Visitor<'de> for InSeq<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        loop {
            let more = if i == self.index {
                seq.next_element_seed(Probe { path: self.rest })?.is_some()
            } else {
                seq.next_element::<IgnoredAny>()?.is_some()
            };
            if !more {
                return Ok(());
            }
            i += 1;
        }
    }
}

impl From<&Plan> for RawPlan {
    /// The canonical written form of a validated plan: every default spelled out, so the file a
    /// run stores (`plan.yaml`) reads back to the same plan whatever defaults become later.
    fn from(plan: &Plan) -> Self {
        let hosts = &plan.hosts;
        // `local` is the default, written only when a list needs it.
        let placed = |service: Service| Some(hosts.of(service).to_owned()).filter(|h| h != LOCAL);
        let dependency = |dep: &Dependency, service: Service| RawDependency {
            image: dep.image.clone(),
            port: dep.port,
            args: (!dep.args.is_empty()).then(|| dep.args.clone()),
            durable: dep.durable,
            host: placed(service),
        };
        let node_hosts: Vec<String> = (1..=plan.services.nodes.count)
            .map(|n| hosts.of(Service::Node(n)).to_owned())
            .collect();
        let node_hosts = match node_hosts.as_slice() {
            [first, ..] if node_hosts.iter().all(|h| h == first) => Some(first.clone())
                .filter(|h| h != LOCAL)
                .map(RawNodeHosts::All),
            _ => Some(RawNodeHosts::Each(node_hosts)),
        };
        let nodes = &plan.services.nodes;
        let load = &plan.load;
        let checks = &plan.checks;
        RawPlan {
            name: plan.name.clone(),
            description: (!plan.description.is_empty()).then(|| plan.description.clone()),
            seed: Some(plan.seed),
            backend: Some(plan.backend),
            store: Some(plan.store),
            hosts: hosts.declared.clone(),
            versions: plan
                .versions
                .iter()
                .map(|(name, version)| (name.to_string(), RawVersion::of(version)))
                .collect(),
            services: Some(RawServices {
                postgres: plan
                    .services
                    .postgres
                    .as_ref()
                    .map(|d| dependency(d, Service::Postgres)),
                nats: plan
                    .services
                    .nats
                    .as_ref()
                    .map(|d| dependency(d, Service::Nats)),
                nodes: Some(RawNodes {
                    count: Some(nodes.count),
                    drain_timeout: Some(duration::format(nodes.drain_timeout)),
                    db_connections: nodes.db_connections,
                    env: Some(
                        nodes
                            .env
                            .iter()
                            .map(|(k, v)| (k.clone(), serde_yaml::Value::String(v.clone())))
                            .collect(),
                    ),
                    image: nodes.image.clone(),
                    version: (nodes.version != VersionName::BUILT_IN)
                        .then(|| nodes.version.to_string()),
                    host: node_hosts,
                }),
            }),
            load: Some(RawLoad {
                players: load.players,
                login_rate: Some(load.login_rate),
                friends: Some(load.friends),
                reconnect: Some(load.reconnect),
                presence_rate: Some(load.presence_rate),
                session_rate: Some(load.session_rate),
                cards_rate: Some(load.cards_rate),
                through_proxy: Some(load.through_proxy),
                friend_rate: Some(load.friend_rate),
                churn_rate: Some(load.churn_rate),
                block_rate: Some(load.block_rate),
                privacy_rate: Some(load.privacy_rate),
                logout_rate: Some(load.logout_rate),
                second_devices: Some(load.second_devices),
                slow_readers: Some(load.slow_readers),
                leader_leaves_first: Some(load.leader_leaves_first),
                rate_limits: load.rate_limits.then_some(true),
                agents: load.agents.as_ref().map(|a| a.count.get()),
                agents_local: load.agents.as_ref().map(|a| a.local),
                nats: load.agents.as_ref().and_then(|a| a.nats.clone()),
            }),
            timeline: plan
                .timeline
                .iter()
                .map(|e| super::actions::write(e.at, &e.action))
                .collect(),
            clients: plan
                .clients
                .iter()
                .map(|c| RawClient {
                    name: c.name.clone(),
                    cmd: c.cmd.clone(),
                    expect_exit: Some(c.expect_exit),
                })
                .collect(),
            settle: Some(duration::format(plan.settle)),
            abort: plan.abort.map(|abort| RawAbort {
                when: RawAbortWhen {
                    http_error_ratio: abort.http_error_ratio,
                    players_online_below: abort.players_online_below,
                },
                for_: Some(duration::format(abort.hold)),
            }),
            checks: Some(RawChecks {
                players_back: Some(duration::format(checks.players_back)),
                duplicate_sessions: Some(checks.duplicate_sessions),
                presence_missing: Some(checks.presence_missing),
                events_missing: Some(checks.events_missing),
                lost_writes: Some(checks.lost_writes),
                http_error_ratio: Some(checks.http_error_ratio),
                failover: checks
                    .failover
                    .set
                    .then(|| duration::format(checks.failover.crash)),
                stale_online: Some(checks.stale_online),
                event_order: Some(checks.event_order),
                session_integrity: Some(checks.session_integrity),
                unexpected_events: Some(checks.unexpected_events),
                unexplained_disconnects: Some(checks.unexplained_disconnects),
                cards_privacy: Some(checks.cards_privacy),
                latency: checks
                    .latency
                    .iter()
                    .map(|gate| (gate.op.name().to_owned(), RawLatencyGate::of(gate)))
                    .collect(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "\
name: x
services:
  nodes:
    count: 2
timeline:
  - { at: 1s, kill: node-1 }
  - at: 2s
    start: node-1
  -
    at: 3s
    partition:
      - node-1
      - postgres
    for: 1s
";

    fn path(segs: &[Seg]) -> KeyPath {
        KeyPath(segs.to_vec())
    }

    fn key(k: &str) -> Seg {
        Seg::Key(k.to_owned())
    }

    #[test]
    fn locates_keys_and_entries_in_any_style() {
        assert_eq!(locate(SRC, &path(&[key("name")])), 1);
        assert_eq!(
            locate(SRC, &path(&[key("services"), key("nodes"), key("count")])),
            4
        );
        assert_eq!(locate(SRC, &path(&[key("timeline"), Seg::Index(0)])), 6);
        assert_eq!(
            locate(SRC, &path(&[key("timeline"), Seg::Index(0), key("kill")])),
            6
        );
        assert_eq!(
            locate(SRC, &path(&[key("timeline"), Seg::Index(1), key("start")])),
            8
        );
        assert_eq!(
            locate(
                SRC,
                &path(&[key("timeline"), Seg::Index(2), key("partition")])
            ),
            11
        );
        assert_eq!(
            locate(SRC, &path(&[key("timeline"), Seg::Index(2), key("for")])),
            14
        );
    }

    #[test]
    fn a_missing_key_falls_back_to_its_nearest_written_ancestor() {
        assert_eq!(
            locate(SRC, &path(&[key("timeline"), Seg::Index(1), key("gap")])),
            7
        );
        assert_eq!(locate(SRC, &path(&[key("store")])), 1);
    }

    #[test]
    fn unknown_keys_name_line_and_key() {
        let err = parse("name: x\nservices:\n  nodes:\n    cont: 2\n").unwrap_err();
        let PlanError::Invalid { line, key, .. } = err else {
            panic!("{err}")
        };
        assert_eq!((line, key.as_str()), (4, "services.nodes.cont"));
    }

    #[test]
    fn wrong_types_name_line_and_key() {
        let err = parse("name: x\nseed: seven\n").unwrap_err();
        let PlanError::Invalid { line, key, .. } = err else {
            panic!("{err}")
        };
        assert_eq!((line, key.as_str()), (2, "seed"));
    }

    #[test]
    fn key_paths_print_like_serde_norway() {
        let p = KeyPath::default().key("timeline").index(3).key("start");
        assert_eq!(p.to_string(), "timeline[3].start");
    }

    #[test]
    fn a_duplicate_key_is_named_on_its_own_line() {
        let at = |src: &str| match parse(src) {
            Err(PlanError::Invalid { line, key, .. }) => (line, key),
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert_eq!(
            at("name: x\nseed: 1\nload: {players: 1}\nseed: 2\n"),
            (4, "seed".to_owned())
        );
        assert_eq!(
            at("name: x\nservices:\n  nodes: {count: 1}\n  postgres: {}\n  nodes: {count: 2}\n"),
            (5, "services.nodes".to_owned())
        );
    }
}
