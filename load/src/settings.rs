//! Arguments in two stages: raw command-line flags ([`Args`]), then validated [`Settings`].
//! Bad settings are refused here, with the reason, before anything starts.

use std::path::PathBuf;
use std::time::Duration;

use anyplay_cloud::duration::parse_seconds;
use clap::Parser;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::api::net::SourceIps;
use crate::reconnect::ReconnectMode;

/// The seed of a run that names none.
pub const DEFAULT_SEED: u64 = 1;

/// A scenario of `--scenarios`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    Serialize,
    Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    Login,
    Friends,
    Presence,
    Sessions,
    Cards,
    Storm,
    Ladder,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Login => "login",
            Scenario::Friends => "friends",
            Scenario::Presence => "presence",
            Scenario::Sessions => "sessions",
            Scenario::Cards => "cards",
            Scenario::Storm => "storm",
            Scenario::Ladder => "ladder",
        }
    }
}

/// The fault of the `storm` scenario (`--storm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StormKind {
    /// Every connection breaks at once, without a close frame.
    Drop,
    /// Node 1 drains (closes its connections with 1001).
    StopNode,
    /// Node 1 vanishes.
    KillNode,
}

impl StormKind {
    pub fn name(self) -> &'static str {
        match self {
            StormKind::Drop => "drop",
            StormKind::StopNode => "stop-node",
            StormKind::KillNode => "kill-node",
        }
    }

    /// Whether the storm stops a node, which needs a second node to fail over to and control
    /// over the nodes.
    pub fn needs_cluster(self) -> bool {
        !matches!(self, StormKind::Drop)
    }
}

/// The raw flags of `anyplay-load` (see `shared/spec/load.md`).
#[derive(Debug, Clone, Parser)]
#[command(
    name = "anyplay-load",
    version,
    about = "Plays many players against the anyplay cloud and measures what they see."
)]
pub struct Args {
    /// Scenarios after the login wave and the friend graph (the storm goes last).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "presence,sessions,storm"
    )]
    pub scenarios: Vec<Scenario>,
    /// Players in the login wave.
    #[arg(long, default_value_t = 1000)]
    pub players: usize,
    /// How many of the players sign in to an account made before the measured wave.
    #[arg(long, default_value_t = 0)]
    pub returning: usize,
    /// Logins per second.
    #[arg(long, default_value_t = 100.0)]
    pub rate: f64,
    /// Friends per player: each befriends the next friends/2 players on a ring.
    #[arg(long, default_value_t = 10)]
    pub friends: usize,
    /// Activity changes per second (presence).
    #[arg(long, default_value_t = 100.0)]
    pub presence_rate: f64,
    /// How long the presence changes go on.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    pub presence_seconds: Duration,
    /// Sessions created per second.
    #[arg(long, default_value_t = 5.0)]
    pub session_rate: f64,
    /// Members of a session, leader included (2 to 16).
    #[arg(long, default_value_t = 4)]
    pub session_size: u32,
    /// How long a full session is held before everyone leaves.
    #[arg(long, default_value = "2", value_parser = parse_seconds)]
    pub session_hold: Duration,
    /// How long sessions keep being created.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    pub session_seconds: Duration,
    /// The share of sessions whose leader leaves before its members, handing leadership on
    /// (0 to 1).
    #[arg(long, default_value_t = 0.0)]
    pub leader_leaves_first: f64,
    /// Friend writes per second (requests, accepts, declines, cancels, unfriends), beside the
    /// presence changes.
    #[arg(long, default_value_t = 0.0)]
    pub friend_rate: f64,
    /// Players per second that sign off and come back after 1–10 s, beside the presence changes.
    #[arg(long, default_value_t = 0.0)]
    pub churn_rate: f64,
    /// Blocks per second between players, each undone 1–4 s later, beside the presence
    /// changes; the blocked side probes it (a friend request, the blocker's card).
    #[arg(long, default_value_t = 0.0)]
    pub block_rate: f64,
    /// Card privacy changes per second (public, friends, private), beside the presence changes.
    #[arg(long, default_value_t = 0.0)]
    pub privacy_rate: f64,
    /// Logouts per second, beside the presence changes: each player signs in again and
    /// reconnects, and the refresh token the logout revoked is offered once.
    #[arg(long, default_value_t = 0.0)]
    pub logout_rate: f64,
    /// The share of the players that also open a second device's connection, through another
    /// node, for a few seconds (0 to 1).
    #[arg(long, default_value_t = 0.0)]
    pub second_devices: f64,
    /// The share of the players that, once in the run, read their event socket so slowly
    /// while a friend floods them with activity changes that the cloud's outbound queue fills:
    /// each must be closed with 1013 and come back with a resync (0 to 1).
    #[arg(long, default_value_t = 0.0)]
    pub slow_readers: f64,
    /// Every player calls from a loopback source address of its own, and now and then a
    /// burst from a fresh address goes past the cloud's per-address limits on purpose (every
    /// call past a limit must get 429 with `Retry-After`, recorded as a refusal). The cloud
    /// must run with its real limits (in process: they are kept).
    #[arg(long)]
    pub rate_limits: bool,
    /// With --rate-limits: the calls per address per minute the cloud allows.
    #[arg(long, default_value_t = RateLimits::CONTRACT.calls_per_minute)]
    pub rate_calls_per_minute: u32,
    /// With --rate-limits: the sign-in emails per address and email in 15 minutes the cloud allows.
    #[arg(long, default_value_t = RateLimits::CONTRACT.auth_email_per_15m)]
    pub rate_auth_email: u32,
    /// Gamer-card calls per second.
    #[arg(long, default_value_t = 50.0)]
    pub cards_rate: f64,
    /// How long the gamer-card calls go on.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    pub cards_seconds: Duration,
    /// Accounts per gamer-card call (at most 100), friends first.
    #[arg(long, default_value_t = 20)]
    pub cards_size: usize,
    /// The storm's fault.
    #[arg(long, value_enum, default_value = "drop")]
    pub storm: StormKind,
    /// How long the storm waits for every broken player to be back.
    #[arg(long, default_value = "60", value_parser = parse_seconds)]
    pub storm_timeout: Duration,
    /// How players reconnect.
    #[arg(long, value_enum, default_value = "spec")]
    pub reconnect: ReconnectMode,
    /// Ladder rungs: concurrent players per step, increasing (e.g. 500,1000,2000).
    #[arg(long, value_delimiter = ',')]
    pub ladder: Vec<usize>,
    /// Each rung's warm-up: measured, reported as the ramp, and left out of the steady figures.
    #[arg(long, default_value = "5", value_parser = parse_seconds)]
    pub ladder_warmup: Duration,
    /// Each rung's steady window.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    pub ladder_steady: Duration,
    /// On a rung, each online player makes one call per this interval.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    pub ladder_think: Duration,
    /// The latency budget (p99, ms) the ladder's knee is judged against.
    #[arg(long, default_value_t = 100.0)]
    pub budget_ms: f64,
    /// Operations running at once; past it, scheduled operations are skipped, not queued.
    #[arg(long, default_value_t = 1000)]
    pub max_in_flight: usize,
    /// Threads that play the players: by default one against a cloud given by `--url` (no
    /// wake-ups across threads: less CPU per login, results/bench), and every core
    /// when the cloud runs in this process and shares them. The report's `sched_lag_ms` tells
    /// when one is not enough.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
    /// Keep the cloud's rate limits (in process they are lifted by default).
    #[arg(long)]
    pub default_limits: bool,
    /// In-process cloud nodes; more than one needs PostgreSQL and NATS.
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// PostgreSQL for an in-process cluster (the harness makes a database of its own in it).
    #[arg(long, env = "ANYPLAY_LOAD_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// NATS for an in-process cluster.
    #[arg(long, env = "ANYPLAY_LOAD_NATS_URL")]
    pub nats_url: Option<String>,
    /// External mode: a node's public address (repeat per node).
    #[arg(long)]
    pub url: Vec<String>,
    /// External mode: the cloud's mail-log file, to read sign-in codes.
    #[arg(long)]
    pub mail_log: Option<PathBuf>,
    /// External mode: sign-in codes from a node started with --test-codes, at its operations
    /// listener (https://OPS-ADDR), instead of a mail log.
    #[arg(long)]
    pub codes_from: Option<String>,
    /// The admin token of --codes-from, on the first line of this file.
    #[arg(long)]
    pub admin_token_file: Option<PathBuf>,
    /// External mode: trust this CA (PEM) beside the system's roots, for https:// nodes.
    #[arg(long)]
    pub ca: Option<PathBuf>,
    /// External mode: a node's metrics page (repeat per node, in --url order).
    #[arg(long)]
    pub metrics_url: Vec<String>,
    /// External mode: a node's process id, for its CPU and memory (repeat per node).
    #[arg(long)]
    pub pid: Vec<u32>,
    /// Loopback source addresses for the players' connections, e.g. 127.0.0.2-127.0.0.40.
    #[arg(long)]
    pub source_ips: Option<SourceIps>,
    /// Seed of the players' choices (who acts, with what, their reconnect waits): the same seed
    /// and settings play the same schedule.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Write the JSON report to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Split the players over this many load agents (`anyplay-load agent`) found on `--nats`.
    #[arg(long)]
    pub agents: Option<usize>,
    /// The NATS server the load agents listen on (with `--agents`).
    #[arg(long)]
    pub nats: Option<String>,
    /// With `--agents`: the secret shared with the agents (else ANYPLAY_LOAD_SECRET).
    #[arg(long)]
    pub secret_file: Option<PathBuf>,
    /// With `--agents`: a NATS credentials file (JWT and seed), for a NATS that asks for one.
    #[arg(long)]
    pub nats_creds: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// What `anyplay-load` does besides a run.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Wait on NATS for runs of `anyplay-load --agents N`, and play a share of each.
    Agent(AgentArgs),
    /// One headless game client that rides through a run and exits non-zero naming what it
    /// saw break (a chaos plan's `clients:`).
    Client(ClientArgs),
}

/// The flags of `anyplay-load client`.
#[derive(Debug, Clone, clap::Args)]
pub struct ClientArgs {
    /// The nodes' public addresses, comma-separated (a plan's `{urls}`): it starts on the first
    /// and moves to the next when one goes away.
    #[arg(long, value_delimiter = ',', required = true)]
    pub server: Vec<String>,
    /// Its handle (letters, digits and '_'; a new account signs up with it) and its name.
    #[arg(long)]
    pub name: String,
    /// The address it signs in with [default: NAME@clients.anyplay.test].
    #[arg(long)]
    pub email: Option<String>,
    /// A handle it befriends (repeatable), such as another client's.
    #[arg(long = "friend")]
    pub friends: Vec<String>,
    /// How long it plays before it judges what it saw and exits.
    #[arg(long = "for", default_value = "60s", value_parser = anyplay_cloud::duration::parse)]
    pub duration: Duration,
    /// Longest it may go without a welcomed connection, or with a friend's presence events
    /// behind what the cloud shows, before that counts as a break.
    #[arg(long, default_value = "30s", value_parser = anyplay_cloud::duration::parse)]
    pub back_within: Duration,
    /// Where it writes `client.json`, what it saw.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Sign-in codes from the cloud's mail-log file.
    #[arg(long)]
    pub mail_log: Option<PathBuf>,
    /// Sign-in codes from a node started with --test-codes, at its operations listener.
    #[arg(long, requires = "admin_token_file", conflicts_with = "mail_log")]
    pub codes_from: Option<String>,
    /// The admin token of --codes-from, on the first line of this file.
    #[arg(long)]
    pub admin_token_file: Option<PathBuf>,
    /// Trust this CA (PEM) beside the system's roots, for https:// servers.
    #[arg(long)]
    pub ca: Option<PathBuf>,
}

/// The flags of `anyplay-load agent`.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// The NATS server the coordinators offer work on.
    #[arg(long)]
    pub nats: String,
    /// This agent's name in reports (default: host name and process id).
    #[arg(long)]
    pub name: Option<String>,
    /// Loopback source addresses for this agent's players, e.g. 127.0.0.2-127.0.0.40.
    #[arg(long)]
    pub source_ips: Option<SourceIps>,
    /// A NATS credentials file (JWT and seed), for a NATS server that asks for one.
    #[arg(long)]
    pub nats_creds: Option<PathBuf>,
    /// The secret this agent shares with its coordinators (else ANYPLAY_LOAD_SECRET): every
    /// message between them is sealed with it; without it the agent does not start.
    #[arg(long)]
    pub secret_file: Option<PathBuf>,
    /// A target this agent may play against: an address range (`10.0.0.0/8`) or a host name;
    /// repeatable. An offer of nodes outside them is refused [default: 127.0.0.0/8].
    #[arg(long = "allow-target", default_value = "127.0.0.0/8")]
    pub allow_targets: Vec<AllowedTarget>,
    /// Trust this CA (PEM) beside the system's roots, for https:// nodes.
    #[arg(long)]
    pub ca: Option<PathBuf>,
}

/// What an agent may play against (`--allow-target`): an address range, or a host name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedTarget {
    Range { net: std::net::IpAddr, prefix: u8 },
    Host(String),
}

impl std::str::FromStr for AllowedTarget {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, prefix) = match s.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (s, None),
        };
        match addr.parse::<std::net::IpAddr>() {
            Ok(net) => {
                let bits = if net.is_ipv4() { 32 } else { 128 };
                let prefix = match prefix {
                    None => bits,
                    Some(p) => p
                        .parse::<u8>()
                        .ok()
                        .filter(|p| *p <= bits)
                        .ok_or_else(|| format!("{s:?}: a prefix of 0 to {bits} bits"))?,
                };
                Ok(AllowedTarget::Range { net, prefix })
            }
            Err(_) if prefix.is_none() && !s.is_empty() && !s.contains(char::is_whitespace) => {
                Ok(AllowedTarget::Host(s.to_ascii_lowercase()))
            }
            Err(_) => Err(format!("{s:?} is neither an address range nor a host name")),
        }
    }
}

impl AllowedTarget {
    /// Whether the host of a node's URL (an address, or a name as written) is allowed.
    pub fn allows(&self, host: &url::Host<&str>) -> bool {
        match (self, host) {
            (AllowedTarget::Host(name), url::Host::Domain(d)) => name.eq_ignore_ascii_case(d),
            (AllowedTarget::Range { net, prefix }, url::Host::Ipv4(ip)) => {
                in_range(*net, *prefix, std::net::IpAddr::V4(*ip))
            }
            (AllowedTarget::Range { net, prefix }, url::Host::Ipv6(ip)) => {
                in_range(*net, *prefix, std::net::IpAddr::V6(*ip))
            }
            _ => false,
        }
    }
}

fn in_range(net: std::net::IpAddr, prefix: u8, ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(n) & mask == u32::from(i) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(i)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(n) & mask == u128::from(i) & mask
        }
        _ => false,
    }
}

/// A run spread over load agents (`--agents N --nats URL`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentsSettings {
    pub count: usize,
    pub nats_url: String,
    /// A NATS credentials file, for a NATS that asks for one.
    pub nats_creds: Option<PathBuf>,
    /// Shared with the agents: every message is sealed with it.
    pub secret: crate::seal::Secret,
}

/// The agents `args` ask for, if any, checked against the run's `settings`.
pub fn agents(args: &Args, settings: &Settings) -> Result<Option<AgentsSettings>, SettingsError> {
    let (count, nats_url) = match (args.agents, &args.nats) {
        (None, None) => return Ok(None),
        (None, Some(_)) => return Err(refuse("--nats", "only applies with --agents N")),
        (Some(_), None) => {
            return Err(refuse(
                "--agents",
                "agents are reached over NATS: give --nats nats://HOST:4222",
            ))
        }
        (Some(0), _) => return Err(refuse("--agents", "must be at least 1")),
        (Some(count), Some(url)) => (count, url.clone()),
    };
    if !matches!(settings.mode, Mode::External(_)) {
        return Err(refuse(
            "--agents",
            "agents play external nodes: give --url per node and --mail-log",
        ));
    }
    if settings.runs(Scenario::Ladder) {
        return Err(refuse(
            "--agents",
            "the ladder runs on one machine; leave it out of --scenarios",
        ));
    }
    if settings.source_ips.is_some() {
        return Err(refuse(
            "--source-ips",
            "with --agents, each agent takes its own (anyplay-load agent --source-ips)",
        ));
    }
    if count > settings.players {
        return Err(refuse(
            "--agents",
            format!(
                "{count} agents need at least as many players (--players {})",
                settings.players
            ),
        ));
    }
    let secret = crate::seal::Secret::load(args.secret_file.as_deref())
        .map_err(|e| refuse("--secret-file", e.to_string()))?;
    Ok(Some(AgentsSettings {
        count,
        nats_url,
        nats_creds: args.nats_creds.clone(),
        secret,
    }))
}

/// Where the cloud comes from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Mode {
    /// One node on SQLite inside the harness, with a memory mail sink.
    InProcess { default_limits: bool },
    /// N nodes inside the harness on PostgreSQL and NATS.
    Cluster {
        nodes: usize,
        // Left out of the report: URLs may carry passwords.
        #[serde(skip)]
        database_url: String,
        #[serde(skip)]
        nats_url: String,
        default_limits: bool,
    },
    /// Nodes that run elsewhere on this machine.
    External(External),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct External {
    pub nodes: Vec<ExternalNode>,
    pub codes: Codes,
    /// A private CA trusted beside the system's roots.
    pub ca: Option<PathBuf>,
}

/// Where external mode reads sign-in codes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Codes {
    /// The cloud's mail-log file (`--mail-log`).
    MailLog(PathBuf),
    /// A node's operations listener with its test codes on (`--codes-from`).
    TestCodes {
        ops: String,
        admin_token_file: PathBuf,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExternalNode {
    pub url: String,
    pub metrics_url: Option<String>,
    pub pid: Option<u32>,
}

/// Durations are seconds in the report (and on the wire to load agents).
mod secs {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Duration::try_from_secs_f64(secs).map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PresenceSettings {
    pub rate: f64,
    #[serde(with = "secs")]
    pub duration: Duration,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionSettings {
    pub rate: f64,
    pub size: u32,
    #[serde(with = "secs")]
    pub hold: Duration,
    #[serde(with = "secs")]
    pub duration: Duration,
    /// The share of sessions whose leader leaves first.
    #[serde(default)]
    pub leader_leaves_first: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CardSettings {
    pub rate: f64,
    pub size: usize,
    #[serde(with = "secs")]
    pub duration: Duration,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StormSettings {
    pub kind: StormKind,
    #[serde(with = "secs")]
    pub timeout: Duration,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LadderSettings {
    pub rungs: Vec<usize>,
    #[serde(with = "secs")]
    pub warmup: Duration,
    #[serde(with = "secs")]
    pub steady: Duration,
    #[serde(with = "secs")]
    pub think: Duration,
    pub budget_ms: f64,
}

/// The traffic that provokes what the chaos checks judge ([`crate::scenarios::traffic`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TrafficSettings {
    /// Friend writes per second (0: none).
    pub friend_rate: f64,
    /// Sign-offs per second (0: none).
    pub churn_rate: f64,
    /// Blocks per second (0: none).
    #[serde(default)]
    pub block_rate: f64,
    /// Card privacy changes per second (0: none).
    #[serde(default)]
    pub privacy_rate: f64,
    /// Logouts per second (0: none).
    #[serde(default)]
    pub logout_rate: f64,
    /// The share of players with a second device (0 to 1).
    pub second_devices: f64,
    /// The share of players that read slowly once, flooded by a friend (0 to 1).
    #[serde(default)]
    pub slow_readers: f64,
    /// The cloud's per-address limits, when players call from addresses of their own and
    /// bursts go past the limits (`--rate-limits`).
    #[serde(default)]
    pub rate_limits: Option<RateLimits>,
}

/// The per-address limits of the cloud contract that `--rate-limits` bursts go past.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimits {
    pub calls_per_minute: u32,
    pub auth_email_per_15m: u32,
}

impl RateLimits {
    /// The contract's defaults.
    pub const CONTRACT: RateLimits = RateLimits {
        calls_per_minute: 300,
        auth_email_per_15m: 10,
    };
}

/// A run's settings whose every rule holds: the only form a run takes. Made from flags
/// ([`Settings::from_args`]), from a draft ([`SettingsDraft::validate`], as chaos makes its
/// players' and a coordinator each agent's share), or read from JSON (a load agent's share),
/// which validates it too. Its fields are read through [`std::ops::Deref`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "SettingsDraft", into = "SettingsDraft")]
pub struct Settings(SettingsDraft);

impl std::ops::Deref for Settings {
    type Target = SettingsDraft;

    fn deref(&self) -> &SettingsDraft {
        &self.0
    }
}

impl TryFrom<SettingsDraft> for Settings {
    type Error = SettingsError;

    fn try_from(draft: SettingsDraft) -> Result<Settings, SettingsError> {
        draft.validate()
    }
}

impl From<Settings> for SettingsDraft {
    fn from(settings: Settings) -> SettingsDraft {
        settings.0
    }
}

impl Settings {
    /// A copy to change; it runs again only once validated.
    pub fn draft(&self) -> SettingsDraft {
        self.0.clone()
    }
}

/// A run's settings as written, before their rules are checked ([`SettingsDraft::validate`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SettingsDraft {
    /// What runs after the login wave and the friend graph, in order, the storm last.
    pub scenarios: Vec<Scenario>,
    pub players: usize,
    pub returning: usize,
    /// Logins per second.
    pub rate: f64,
    pub friends: usize,
    pub reconnect: ReconnectMode,
    pub presence: PresenceSettings,
    pub sessions: SessionSettings,
    pub cards: CardSettings,
    pub traffic: TrafficSettings,
    pub storm: StormSettings,
    pub ladder: LadderSettings,
    pub max_in_flight: usize,
    /// Seed of every choice that decides what a player does or when ([`crate::players::choices`]).
    pub seed: u64,
    pub mode: Mode,
    /// Each host gives its own (a load agent's `--source-ips`), so they never travel.
    #[serde(serialize_with = "display", skip_deserializing)]
    pub source_ips: Option<SourceIps>,
    pub json: Option<PathBuf>,
    /// The run's number of this run's first player: 0, unless this run is one load agent's
    /// share of a larger one ([`crate::agents`]), whose players keep their number in the whole.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub first_player: usize,
    /// The tag in the players' emails and handles (`TAG.N@load.anyplay.test`), so runs against
    /// one cloud never collide: drawn for each run when `None`. A load agent plays with its
    /// coordinator's, which answers sign-in codes for that tag's players only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn display<S: Serializer>(ips: &Option<SourceIps>, s: S) -> Result<S::Ok, S::Error> {
    match ips {
        Some(ips) => s.collect_str(ips),
        None => s.serialize_none(),
    }
}

/// Why settings were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag}: {reason}")]
pub struct SettingsError {
    pub flag: &'static str,
    pub reason: String,
}

fn refuse(flag: &'static str, reason: impl Into<String>) -> SettingsError {
    SettingsError {
        flag,
        reason: reason.into(),
    }
}

/// Largest `ids` list the contract allows in one gamer-card call.
pub const MAX_CARDS: usize = 100;

/// The slowest rate of any flag: one every 11.6 days (slower still is no rate a run can keep,
/// and its gaps would overflow a schedule).
const MIN_RATE: f64 = 1e-6;
/// The fastest: far past what one machine starts, and still a schedule of whole microseconds.
const MAX_RATE: f64 = 1_000_000.0;
/// The longest login wave (`--players` / `--rate`).
const MAX_LOGIN_WAVE: Duration = Duration::from_secs(24 * 3600);

impl Default for Settings {
    /// The flags' defaults.
    fn default() -> Self {
        Settings::from_args(Args::parse_from(["anyplay-load"]))
            .expect("the default flags are valid")
    }
}

impl Settings {
    pub fn from_args(args: Args) -> Result<Settings, SettingsError> {
        let mode = mode(&args)?;
        let mut scenarios = Vec::new();
        for s in args.scenarios {
            // The login wave and the friend graph always run first.
            if !matches!(s, Scenario::Login | Scenario::Friends) && !scenarios.contains(&s) {
                scenarios.push(s);
            }
        }
        // The storm goes last: it may stop a node the others need.
        scenarios.sort_by_key(|s| *s == Scenario::Storm);
        SettingsDraft {
            scenarios,
            players: args.players,
            returning: args.returning,
            rate: args.rate,
            friends: args.friends,
            reconnect: args.reconnect,
            presence: PresenceSettings {
                rate: args.presence_rate,
                duration: args.presence_seconds,
            },
            sessions: SessionSettings {
                rate: args.session_rate,
                size: args.session_size,
                hold: args.session_hold,
                duration: args.session_seconds,
                leader_leaves_first: args.leader_leaves_first,
            },
            cards: CardSettings {
                rate: args.cards_rate,
                size: args.cards_size,
                duration: args.cards_seconds,
            },
            traffic: TrafficSettings {
                friend_rate: args.friend_rate,
                churn_rate: args.churn_rate,
                block_rate: args.block_rate,
                privacy_rate: args.privacy_rate,
                logout_rate: args.logout_rate,
                second_devices: args.second_devices,
                slow_readers: args.slow_readers,
                rate_limits: args.rate_limits.then_some(RateLimits {
                    calls_per_minute: args.rate_calls_per_minute,
                    auth_email_per_15m: args.rate_auth_email,
                }),
            },
            storm: StormSettings {
                kind: args.storm,
                timeout: args.storm_timeout,
            },
            ladder: LadderSettings {
                rungs: args.ladder,
                warmup: args.ladder_warmup,
                steady: args.ladder_steady,
                think: args.ladder_think,
                budget_ms: args.budget_ms,
            },
            max_in_flight: args.max_in_flight,
            seed: args.seed,
            mode,
            source_ips: args.source_ips,
            json: args.json,
            first_player: 0,
            tag: None,
        }
        .validate()
    }
}

impl SettingsDraft {
    pub fn runs(&self, scenario: Scenario) -> bool {
        self.scenarios.contains(&scenario)
    }

    pub fn node_count(&self) -> usize {
        match &self.mode {
            Mode::InProcess { .. } => 1,
            Mode::Cluster { nodes, .. } => *nodes,
            Mode::External(external) => external.nodes.len(),
        }
    }

    /// Players the run may sign in: the wave, and the ladder's rungs above it.
    pub fn total_players(&self) -> usize {
        let top = if self.runs(Scenario::Ladder) {
            self.ladder.rungs.last().copied()
        } else {
            None
        };
        top.unwrap_or(0).max(self.players)
    }

    /// The settings, once every rule holds.
    pub fn validate(self) -> Result<Settings, SettingsError> {
        self.check()?;
        Ok(Settings(self))
    }

    fn check(&self) -> Result<(), SettingsError> {
        let rate = |flag, rate: f64| {
            if (MIN_RATE..=MAX_RATE).contains(&rate) {
                Ok(())
            } else {
                Err(refuse(
                    flag,
                    format!("must be a rate from {MIN_RATE} to {MAX_RATE} per second, got {rate}"),
                ))
            }
        };
        let window = |flag, d: Duration| {
            if d.is_zero() {
                Err(refuse(flag, "must be longer than 0 s"))
            } else {
                Ok(())
            }
        };
        if self.players == 0 {
            return Err(refuse("--players", "a run needs at least 1 player"));
        }
        if self
            .first_player
            .checked_add(self.total_players())
            .is_none()
        {
            return Err(refuse("--players", "more players than can be numbered"));
        }
        if let Some(tag) = &self.tag {
            let plain = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
            if tag.is_empty() || tag.len() > 16 || !tag.chars().all(plain) {
                return Err(refuse(
                    "--players",
                    format!("a players' tag of 1 to 16 of [a-z0-9], not {tag:?}"),
                ));
            }
        }
        if self.returning > self.players {
            return Err(refuse(
                "--returning",
                format!(
                    "{} is more than the {} players",
                    self.returning, self.players
                ),
            ));
        }
        rate("--rate", self.rate)?;
        let wave = Duration::from_secs_f64(self.players as f64 / self.rate);
        if wave > MAX_LOGIN_WAVE {
            return Err(refuse(
                "--rate",
                format!(
                    "{} players at {}/s would take {} to sign in; a login wave may take a day",
                    self.players,
                    self.rate,
                    anyplay_cloud::duration::format(wave)
                ),
            ));
        }
        let optional_rate = |flag, rate: f64| {
            if rate == 0.0 || (MIN_RATE..=MAX_RATE).contains(&rate) {
                Ok(())
            } else {
                Err(refuse(
                    flag,
                    format!(
                        "must be 0 or a rate from {MIN_RATE} to {MAX_RATE} per second, got {rate}"
                    ),
                ))
            }
        };
        optional_rate("--friend-rate", self.traffic.friend_rate)?;
        optional_rate("--churn-rate", self.traffic.churn_rate)?;
        optional_rate("--block-rate", self.traffic.block_rate)?;
        optional_rate("--privacy-rate", self.traffic.privacy_rate)?;
        optional_rate("--logout-rate", self.traffic.logout_rate)?;
        let share = |flag, share: f64| {
            if (0.0..=1.0).contains(&share) {
                Ok(())
            } else {
                Err(refuse(
                    flag,
                    format!("must be a share from 0 to 1, got {share}"),
                ))
            }
        };
        share("--leader-leaves-first", self.sessions.leader_leaves_first)?;
        share("--second-devices", self.traffic.second_devices)?;
        share("--slow-readers", self.traffic.slow_readers)?;
        if let Some(limits) = self.traffic.rate_limits {
            if self.source_ips.is_some() {
                return Err(refuse(
                    "--rate-limits",
                    "gives every player a source address of its own; leave out --source-ips",
                ));
            }
            if limits.calls_per_minute == 0 || limits.auth_email_per_15m == 0 {
                return Err(refuse(
                    "--rate-limits",
                    "--rate-calls-per-minute and --rate-auth-email must be at least 1",
                ));
            }
            if self.total_players() > crate::api::net::PER_PLAYER_ADDRESSES {
                return Err(refuse(
                    "--rate-limits",
                    format!(
                        "gives each player an address of its own: at most {} players",
                        crate::api::net::PER_PLAYER_ADDRESSES
                    ),
                ));
            }
        }
        if !(1..=tokio::sync::Semaphore::MAX_PERMITS).contains(&self.max_in_flight) {
            return Err(refuse(
                "--max-in-flight",
                format!("must be from 1 to {}", tokio::sync::Semaphore::MAX_PERMITS),
            ));
        }
        if self.friends % 2 == 1 {
            return Err(refuse(
                "--friends",
                "must be even: each player befriends the next friends/2 on a ring",
            ));
        }
        if self.friends >= self.players && self.friends > 0 {
            return Err(refuse(
                "--friends",
                format!(
                    "{} friends need more than {} players",
                    self.friends, self.players
                ),
            ));
        }
        if self.runs(Scenario::Presence) {
            rate("--presence-rate", self.presence.rate)?;
            window("--presence-seconds", self.presence.duration)?;
        }
        if self.runs(Scenario::Sessions) {
            rate("--session-rate", self.sessions.rate)?;
            window("--session-seconds", self.sessions.duration)?;
            if !(2..=16).contains(&self.sessions.size) {
                return Err(refuse(
                    "--session-size",
                    format!("must be 2 to 16, got {}", self.sessions.size),
                ));
            }
            if (self.sessions.size as usize) > self.friends + 1 {
                return Err(refuse(
                    "--session-size",
                    format!(
                        "{} members need at least {} friends per player (--friends {})",
                        self.sessions.size,
                        self.sessions.size - 1,
                        self.friends
                    ),
                ));
            }
        }
        if self.runs(Scenario::Cards) {
            rate("--cards-rate", self.cards.rate)?;
            window("--cards-seconds", self.cards.duration)?;
            if self.cards.size == 0 || self.cards.size > MAX_CARDS {
                return Err(refuse(
                    "--cards-size",
                    format!("must be 1 to {MAX_CARDS}, got {}", self.cards.size),
                ));
            }
        }
        if self.runs(Scenario::Storm) {
            window("--storm-timeout", self.storm.timeout)?;
            let kind = self.storm.kind;
            if kind.needs_cluster() && self.node_count() < 2 {
                return Err(refuse(
                    "--storm",
                    format!(
                        "{} needs a cluster of at least 2 nodes to fail over to; this run has {}",
                        kind.name(),
                        self.node_count()
                    ),
                ));
            }
            if kind.needs_cluster() && matches!(self.mode, Mode::External(_)) {
                return Err(refuse(
                    "--storm",
                    format!("{} needs control over the nodes, which external mode (--url) does not have; \
                        run it in process (--nodes) or with anyplay-chaos", kind.name()),
                ));
            }
        }
        if self.runs(Scenario::Ladder) {
            let rungs = &self.ladder.rungs;
            if rungs.is_empty() {
                return Err(refuse(
                    "--ladder",
                    "the ladder scenario needs rungs, e.g. --ladder 500,1000,2000",
                ));
            }
            if rungs.windows(2).any(|w| w[0] >= w[1]) {
                return Err(refuse("--ladder", "rungs must increase"));
            }
            if rungs[0] < self.players {
                return Err(refuse(
                    "--ladder",
                    format!("the first rung ({}) is below the {} players already online after the login wave",
                        rungs[0], self.players),
                ));
            }
            window("--ladder-warmup", self.ladder.warmup)?;
            window("--ladder-steady", self.ladder.steady)?;
            window("--ladder-think", self.ladder.think)?;
            rate("--budget-ms", self.ladder.budget_ms)?;
        }
        Ok(())
    }
}

fn mode(args: &Args) -> Result<Mode, SettingsError> {
    if args.url.is_empty() {
        let external_only = [
            ("--mail-log", args.mail_log.is_some()),
            ("--codes-from", args.codes_from.is_some()),
            ("--admin-token-file", args.admin_token_file.is_some()),
            ("--ca", args.ca.is_some()),
            ("--metrics-url", !args.metrics_url.is_empty()),
            ("--pid", !args.pid.is_empty()),
        ];
        if let Some((flag, _)) = external_only.iter().find(|(_, given)| *given) {
            return Err(refuse(flag, "only applies to external nodes (--url)"));
        }
        return match args.nodes {
            0 => Err(refuse("--nodes", "a run needs at least 1 node")),
            1 => Ok(Mode::InProcess {
                default_limits: args.default_limits || args.rate_limits,
            }),
            nodes => match (&args.database_url, &args.nats_url) {
                (Some(database_url), Some(nats_url)) => Ok(Mode::Cluster {
                    nodes,
                    database_url: database_url.clone(),
                    nats_url: nats_url.clone(),
                    default_limits: args.default_limits || args.rate_limits,
                }),
                _ => Err(refuse(
                    "--nodes",
                    format!("{nodes} nodes need --database-url postgres://... and --nats-url nats://... \
                        (or ANYPLAY_LOAD_DATABASE_URL and ANYPLAY_LOAD_NATS_URL)"),
                )),
            },
        };
    }
    if args.nodes != 1 {
        return Err(refuse(
            "--nodes",
            "external mode (--url) gives one --url per node instead",
        ));
    }
    if args.default_limits {
        return Err(refuse(
            "--default-limits",
            "external nodes keep whatever limits they were started with",
        ));
    }
    let codes =
        match (&args.mail_log, &args.codes_from, &args.admin_token_file) {
            (Some(_), Some(_), _) => {
                return Err(refuse(
                    "--codes-from",
                    "give --mail-log or --codes-from, not both",
                ))
            }
            (Some(path), None, None) => Codes::MailLog(path.clone()),
            (Some(_), None, Some(_)) => {
                return Err(refuse("--admin-token-file", "only applies to --codes-from"))
            }
            (None, Some(ops), Some(token)) => {
                web_url("--codes-from", ops)?;
                Codes::TestCodes {
                    ops: ops.clone(),
                    admin_token_file: token.clone(),
                }
            }
            (None, Some(_), None) => {
                return Err(refuse(
                    "--codes-from",
                    "needs --admin-token-file (the node's --admin-token)",
                ))
            }
            (None, None, _) => return Err(refuse(
                "--mail-log",
                "external mode (--url) needs the cloud's mail-log file, or --codes-from a node \
                 started with --test-codes, to read sign-in codes",
            )),
        };
    for (flag, given) in [
        ("--metrics-url", args.metrics_url.len()),
        ("--pid", args.pid.len()),
    ] {
        if given != 0 && given != args.url.len() {
            return Err(refuse(
                flag,
                format!(
                    "give one per --url ({}), or none; got {given}",
                    args.url.len()
                ),
            ));
        }
    }
    let nodes = args
        .url
        .iter()
        .enumerate()
        .map(|(i, url)| {
            web_url("--url", url)?;
            Ok(ExternalNode {
                url: url.clone(),
                metrics_url: args.metrics_url.get(i).cloned(),
                pid: args.pid.get(i).copied(),
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Mode::External(External {
        nodes,
        codes,
        ca: args.ca.clone(),
    }))
}

/// An `http://` or `https://` URL.
fn web_url(flag: &'static str, url: &str) -> Result<(), SettingsError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| refuse(flag, format!("{url:?}: {e}")))?;
    match parsed.scheme() {
        "http" | "https" => Ok(()),
        _ => Err(refuse(
            flag,
            format!("{url:?}: only http:// and https:// are supported"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(flags: &[&str]) -> Result<Settings, SettingsError> {
        let mut argv = vec!["anyplay-load"];
        argv.extend_from_slice(flags);
        Settings::from_args(Args::try_parse_from(argv).expect("flags parse"))
    }

    fn refused(flags: &[&str]) -> SettingsError {
        settings(flags).expect_err("these settings must be refused")
    }

    #[test]
    fn defaults_are_valid_and_the_storm_goes_last() {
        let s = settings(&["--scenarios", "storm,presence,login,cards,presence"]).expect("valid");
        assert_eq!(
            s.scenarios,
            [Scenario::Presence, Scenario::Cards, Scenario::Storm]
        );
        assert_eq!(
            Settings::default().scenarios,
            [Scenario::Presence, Scenario::Sessions, Scenario::Storm]
        );
    }

    /// An outside test crashed the harness with `--rate 1e-300` and `--max-in-flight
    /// 18446744073709551615`, and `--rate 1e-7` ran with no end.
    #[test]
    fn rates_and_in_flight_past_what_can_run_are_refused() {
        for rate in ["1e-300", "1e-7", "1e300", "inf", "NaN"] {
            assert_eq!(refused(&["--rate", rate]).flag, "--rate", "{rate}");
            assert_eq!(
                refused(&["--presence-rate", rate]).flag,
                "--presence-rate",
                "{rate}"
            );
            assert_eq!(refused(&["--friend-rate", rate]).flag, "--friend-rate");
        }
        // 1,000 players at one every 1,000 s: 11 days.
        let wave = refused(&["--players", "1000", "--rate", "0.001"]);
        assert_eq!(wave.flag, "--rate");
        assert!(wave.reason.contains("a day"), "{}", wave.reason);
        let many = u64::MAX.to_string();
        assert_eq!(refused(&["--max-in-flight", &many]).flag, "--max-in-flight");
    }

    #[test]
    fn zero_players_and_zero_rates_are_refused() {
        assert_eq!(refused(&["--players", "0"]).flag, "--players");
        assert_eq!(refused(&["--rate", "0"]).flag, "--rate");
        assert_eq!(refused(&["--presence-rate", "0"]).flag, "--presence-rate");
        assert_eq!(refused(&["--session-rate", "0"]).flag, "--session-rate");
        assert_eq!(
            refused(&["--scenarios", "cards", "--cards-rate", "0"]).flag,
            "--cards-rate"
        );
        // A rate of 0 is fine for a scenario that does not run.
        settings(&["--scenarios", "presence", "--cards-rate", "0"]).expect("cards do not run");
    }

    #[test]
    fn more_than_a_hundred_cards_are_refused() {
        let e = refused(&["--scenarios", "cards", "--cards-size", "101"]);
        assert_eq!(e.flag, "--cards-size");
        settings(&["--scenarios", "cards", "--cards-size", "100"]).expect("100 is the limit");
    }

    #[test]
    fn a_storm_that_needs_a_cluster_is_refused_on_one_node() {
        let e = refused(&["--storm", "kill-node"]);
        assert_eq!(e.flag, "--storm");
        assert!(e.reason.contains("cluster"), "{e}");
        let e = refused(&[
            "--storm",
            "stop-node",
            "--url",
            "http://127.0.0.1:1",
            "--url",
            "http://127.0.0.1:2",
            "--mail-log",
            "m",
        ]);
        assert!(e.reason.contains("external"), "{e}");
        let s = settings(&[
            "--storm",
            "stop-node",
            "--nodes",
            "2",
            "--database-url",
            "postgres://x",
            "--nats-url",
            "nats://y",
        ])
        .expect("a cluster can stop a node");
        assert_eq!(s.node_count(), 2);
    }

    #[test]
    fn modes_are_told_apart_and_their_flags_checked() {
        assert!(matches!(
            settings(&[]).expect("valid").mode,
            Mode::InProcess { .. }
        ));
        assert_eq!(refused(&["--url", "http://127.0.0.1:1"]).flag, "--mail-log");
        assert_eq!(refused(&["--mail-log", "m"]).flag, "--mail-log");
        assert_eq!(
            refused(&["--nodes", "2", "--nats-url", "nats://y"]).flag,
            "--nodes"
        );
        let e = refused(&[
            "--url",
            "http://127.0.0.1:1",
            "--url",
            "http://127.0.0.1:2",
            "--mail-log",
            "m",
            "--pid",
            "1",
        ]);
        assert_eq!(e.flag, "--pid");
        let s = settings(&[
            "--url",
            "http://127.0.0.1:1",
            "--mail-log",
            "m",
            "--metrics-url",
            "http://127.0.0.1:9/metrics",
        ])
        .expect("external");
        assert!(matches!(&s.mode, Mode::External(e) if e.nodes[0].metrics_url.is_some()));
    }

    /// A deployed cloud: `https://` nodes, codes from a node's test codes with its token, or
    /// from a mail log, never both.
    #[test]
    fn a_deployed_cloud_takes_https_and_test_codes() {
        let node = ["--url", "https://play.example:443"];
        let with = |more: &[&str]| settings(&[&node[..], more].concat());
        let s = with(&[
            "--codes-from",
            "https://ops.example",
            "--admin-token-file",
            "t",
        ])
        .expect("https and test codes");
        assert!(matches!(&s.mode, Mode::External(e) if matches!(e.codes, Codes::TestCodes { .. })));
        let e = with(&["--codes-from", "https://ops.example"]).expect_err("no token file");
        assert_eq!(e.flag, "--codes-from");
        let e = with(&[
            "--codes-from",
            "https://o",
            "--admin-token-file",
            "t",
            "--mail-log",
            "m",
        ])
        .expect_err("two code sources");
        assert_eq!(e.flag, "--codes-from");
        let e = with(&["--mail-log", "m", "--admin-token-file", "t"]).expect_err("a stray token");
        assert_eq!(e.flag, "--admin-token-file");
        let e = with(&["--codes-from", "ftp://o", "--admin-token-file", "t"]).expect_err("ftp");
        assert_eq!(e.flag, "--codes-from");
        assert_eq!(
            refused(&["--ca", "ca.pem"]).flag,
            "--ca",
            "in process, no CA"
        );
        let e = refused(&["--url", "ws://127.0.0.1:1", "--mail-log", "m"]);
        assert_eq!(e.flag, "--url");
    }

    #[test]
    fn friends_sessions_and_ladder_rules() {
        assert_eq!(refused(&["--friends", "3"]).flag, "--friends");
        assert_eq!(
            refused(&["--players", "10", "--friends", "10"]).flag,
            "--friends"
        );
        assert_eq!(refused(&["--session-size", "17"]).flag, "--session-size");
        assert_eq!(
            refused(&["--friends", "2", "--session-size", "4"]).flag,
            "--session-size"
        );
        assert_eq!(refused(&["--scenarios", "ladder"]).flag, "--ladder");
        assert_eq!(
            refused(&["--scenarios", "ladder", "--ladder", "2000,1000"]).flag,
            "--ladder"
        );
        assert_eq!(
            refused(&["--scenarios", "ladder", "--ladder", "500"]).flag,
            "--ladder"
        );
        let s =
            settings(&["--scenarios", "ladder", "--ladder", "1000,3000"]).expect("valid ladder");
        assert_eq!(s.total_players(), 3000);
    }

    #[test]
    fn agents_need_nats_external_nodes_and_no_ladder() {
        let spread = |flags: &[&str]| {
            let mut argv = vec!["anyplay-load"];
            argv.extend_from_slice(flags);
            let args = Args::try_parse_from(argv).expect("flags parse");
            let settings = Settings::from_args(args.clone()).expect("valid settings");
            agents(&args, &settings)
        };
        let external = ["--url", "http://127.0.0.1:1", "--mail-log", "m"];
        let with = |more: &[&'static str]| [&external[..], more].concat();
        assert_eq!(spread(&external), Ok(None));
        let refused = |flags: &[&str]| spread(flags).expect_err("refused").flag;
        assert_eq!(
            refused(&with(&["--agents", "0", "--nats", "nats://x"])),
            "--agents"
        );
        assert_eq!(refused(&with(&["--agents", "3"])), "--agents");
        assert_eq!(refused(&with(&["--nats", "nats://x"])), "--nats");
        assert_eq!(
            refused(&["--agents", "3", "--nats", "nats://x"]),
            "--agents"
        );
        let e = spread(&with(&[
            "--agents",
            "3",
            "--nats",
            "nats://x",
            "--scenarios",
            "ladder",
            "--ladder",
            "1000",
        ]));
        assert_eq!(e.expect_err("refused").flag, "--agents");
        let secret = std::env::temp_dir().join(format!("anyplay-secret-{}", std::process::id()));
        std::fs::write(&secret, "sixteen bytes or more\n").expect("a secret file");
        let secret_flag: &'static str = secret.display().to_string().leak();
        assert_eq!(
            spread(&with(&[
                "--agents",
                "3",
                "--nats",
                "nats://x",
                "--secret-file",
                secret_flag
            ])),
            Ok(Some(AgentsSettings {
                count: 3,
                nats_url: "nats://x".into(),
                nats_creds: None,
                secret: crate::seal::Secret::new(b"sixteen bytes or more".to_vec())
                    .expect("a secret"),
            }))
        );
        std::fs::write(&secret, "short").expect("a secret file");
        let short = spread(&with(&[
            "--agents",
            "3",
            "--nats",
            "nats://x",
            "--secret-file",
            secret_flag,
        ]));
        assert_eq!(short.expect_err("refused").flag, "--secret-file");
        let _ = std::fs::remove_file(&secret);
        // An agent's allowed targets: ranges and names.
        let allowed: AllowedTarget = "10.0.0.0/8".parse().expect("a range");
        assert!(allowed.allows(&url::Host::Ipv4("10.9.8.7".parse().unwrap())));
        assert!(!allowed.allows(&url::Host::Ipv4("11.0.0.1".parse().unwrap())));
        assert!(!allowed.allows(&url::Host::Domain("10.0.0.1.example")));
        let named: AllowedTarget = "Game.Example".parse().expect("a name");
        assert!(named.allows(&url::Host::Domain("game.example")));
        assert!("10.0.0.0/33".parse::<AllowedTarget>().is_err());
        // The agent's own flags are a subcommand's.
        let args = Args::try_parse_from([
            "anyplay-load",
            "agent",
            "--nats",
            "nats://x",
            "--name",
            "a1",
        ])
        .expect("the agent's flags parse");
        assert!(matches!(args.command, Some(Command::Agent(a)) if a.name.as_deref() == Some("a1")));
    }

    #[test]
    fn duration_flags_take_seconds_or_a_unit() {
        let s = settings(&[]).expect("defaults");
        assert_eq!(s.presence.duration, Duration::from_secs(10));
        assert_eq!(s.storm.timeout, Duration::from_secs(60));
        let s = settings(&["--presence-seconds", "2.5", "--storm-timeout", "2m"]).expect("valid");
        assert_eq!(s.presence.duration, Duration::from_millis(2500));
        assert_eq!(s.storm.timeout, Duration::from_secs(120));
        for bad in ["-1", "soon", "5 s"] {
            let argv = ["anyplay-load", "--presence-seconds", bad];
            assert!(Args::try_parse_from(argv).is_err(), "{bad:?} was accepted");
        }
    }
}
