//! The timeline's actions, one family to a file: [`lifecycle`] (kill, stop, start, restart,
//! rolling, upgrade, pause), [`drop`], [`link_faults`] and [`service_faults`]. Each file reads
//! its actions from a plan entry (refusing what cannot run with the entry's line and key),
//! writes them back, draws their random targets, says what they hold busy and expands them
//! into the runner's operations. [`SPECS`] is the one table of their names, what each aims at
//! and the parameters it takes: a new action is a row there, its variant of `Action` and
//! `ActionKind`, its family's file, and the backend that performs it.

mod drop;
mod lifecycle;
mod link_faults;
mod service_faults;

use std::time::Duration;

use serde_yaml::{Mapping, Value};

use super::raw::{KeyPath, RawEntry};
use super::timeline::{Hold, Walk};
use super::validate::Cx;
use super::{Action, ActionKind, PlanError, Target, TimedAct, Toxicity};
use anyplay_cloud::duration;

/// One row of [`SPECS`].
pub(crate) struct Spec {
    pub(crate) kind: ActionKind,
    /// The action's key, as plans, events and reports spell it.
    pub(crate) name: &'static str,
    pub(crate) aim: Aim,
    /// The keys the entry may hold beside `at` and the action's own.
    pub(crate) parameters: &'static [&'static str],
    read: fn(&Reader<'_>) -> Result<Action, PlanError>,
}

/// What an action's key holds.
pub(crate) enum Aim {
    /// One target among these (`Target::Node(1)` stands for every `node-N`).
    Target(&'static [Target]),
    /// A pair: `[a, b]`.
    Link,
}

/// What a process action may aim at: the cloud's nodes and the services they need.
const PROCESSES: &[Target] = &[
    Target::Node(1),
    Target::Nodes,
    Target::RandomNode,
    Target::Postgres,
    Target::Nats,
];

/// Parameters of a fault on a link (through the fault proxy).
macro_rules! on_a_link {
    ($($own:literal),*) => { &["for", $($own,)* "direction", "toxicity"] };
}

/// Every action, in [`ActionKind`]'s order (the order plans and messages list them).
pub(crate) const SPECS: [Spec; 19] = [
    Spec {
        kind: ActionKind::Kill,
        name: "kill",
        aim: Aim::Target(PROCESSES),
        parameters: &[],
        read: lifecycle::kill,
    },
    Spec {
        kind: ActionKind::Stop,
        name: "stop",
        aim: Aim::Target(PROCESSES),
        parameters: &[],
        read: lifecycle::stop,
    },
    Spec {
        kind: ActionKind::Start,
        name: "start",
        aim: Aim::Target(PROCESSES),
        parameters: &[],
        read: lifecycle::start,
    },
    Spec {
        kind: ActionKind::Restart,
        name: "restart",
        aim: Aim::Target(PROCESSES),
        parameters: &[],
        read: lifecycle::restart,
    },
    Spec {
        kind: ActionKind::Rolling,
        name: "rolling",
        aim: Aim::Target(&[Target::Nodes]),
        parameters: &["gap"],
        read: lifecycle::rolling,
    },
    Spec {
        kind: ActionKind::Upgrade,
        name: "upgrade",
        aim: Aim::Target(&[Target::Nodes, Target::Node(1)]),
        parameters: &["to", "gap"],
        read: lifecycle::upgrade,
    },
    Spec {
        kind: ActionKind::Pause,
        name: "pause",
        aim: Aim::Target(PROCESSES),
        parameters: &["for"],
        read: lifecycle::pause,
    },
    Spec {
        kind: ActionKind::Drop,
        name: "drop",
        aim: Aim::Target(&[Target::Players, Target::Node(1), Target::RandomNode]),
        parameters: &[],
        read: drop::drop,
    },
    Spec {
        kind: ActionKind::Partition,
        name: "partition",
        aim: Aim::Link,
        parameters: on_a_link!("mode", "via"),
        read: link_faults::partition,
    },
    Spec {
        kind: ActionKind::Latency,
        name: "latency",
        aim: Aim::Link,
        parameters: on_a_link!("ms", "jitter"),
        read: link_faults::latency,
    },
    Spec {
        kind: ActionKind::Bandwidth,
        name: "bandwidth",
        aim: Aim::Link,
        parameters: on_a_link!("kbps"),
        read: link_faults::bandwidth,
    },
    Spec {
        kind: ActionKind::SlowClose,
        name: "slow_close",
        aim: Aim::Link,
        parameters: on_a_link!("delay"),
        read: link_faults::slow_close,
    },
    Spec {
        kind: ActionKind::Timeout,
        name: "timeout",
        aim: Aim::Link,
        parameters: on_a_link!("after", "close"),
        read: link_faults::timeout,
    },
    Spec {
        kind: ActionKind::LimitData,
        name: "limit_data",
        aim: Aim::Link,
        parameters: on_a_link!("bytes"),
        read: link_faults::limit_data,
    },
    Spec {
        kind: ActionKind::Slicer,
        name: "slicer",
        aim: Aim::Link,
        parameters: on_a_link!("bytes", "variation", "delay"),
        read: link_faults::slicer,
    },
    Spec {
        kind: ActionKind::Cpu,
        name: "cpu",
        aim: Aim::Target(PROCESSES),
        parameters: &["for", "limit"],
        read: service_faults::cpu,
    },
    Spec {
        kind: ActionKind::Memory,
        name: "memory",
        aim: Aim::Target(PROCESSES),
        parameters: &["for", "limit"],
        read: service_faults::memory,
    },
    Spec {
        kind: ActionKind::DiskFull,
        name: "disk_full",
        aim: Aim::Target(PROCESSES),
        parameters: &["for"],
        read: service_faults::disk_full,
    },
    Spec {
        kind: ActionKind::Clock,
        name: "clock",
        aim: Aim::Target(PROCESSES),
        parameters: &["for", "offset"],
        read: service_faults::clock,
    },
];

/// Every parameter key, in the order an entry is written back after its action.
const PARAMETERS: [&str; 17] = [
    "gap",
    "to",
    "for",
    "ms",
    "jitter",
    "mode",
    "via",
    "direction",
    "toxicity",
    "kbps",
    "bytes",
    "variation",
    "delay",
    "after",
    "close",
    "limit",
    "offset",
];

impl ActionKind {
    /// The action's row of [`SPECS`].
    pub(crate) fn spec(self) -> &'static Spec {
        let spec = &SPECS[self as usize];
        debug_assert_eq!(spec.kind, self, "SPECS follows ActionKind's order");
        spec
    }

    /// The action's key, as plans, events and reports spell it.
    pub fn name(self) -> &'static str {
        self.spec().name
    }
}

/// One timeline entry's action: exactly one action key, and only that action's parameters.
pub(super) fn read(cx: &Cx<'_>, raw: &RawEntry, path: &KeyPath) -> Result<Action, PlanError> {
    // A key written with nothing after it (`for:`) counts as not written.
    let keys: Vec<(&str, &Value)> = raw
        .keys
        .iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(key, value)| match key.as_str() {
            Some(key) => Ok((key, value)),
            None => Err(cx.err(path, format!("`{}` is not a key", yaml_text(key)))),
        })
        .collect::<Result<_, _>>()?;
    let spec_of = |key: &str| SPECS.iter().find(|spec| spec.name == key);
    if let Some((unknown, _)) = keys
        .iter()
        .find(|(key, _)| spec_of(key).is_none() && !PARAMETERS.contains(key))
    {
        let names: Vec<&str> = SPECS.iter().map(|spec| spec.name).collect();
        return Err(cx.err(
            &path.key(unknown),
            format!(
                "unknown key `{unknown}`: an entry holds `at`, one action ({}) and its parameters ({})",
                names.join(", "),
                PARAMETERS.join(", ")
            ),
        ));
    }
    let named: Vec<(&Spec, &Value)> = keys
        .iter()
        .filter_map(|(key, value)| Some((spec_of(key)?, *value)))
        .collect();
    let (spec, aimed) = match named.as_slice() {
        [one] => *one,
        [] => {
            let names: Vec<&str> = SPECS.iter().map(|spec| spec.name).collect();
            return Err(cx.err(path, format!("no action ({})", names.join(", "))));
        }
        [(first, _), (second, _), ..] => {
            return Err(cx.err(
                &path.key(second.name),
                format!(
                    "one action per entry, and this one already has `{}`",
                    first.name
                ),
            ))
        }
    };
    if let Some((param, _)) = keys
        .iter()
        .find(|(key, _)| PARAMETERS.contains(key) && !spec.parameters.contains(key))
    {
        return Err(cx.err(
            &path.key(param),
            format!("`{param}` does not go with `{}`", spec.name),
        ));
    }
    let reader = Reader {
        cx,
        keys: &raw.keys,
        path,
        spec,
        aimed,
    };
    (spec.read)(&reader)
}

/// The file that handles an action.
enum Family {
    Lifecycle,
    Drop,
    LinkFaults,
    ServiceFaults,
}

fn family(action: &Action) -> Family {
    match action {
        Action::Kill(_)
        | Action::Stop(_)
        | Action::Start(_)
        | Action::Restart(_)
        | Action::Rolling { .. }
        | Action::Upgrade { .. }
        | Action::Pause { .. } => Family::Lifecycle,
        Action::Drop(_) => Family::Drop,
        Action::Link { .. } | Action::Firewall { .. } => Family::LinkFaults,
        Action::Service { .. } => Family::ServiceFaults,
    }
}

/// One timeline entry as a plan writes it.
pub(super) fn write(at: Duration, action: &Action) -> RawEntry {
    let mut keys = Keys(Vec::new());
    match family(action) {
        Family::Lifecycle => lifecycle::write(action, &mut keys),
        Family::Drop => drop::write(action, &mut keys),
        Family::LinkFaults => link_faults::write(action, &mut keys),
        Family::ServiceFaults => service_faults::write(action, &mut keys),
    }
    let name = action.kind().name();
    let rank = |key: &str| PARAMETERS.iter().position(|p| *p == key);
    keys.0.sort_by_key(|(key, _)| (*key != name, rank(key)));
    RawEntry {
        at: duration::format(at),
        keys: keys
            .0
            .into_iter()
            .map(|(key, value)| (Value::from(key), value))
            .collect(),
    }
}

/// The action with its `random-node` drawn, on the walk of the timeline at `at`.
pub(super) fn draw(walk: &mut Walk<'_>, action: Action, at: Duration) -> Result<Action, String> {
    match family(&action) {
        Family::Lifecycle => lifecycle::draw(walk, action, at),
        Family::Drop => drop::draw(walk, action, at),
        Family::LinkFaults => link_faults::draw(walk, action, at),
        Family::ServiceFaults => service_faults::draw(walk, action, at),
    }
}

/// What a drawn action keeps busy and for how long, at the least (readiness only makes it
/// longer): two actions may not hold one resource at once.
pub(super) fn holds(action: &Action, at: Duration, count: u32) -> Vec<Hold> {
    match family(action) {
        Family::Lifecycle => lifecycle::holds(action, at, count),
        Family::Drop => Vec::new(),
        Family::LinkFaults => link_faults::holds(action, at, count),
        Family::ServiceFaults => service_faults::holds(action, at, count),
    }
}

/// The runner's operations for one drawn action, heal included.
pub(super) fn expand(
    action: &Action,
    at: Duration,
    count: u32,
    toxicity: Option<Toxicity>,
) -> Vec<TimedAct> {
    match family(action) {
        Family::Lifecycle => lifecycle::expand(action, at, count),
        Family::Drop => drop::expand(action, at),
        Family::LinkFaults => link_faults::expand(action, at, count, toxicity),
        Family::ServiceFaults => service_faults::expand(action, at, count),
    }
}

/// What an action prints after its name and target: ` for 10s`, ` drop up for 5s`.
pub(super) fn print_details(action: &Action, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    match family(action) {
        Family::Lifecycle => lifecycle::print_details(action, f),
        Family::Drop => Ok(()),
        Family::LinkFaults => link_faults::print_details(action, f),
        Family::ServiceFaults => service_faults::print_details(action, f),
    }
}

/// For an action on processes, whether its targets must run before it and whether they run
/// after it; `None` for an action that leaves them as they are.
pub(super) fn process_states(action: &Action) -> Option<(bool, bool)> {
    match family(action) {
        Family::Lifecycle => Some(lifecycle::process_states(action)),
        Family::Drop | Family::LinkFaults | Family::ServiceFaults => None,
    }
}

/// The keys of an entry being written back, in any order: [`write`] puts them in the plan's.
struct Keys(Vec<(&'static str, Value)>);

impl Keys {
    fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        self.0.push((key, value.into()));
    }

    fn target(&mut self, kind: ActionKind, target: Target) {
        self.set(kind.name(), target.to_string());
    }

    fn duration(&mut self, key: &'static str, d: Duration) {
        self.set(key, duration::format(d));
    }
}

/// Reads one entry's action and parameters, each refusal naming its key.
struct Reader<'a> {
    cx: &'a Cx<'a>,
    keys: &'a Mapping,
    path: &'a KeyPath,
    spec: &'static Spec,
    /// The value of the action's own key.
    aimed: &'a Value,
}

impl Reader<'_> {
    fn name(&self) -> &'static str {
        self.spec.name
    }

    fn action_path(&self) -> KeyPath {
        self.path.key(self.name())
    }

    fn err(&self, param: &str, message: String) -> PlanError {
        self.cx.err(&self.path.key(param), message)
    }

    /// A parameter, when written.
    fn value(&self, param: &str) -> Option<&Value> {
        self.keys.get(param).filter(|value| !value.is_null())
    }

    fn needed<T>(&self, param: &str, value: Option<T>, what: &str) -> Result<T, PlanError> {
        value.ok_or_else(|| self.err(param, format!("`{}` needs `{param}` ({what})", self.name())))
    }

    /// A parameter written as text (a duration, a word, a size), when written.
    fn text(&self, param: &str) -> Result<Option<&str>, PlanError> {
        match self.value(param) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(other) => Err(self.err(
                param,
                format!("`{param}` is text, not {}", yaml_text(other)),
            )),
        }
    }

    /// A whole-number parameter, when written.
    fn integer(&self, param: &str) -> Result<Option<i64>, PlanError> {
        match self.value(param) {
            None => Ok(None),
            Some(value) => value.as_i64().map(Some).ok_or_else(|| {
                self.err(
                    param,
                    format!("`{param}` is a whole number, not {}", yaml_text(value)),
                )
            }),
        }
    }

    /// A duration parameter, when written.
    fn duration(&self, param: &str) -> Result<Option<Duration>, PlanError> {
        self.text(param)?
            .map(|text| self.cx.duration(text, &self.path.key(param)))
            .transpose()
    }

    /// `for`: how long a lasting fault holds; never zero.
    fn hold(&self) -> Result<Duration, PlanError> {
        let d = self.needed("for", self.duration("for")?, "how long it holds")?;
        if d.is_zero() {
            return Err(self.err("for", "a fault that holds 0s does nothing".into()));
        }
        Ok(d)
    }

    fn nonzero_duration(&self, param: &str, what: &str) -> Result<Duration, PlanError> {
        let d = self.needed(param, self.duration(param)?, what)?;
        if d.is_zero() {
            return Err(self.err(param, format!("`{param}: 0s` does nothing")));
        }
        Ok(d)
    }

    /// A whole number of at least 1 that fits `T`.
    fn positive<T: TryFrom<i64>>(&self, param: &str, what: &str) -> Result<T, PlanError> {
        let n = self.needed(param, self.integer(param)?, what)?;
        if n < 1 {
            return Err(self.err(
                param,
                format!("`{param}` must be at least 1 ({what}), not {n}"),
            ));
        }
        T::try_from(n).map_err(|_| self.err(param, format!("`{param}: {n}` is too large")))
    }

    /// A word parameter (`mode`, `direction`, `via`), when written.
    fn word<T: std::str::FromStr<Err = String>>(
        &self,
        param: &str,
    ) -> Result<Option<T>, PlanError> {
        self.text(param)?
            .map(|t| t.parse().map_err(|m| self.err(param, m)))
            .transpose()
    }

    /// The one target the action's key names, if the action may aim at it.
    fn target(&self) -> Result<Target, PlanError> {
        let (Aim::Target(allowed), Value::String(text)) = (&self.spec.aim, self.aimed) else {
            return Err(self.cx.err(
                &self.action_path(),
                format!("`{}` takes one target", self.name()),
            ));
        };
        let target: Target = text
            .parse()
            .map_err(|m| self.cx.err(&self.action_path(), m))?;
        let fits = allowed
            .iter()
            .any(|a| *a == target || matches!((a, target), (Target::Node(_), Target::Node(_))));
        if !fits {
            let names: Vec<String> = allowed
                .iter()
                .map(|a| match a {
                    Target::Node(_) => "node-N".to_owned(),
                    other => other.to_string(),
                })
                .collect();
            return Err(self.cx.err(
                &self.action_path(),
                format!(
                    "`{}` cannot aim at `{target}` (only {})",
                    self.name(),
                    names.join(", ")
                ),
            ));
        }
        Ok(target)
    }
}

pub(super) fn yaml_text(value: &Value) -> String {
    serde_yaml::to_string(value)
        .map(|t| t.trim().to_owned())
        .unwrap_or_else(|_| format!("{value:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_follows_the_kinds_and_their_serde_names() {
        for (i, spec) in SPECS.iter().enumerate() {
            assert_eq!(spec.kind as usize, i, "{}", spec.name);
            assert_eq!(
                serde_json::to_value(spec.kind).unwrap(),
                serde_json::Value::from(spec.name)
            );
            for param in spec.parameters {
                assert!(PARAMETERS.contains(param), "{}: {param}", spec.name);
            }
        }
        for param in PARAMETERS {
            assert!(
                SPECS.iter().any(|spec| spec.parameters.contains(&param)),
                "{param} belongs to no action"
            );
        }
    }
}
