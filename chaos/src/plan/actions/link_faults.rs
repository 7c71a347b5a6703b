//! The faults on a link: through the fault proxy between a node and `postgres`, `nats` or
//! `players` (`partition`, `latency`, `bandwidth`, `slow_close`, `timeout`, `limit_data`,
//! `slicer`), or a `partition` `via: firewall` between any two services' hosts.

use std::time::Duration;

use anyplay_cloud::duration;
use serde_yaml::Value;

use super::{yaml_text, Keys, Reader};
use crate::plan::timeline::{pairs_of, routes_of, Among, Hold, Resource, Walk};
use crate::plan::{Act, Action, Link, LinkFault, PlanError, Target, TimedAct, Toxicity, Via, Ways};
use crate::proxy::{Direction, Latency};

pub(super) fn partition(r: &Reader<'_>) -> Result<Action, PlanError> {
    match r.word("via")?.unwrap_or_default() {
        Via::Proxy => {
            through_the_proxy(r, LinkFault::Partition(r.word("mode")?.unwrap_or_default()))
        }
        Via::Firewall => {
            for param in ["mode", "toxicity"] {
                if r.value(param).is_some() {
                    return Err(r.err(
                        param,
                        format!("`{param}` belongs to the fault proxy, not `via: firewall` (the kernel drops every packet)"),
                    ));
                }
            }
            Ok(Action::Firewall {
                link: services_pair(r, &pair(r)?)?,
                ways: ways(r)?,
                duration: r.hold()?,
            })
        }
    }
}

pub(super) fn latency(r: &Reader<'_>) -> Result<Action, PlanError> {
    let ms = |param: &str| -> Result<Option<u32>, PlanError> {
        r.integer(param)?
            .map(|n| {
                u32::try_from(n).map_err(|_| {
                    r.err(
                        param,
                        format!("`{param}` is a whole number of milliseconds, not {n}"),
                    )
                })
            })
            .transpose()
    };
    let delay = r.needed("ms", ms("ms")?, "the added delay")?;
    if delay == 0 {
        return Err(r.err("ms", "a latency of 0 ms does nothing".into()));
    }
    let millis = |ms: u32| Duration::from_millis(ms.into());
    let jitter = ms("jitter")?.unwrap_or(0);
    through_the_proxy(
        r,
        LinkFault::Latency(Latency::new(millis(delay), millis(jitter))),
    )
}

pub(super) fn bandwidth(r: &Reader<'_>) -> Result<Action, PlanError> {
    let kbps = r.positive("kbps", "kilobits per second")?;
    through_the_proxy(r, LinkFault::Bandwidth { kbps })
}

pub(super) fn slow_close(r: &Reader<'_>) -> Result<Action, PlanError> {
    let delay = r.nonzero_duration("delay", "how long a close is held")?;
    through_the_proxy(r, LinkFault::SlowClose { delay })
}

/// `close: reset` ends each connection with a TCP RST instead of a FIN (Toxiproxy's
/// reset_peer); `after: 0s` is then a reset at once, as reset_peer's `timeout: 0`, where with a
/// FIN it is never.
pub(super) fn timeout(r: &Reader<'_>) -> Result<Action, PlanError> {
    let after = r.needed(
        "after",
        r.duration("after")?,
        "when connections close; 0s: never",
    )?;
    let reset = match r.text("close")? {
        None | Some("fin") => false,
        Some("reset") => true,
        Some(other) => {
            let message = format!("unknown close `{other}` (fin or reset)");
            return Err(r.err("close", message));
        }
    };
    through_the_proxy(
        r,
        LinkFault::Timeout {
            after: (reset || !after.is_zero()).then_some(after),
            reset,
        },
    )
}

pub(super) fn limit_data(r: &Reader<'_>) -> Result<Action, PlanError> {
    let bytes = r.positive("bytes", "bytes per connection")?;
    through_the_proxy(r, LinkFault::LimitData { bytes })
}

/// `variation`: each piece `bytes` ± that much, drawn (Toxiproxy's `size_variation`).
pub(super) fn slicer(r: &Reader<'_>) -> Result<Action, PlanError> {
    let bytes = r.positive("bytes", "the size of a piece")?;
    let variation = match r.integer("variation")? {
        None => 0,
        Some(n) => usize::try_from(n).map_err(|_| {
            r.err(
                "variation",
                format!("`variation` is a whole number of bytes, at least 0, not {n}"),
            )
        })?,
    };
    let delay = r.duration("delay")?.unwrap_or_default();
    through_the_proxy(
        r,
        LinkFault::Slicer {
            bytes,
            variation,
            delay,
        },
    )
}

fn through_the_proxy(r: &Reader<'_>, fault: LinkFault) -> Result<Action, PlanError> {
    Ok(Action::Link {
        link: link(r, &pair(r)?)?,
        fault,
        ways: ways(r)?,
        toxicity: toxicity(r)?,
        duration: r.hold()?,
    })
}

/// `direction`: both ways when absent.
fn ways(r: &Reader<'_>) -> Result<Ways, PlanError> {
    Ok(r.word("direction")?.unwrap_or_default())
}

fn toxicity(r: &Reader<'_>) -> Result<Option<f64>, PlanError> {
    let Some(value) = r.value("toxicity") else {
        return Ok(None);
    };
    match value.as_f64() {
        Some(share) if share > 0.0 && share <= 1.0 => Ok(Some(share)),
        _ => Err(r.err(
            "toxicity",
            format!(
                "`toxicity` is the share of connections hit, above 0 and at most 1, not {}",
                yaml_text(value)
            ),
        )),
    }
}

/// The two names the action's key holds: `[a, b]`.
fn pair(r: &Reader<'_>) -> Result<Vec<String>, PlanError> {
    let path = r.action_path();
    let Value::Sequence(items) = r.aimed else {
        return Err(r
            .cx
            .err(&path, format!("`{}` takes a link: [a, b]", r.name())));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(name) => Ok(name.clone()),
            other => Err(r.cx.err(
                &path.index(i),
                format!("`{}` is not a target", yaml_text(other)),
            )),
        })
        .collect()
}

/// A link through the fault proxy: a node and `postgres`, `nats` or `players`.
fn link(r: &Reader<'_>, pair: &[String]) -> Result<Link, PlanError> {
    let path = r.action_path();
    let [a, b] = pair else {
        return Err(r.cx.err(
            &path,
            format!("a link is a pair of targets, not {} of them", pair.len()),
        ));
    };
    let parse = |text: &String, i: usize| {
        text.parse::<Target>()
            .map_err(|m| r.cx.err(&path.index(i), m))
    };
    let link = Link {
        a: parse(a, 0)?,
        b: parse(b, 1)?,
    };
    let (node, peer) = link.ends();
    let peer_fits = matches!(peer, Target::Postgres | Target::Nats | Target::Players);
    if !node.is_node() || !peer_fits {
        return Err(r.cx.err(
            &path,
            format!(
                "`[{}, {}]` is not a link: pair a node (node-N, nodes, random-node) with postgres, nats or players",
                link.a, link.b
            ),
        ));
    }
    Ok(link)
}

/// Two services to cut apart with the firewall: any of node-N, nodes, random-node,
/// postgres and nats.
fn services_pair(r: &Reader<'_>, pair: &[String]) -> Result<Link, PlanError> {
    let path = r.action_path();
    let [a, b] = pair else {
        return Err(r.cx.err(
            &path,
            format!(
                "a partition is a pair of targets, not {} of them",
                pair.len()
            ),
        ));
    };
    let parse = |text: &String, i: usize| match text.parse::<Target>() {
        Ok(Target::Players) => Err(r.cx.err(
            &path.index(i),
            "players are not on a host of the plan: cut them with the proxy (no `via`)".into(),
        )),
        Ok(target) => Ok(target),
        Err(m) => Err(r.cx.err(&path.index(i), m)),
    };
    let link = Link {
        a: parse(a, 0)?,
        b: parse(b, 1)?,
    };
    if link.a == link.b {
        return Err(r
            .cx
            .err(&path, format!("`{}` cannot be cut from itself", link.a)));
    }
    Ok(link)
}

pub(super) fn write(action: &Action, keys: &mut Keys) {
    let (link, ways, duration) = match *action {
        Action::Link {
            link,
            fault,
            ways,
            toxicity,
            duration,
        } => {
            match fault {
                LinkFault::Partition(mode) => keys.set("mode", mode.to_string()),
                LinkFault::Latency(latency) => {
                    // Plans write whole milliseconds, so these always fit.
                    let ms = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
                    keys.set("ms", ms(latency.delay));
                    keys.set("jitter", ms(latency.jitter));
                }
                LinkFault::Bandwidth { kbps } => keys.set("kbps", kbps),
                LinkFault::SlowClose { delay } => keys.duration("delay", delay),
                LinkFault::Timeout { after, reset } => {
                    keys.duration("after", after.unwrap_or_default());
                    if reset {
                        keys.set("close", "reset");
                    }
                }
                LinkFault::LimitData { bytes } => keys.set("bytes", bytes),
                LinkFault::Slicer {
                    bytes,
                    variation,
                    delay,
                } => {
                    keys.set("bytes", bytes);
                    if variation > 0 {
                        keys.set("variation", variation);
                    }
                    keys.duration("delay", delay);
                }
            }
            if let Some(share) = toxicity {
                keys.set("toxicity", share);
            }
            (link, ways, duration)
        }
        Action::Firewall {
            link,
            ways,
            duration,
        } => {
            keys.set("via", Via::Firewall.to_string());
            (link, ways, duration)
        }
        _ => return,
    };
    keys.set(
        action.kind().name(),
        Value::Sequence(vec![link.a.to_string().into(), link.b.to_string().into()]),
    );
    if ways != Ways::Both {
        keys.set("direction", ways.to_string());
    }
    keys.duration("for", duration);
}

pub(super) fn draw(walk: &mut Walk<'_>, action: Action, at: Duration) -> Result<Action, String> {
    let mut pick_link = |link: Link| -> Result<Link, String> {
        Ok(Link {
            a: walk.pick(link.a, Among::Any, at)?,
            b: walk.pick(link.b, Among::Any, at)?,
        })
    };
    Ok(match action {
        Action::Link {
            link,
            fault,
            ways,
            toxicity,
            duration,
        } => Action::Link {
            link: pick_link(link)?,
            fault,
            ways,
            toxicity,
            duration,
        },
        Action::Firewall {
            link,
            ways,
            duration,
        } => Action::Firewall {
            link: pick_link(link)?,
            ways,
            duration,
        },
        other => other,
    })
}

pub(super) fn holds(action: &Action, at: Duration, count: u32) -> Vec<Hold> {
    match *action {
        Action::Link {
            link,
            fault,
            duration,
            ways,
            ..
        } => {
            // One way's fault of a kind beside the other way's: the proxy holds each apart.
            let directions = [Direction::Upstream, Direction::Downstream];
            let kind = fault.kind().into();
            let mut holds = Vec::new();
            for route in routes_of(link, count) {
                for direction in directions.into_iter().filter(|d| ways.covers(*d)) {
                    holds.push((Resource::Route(route, kind, direction), at, at + duration));
                }
            }
            holds
        }
        Action::Firewall { link, duration, .. } => pairs_of(link, count)
            .into_iter()
            .map(|(a, b)| (Resource::Firewall(a.min(b), a.max(b)), at, at + duration))
            .collect(),
        _ => Vec::new(),
    }
}

pub(super) fn expand(
    action: &Action,
    at: Duration,
    count: u32,
    toxicity: Option<Toxicity>,
) -> Vec<TimedAct> {
    match *action {
        Action::Link {
            link,
            fault,
            ways,
            duration,
            ..
        } => TimedAct::lasting(
            &routes_of(link, count),
            at,
            duration,
            |route| Act::Impair {
                route,
                fault,
                ways,
                toxicity,
            },
            |route| Act::Heal { route, fault, ways },
        ),
        Action::Firewall {
            link,
            ways,
            duration,
        } => TimedAct::lasting(
            &pairs_of(link, count),
            at,
            duration,
            |(from, to)| Act::Cut { from, to, ways },
            |(from, to)| Act::Mend { from, to },
        ),
        _ => Vec::new(),
    }
}

pub(super) fn print_details(action: &Action, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    match action {
        Action::Link {
            fault,
            ways,
            toxicity,
            duration: d,
            ..
        } => {
            crate::plan::units::write_details(f, fault, *ways, *toxicity)?;
            write!(f, " for {}", duration::format(*d))
        }
        Action::Firewall {
            ways, duration: d, ..
        } => {
            f.write_str(" via firewall")?;
            if *ways != Ways::Both {
                write!(f, " {ways}")?;
            }
            write!(f, " for {}", duration::format(*d))
        }
        _ => Ok(()),
    }
}
