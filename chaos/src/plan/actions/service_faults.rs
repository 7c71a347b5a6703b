//! The faults on a service's resources or clock: `cpu`, `memory`, `disk_full`, `clock`.

use serde_yaml::Value;

use super::{yaml_text, Keys, Reader};
use crate::plan::{Action, Bytes, ClockOffset, PlanError, ServiceFault};

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
    let &Action::Service {
        target,
        fault,
        duration,
    } = action
    else {
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
