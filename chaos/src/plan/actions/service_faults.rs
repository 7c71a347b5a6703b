//! The faults on a service's resources or clock: `cpu`, `memory`, `disk_full`, `clock`.

use std::time::Duration;

use anyplay_cloud::duration;
use serde_yaml::Value;

use super::{yaml_text, Keys, Reader};
use crate::plan::timeline::{services_of, Among, Hold, Resource, Walk};
use crate::plan::{Act, Action, Bytes, ClockOffset, PlanError, ServiceFault, Target, TimedAct};

pub(super) fn cpu(r: &Reader<'_>) -> Result<Action, PlanError> {
    let value = r.needed("limit", r.value("limit"), "cores, e.g. 0.2")?;
    let cores = match value.as_f64() {
        Some(cores) if cores > 0.0 && cores.is_finite() => cores,
        _ => {
            return Err(r.err(
                "limit",
                format!(
                    "`limit` is a number of cores above 0 (e.g. 0.2), not {}",
                    yaml_text(value)
                ),
            ))
        }
    };
    service_fault(r, ServiceFault::Cpu { cores })
}

pub(super) fn memory(r: &Reader<'_>) -> Result<Action, PlanError> {
    let value = r.needed("limit", r.value("limit"), "a size, e.g. 150MB")?;
    let text = match value {
        Value::String(text) => text.clone(),
        Value::Number(n) => n.to_string(),
        other => yaml_text(other),
    };
    let bytes: Bytes = text.parse().map_err(|m| r.err("limit", m))?;
    if bytes.0 == 0 {
        return Err(r.err(
            "limit",
            "a memory limit of 0 bytes cannot run anything".into(),
        ));
    }
    service_fault(r, ServiceFault::Memory { bytes: bytes.0 })
}

pub(super) fn disk_full(r: &Reader<'_>) -> Result<Action, PlanError> {
    service_fault(r, ServiceFault::DiskFull)
}

pub(super) fn clock(r: &Reader<'_>) -> Result<Action, PlanError> {
    if r.aimed.as_str() == Some("nats") {
        // nats-server (Go) reads the clock without libc, so libfaketime cannot move it.
        return Err(r.cx.err(
            &r.action_path(),
            "`clock` cannot aim at nats: nats-server reads the clock without libc, which libfaketime cannot reach".into(),
        ));
    }
    let text = r.needed("offset", r.text("offset")?, "how far the clock jumps")?;
    let offset: ClockOffset = text.parse().map_err(|m| r.err("offset", m))?;
    if offset.by.is_zero() {
        return Err(r.err("offset", "a clock offset of 0s does nothing".into()));
    }
    service_fault(
        r,
        ServiceFault::Clock {
            offset_ms: offset.millis(),
        },
    )
}

fn service_fault(r: &Reader<'_>, fault: ServiceFault) -> Result<Action, PlanError> {
    Ok(Action::Service {
        target: r.target()?,
        fault,
        duration: r.hold()?,
    })
}

pub(super) fn write(action: &Action, keys: &mut Keys) {
    let Some((target, fault, duration)) = parts(action) else {
        return;
    };
    keys.target(action.kind(), target);
    match fault {
        ServiceFault::Cpu { cores } => keys.set("limit", cores),
        ServiceFault::Memory { bytes } => keys.set("limit", Bytes(bytes).to_string()),
        ServiceFault::DiskFull => {}
        ServiceFault::Clock { offset_ms } => {
            keys.set("offset", ClockOffset::of_millis(offset_ms).to_string())
        }
    }
    keys.duration("for", duration);
}

pub(super) fn draw(walk: &mut Walk<'_>, action: Action, at: Duration) -> Result<Action, String> {
    Ok(match action {
        // A resource or clock fault holds on a stopped service too (it applies at its start).
        Action::Service {
            target,
            fault,
            duration,
        } => Action::Service {
            target: walk.pick(target, Among::Any, at)?,
            fault,
            duration,
        },
        other => other,
    })
}

pub(super) fn holds(action: &Action, at: Duration, count: u32) -> Vec<Hold> {
    let Some((target, fault, duration)) = parts(action) else {
        return Vec::new();
    };
    services_of(target, count)
        .into_iter()
        .map(|s| (Resource::Limit(s, fault.kind().into()), at, at + duration))
        .collect()
}

pub(super) fn expand(action: &Action, at: Duration, count: u32) -> Vec<TimedAct> {
    let Some((target, fault, duration)) = parts(action) else {
        return Vec::new();
    };
    TimedAct::lasting(
        &services_of(target, count),
        at,
        duration,
        |service| Act::Squeeze { service, fault },
        |service| Act::Release { service, fault },
    )
}

fn parts(action: &Action) -> Option<(Target, ServiceFault, Duration)> {
    match *action {
        Action::Service {
            target,
            fault,
            duration,
        } => Some((target, fault, duration)),
        _ => None,
    }
}

pub(super) fn print_details(action: &Action, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    match parts(action) {
        Some((_, fault, d)) => write!(f, " {fault} for {}", duration::format(d)),
        None => Ok(()),
    }
}
