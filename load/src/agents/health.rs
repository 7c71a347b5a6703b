//! An agent's health, once a second, while it holds a run: how late a probe task wakes (the
//! runtime's lateness under the agent's load), its CPU and memory, its players' connections and
//! its messages waiting to go to the coordinator.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::agents::protocol::{Event, Health};
use crate::measure::facts::unix_micros;
use crate::measure::stats::{histogram, ms};
use crate::players::fleet::Fleet;

/// How often the probe wakes.
const PROBE_EVERY: Duration = Duration::from_millis(10);
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// Sends a [`Health`] event every second into `events` until aborted.
pub fn start(fleet: Arc<Fleet>, events: mpsc::Sender<Event>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let pid = Pid::from_u32(std::process::id());
        let mut system = System::new();
        let mut cpu_before = cpu_ms(&mut system, pid);
        let mut lag = histogram(2);
        let mut since = Instant::now();
        loop {
            let due = Instant::now() + PROBE_EVERY;
            tokio::time::sleep_until(due.into()).await;
            let late = u64::try_from(due.elapsed().as_micros()).unwrap_or(u64::MAX);
            lag.saturating_record(late.max(1));
            if since.elapsed() < REPORT_EVERY {
                continue;
            }
            let (cpu_now, rss) = cpu_ms(&mut system, pid);
            let cpu = cpu_now.saturating_sub(cpu_before.0) as f64
                / 1000.0
                / since.elapsed().as_secs_f64();
            cpu_before = (cpu_now, rss);
            let health = Health {
                at_us: unix_micros(),
                sched_lag_ms_p99: ms(lag.value_at_quantile(0.99)),
                cpu,
                rss_mb: rss as f64 / (1024.0 * 1024.0),
                connections: fleet.connections(),
                online: fleet.online_count(),
                send_queue: events.max_capacity() - events.capacity(),
            };
            // A full queue already says the coordinator is not keeping up; the sample can go.
            let _ = events.try_send(Event::Health(health));
            lag.reset();
            since = Instant::now();
        }
    })
}

/// The process's CPU time so far (ms) and its resident memory (bytes).
fn cpu_ms(system: &mut System, pid: Pid) -> (u64, u64) {
    let what = ProcessRefreshKind::nothing().with_cpu().with_memory();
    system.refresh_processes_specifics(ProcessesToUpdate::Some(&[pid]), true, what);
    system
        .process(pid)
        .map_or((0, 0), |p| (p.accumulated_cpu_time(), p.memory()))
}
