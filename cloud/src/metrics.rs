//! The node's Prometheus metrics. One registry per node (not a global), so that
//! several nodes inside one process (the load harness) keep their own figures.

use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteOnly {
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CloseLabels {
    pub code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabels {
    pub step: &'static str,
}

/// Times the steps from an event socket's upgrade to its welcome, each apart and all together
/// (`welcome`), so a reconnect storm shows which step the cluster spends its time in.
pub struct WelcomeClock<'a> {
    steps: &'a Family<StepLabels, Histogram>,
    started: Instant,
    lap: Instant,
}

impl<'a> WelcomeClock<'a> {
    pub fn start(steps: &'a Family<StepLabels, Histogram>) -> Self {
        let now = Instant::now();
        WelcomeClock {
            steps,
            started: now,
            lap: now,
        }
    }

    /// The step that ends now: `turn`, `register`, `replace` or `announce`.
    pub fn step(&mut self, step: &'static str) {
        let now = Instant::now();
        self.observe(step, now - self.lap);
        self.lap = now;
    }

    /// The welcome is going out: the whole time since the upgrade.
    pub fn welcomed(self) {
        self.observe("welcome", self.started.elapsed());
    }

    fn observe(&self, step: &'static str, took: Duration) {
        self.steps
            .get_or_create(&StepLabels { step })
            .observe(took.as_secs_f64());
    }
}

/// Figures about the store's connections; shared with the store, which fills them.
#[derive(Clone)]
pub struct PoolMetrics {
    pub size: Gauge,
    pub busy: Gauge,
    pub waiting: Gauge,
    pub acquire_seconds: Histogram,
}

/// Holds a gauge up by one while alive, so a future dropped half-way (its
/// client went away) still takes itself off.
pub struct Held(Gauge);

impl Held {
    pub fn new(gauge: &Gauge) -> Held {
        gauge.inc();
        Held(gauge.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Figures about a listener's TCP connections.
#[derive(Clone, Default)]
pub struct ConnectionMetrics {
    pub open: Gauge,
    /// Closed at once because the listener held its maximum.
    pub refused: Counter,
    /// Closed at once because their source address held its maximum.
    pub refused_per_ip: Counter,
}

/// Figures about the bus between nodes.
#[derive(Clone, Default)]
pub struct BusMetrics {
    pub messages_in: Counter,
    pub messages_out: Counter,
    pub reconnects: Counter,
    /// Deliveries waiting for the router (bounded by the bus queue).
    pub queued: Gauge,
    /// Deliveries for other nodes dropped because the queue was full.
    pub shed: Counter,
}

pub struct Metrics {
    registry: Registry,
    pub http_requests: Family<RouteLabels, Counter>,
    pub http_seconds: Family<RouteOnly, Histogram>,
    pub connections_open: Gauge,
    pub connections_closed: Family<CloseLabels, Counter>,
    pub welcome_steps: Family<StepLabels, Histogram>,
    pub welcomes_shed: Counter,
    pub events_sent: Counter,
    pub presence_fanout: Counter,
    pub slow_consumers: Counter,
    pub draining: Gauge,
    pub http_connections: ConnectionMetrics,
    pub pool: PoolMetrics,
    pub bus: BusMetrics,
}

fn latency_buckets() -> impl Iterator<Item = f64> {
    // 0.1 ms .. ~13 s
    exponential_buckets(0.0001, 2.0, 18)
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("anyplay");
        let http_requests = Family::<RouteLabels, Counter>::default();
        let http_seconds = Family::<RouteOnly, Histogram>::new_with_constructor(|| {
            Histogram::new(latency_buckets())
        });
        let pool = PoolMetrics {
            size: Gauge::default(),
            busy: Gauge::default(),
            waiting: Gauge::default(),
            acquire_seconds: Histogram::new(latency_buckets()),
        };
        let m = Metrics {
            http_requests,
            http_seconds,
            connections_open: Gauge::default(),
            connections_closed: Family::default(),
            welcome_steps: Family::new_with_constructor(|| Histogram::new(latency_buckets())),
            welcomes_shed: Counter::default(),
            events_sent: Counter::default(),
            presence_fanout: Counter::default(),
            slow_consumers: Counter::default(),
            draining: Gauge::default(),
            http_connections: ConnectionMetrics::default(),
            pool,
            bus: BusMetrics::default(),
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "http_requests",
            "HTTP requests by route and status",
            m.http_requests.clone(),
        );
        r.register(
            "http_handler_seconds",
            "Handler time by route",
            m.http_seconds.clone(),
        );
        r.register(
            "event_connections_open",
            "Open event WebSockets",
            m.connections_open.clone(),
        );
        r.register(
            "event_connections_closed",
            "Event WebSockets closed by the server, by close code",
            m.connections_closed.clone(),
        );
        r.register(
            "welcome_step_seconds",
            "From an event socket's upgrade to its welcome, by step: turn (other sockets of the account first), register (on this node, then the connection's record with its token checked), replace (the old node's close), announce (friends told), welcome (all of it)",
            m.welcome_steps.clone(),
        );
        r.register(
            "welcomes_shed",
            "Event sockets given up before their welcome because the client had gone (closed while waiting for its turn or its record)",
            m.welcomes_shed.clone(),
        );
        r.register(
            "events_sent",
            "Events written to WebSockets",
            m.events_sent.clone(),
        );
        r.register(
            "presence_fanout",
            "Presence events addressed to friends",
            m.presence_fanout.clone(),
        );
        r.register(
            "slow_consumers",
            "Connections closed as slow consumers: outbound queue full (1013), or a write that timed out (dropped)",
            m.slow_consumers.clone(),
        );
        r.register("draining", "1 while the node drains", m.draining.clone());
        r.register(
            "http_connections_open",
            "TCP connections open on the public listener, event sockets included",
            m.http_connections.open.clone(),
        );
        r.register(
            "http_connections_refused",
            "Connections closed at once because the public listener held its maximum",
            m.http_connections.refused.clone(),
        );
        r.register(
            "http_connections_refused_per_ip",
            "Connections closed at once because their source address (an IPv6 /64) held its maximum",
            m.http_connections.refused_per_ip.clone(),
        );
        r.register(
            "store_pool_size",
            "Store connections configured",
            m.pool.size.clone(),
        );
        r.register(
            "store_pool_busy",
            "Store connections in use",
            m.pool.busy.clone(),
        );
        r.register(
            "store_pool_waiting",
            "Callers waiting for a store write connection",
            m.pool.waiting.clone(),
        );
        r.register(
            "store_acquire_seconds",
            "Time to get a store write connection",
            m.pool.acquire_seconds.clone(),
        );
        r.register(
            "nats_messages_in",
            "Messages received from NATS",
            m.bus.messages_in.clone(),
        );
        r.register(
            "nats_messages_out",
            "Messages published to NATS",
            m.bus.messages_out.clone(),
        );
        r.register(
            "nats_reconnects",
            "Reconnections to NATS",
            m.bus.reconnects.clone(),
        );
        r.register(
            "nats_queued",
            "Deliveries waiting to be routed to other nodes",
            m.bus.queued.clone(),
        );
        r.register(
            "nats_shed",
            "Deliveries to other nodes dropped because the bus queue was full",
            m.bus.shed.clone(),
        );
        Metrics { registry, ..m }
    }
}

impl Metrics {
    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
