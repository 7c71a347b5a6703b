//! Open-loop scheduling: operations start at their planned instants whatever the cloud does.
//! At `max_in_flight` running, further ones are counted as skipped (saturated), never queued, and
//! each operation is handed its planned start so latency counts from it (no coordinated omission).

pub(crate) mod wake;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::measure::generator::SchedLag;
use crate::schedule::wake::Alarm;

/// `count` operations at `rate` per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    pub rate: f64,
    pub count: u64,
    pub max_in_flight: usize,
}

impl Plan {
    /// As many operations as `rate` gives in `duration`.
    pub fn for_duration(rate: f64, duration: Duration, max_in_flight: usize) -> Plan {
        let count = (rate * duration.as_secs_f64()).round().max(0.0) as u64;
        Plan {
            rate,
            count,
            max_in_flight,
        }
    }

    /// How long after the plan's start operation `i` is due.
    pub fn offset(&self, i: u64) -> Duration {
        Duration::from_secs_f64(i as f64 / self.rate)
    }

    /// The planned start of operation `i`.
    pub fn slot(&self, start: Instant, i: u64) -> Instant {
        start + self.offset(i)
    }
}

/// What the scheduler did.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Outcome {
    pub started: u64,
    pub skipped_saturated: u64,
    /// From the first planned start until every started operation ended.
    pub elapsed: Duration,
    /// From the first planned start to the last actual start.
    pub start_span: Duration,
}

impl Outcome {
    /// Operations started per second over the span the plan asked for (one gap per operation).
    pub fn achieved_rate(&self, plan: &Plan) -> f64 {
        if self.started == 0 {
            return 0.0;
        }
        let planned = Duration::from_secs_f64(plan.count as f64 / plan.rate);
        let span = (self.start_span + Duration::from_secs_f64(1.0 / plan.rate)).max(planned);
        self.started as f64 / span.as_secs_f64()
    }
}

/// Runs `plan`: `op(i, planned_start)` is started for each operation on schedule, and the call
/// returns once every started operation ended. How late each start was goes into `lag`.
pub async fn run<F, Fut>(plan: &Plan, lag: &SchedLag, mut op: F) -> Outcome
where
    F: FnMut(u64, Instant) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let permits = Arc::new(Semaphore::new(plan.max_in_flight));
    let mut running = JoinSet::new();
    let start = Instant::now();
    let (mut started, mut skipped_saturated) = (0, 0);
    let mut last_start = start;
    let mut alarm = Alarm::new();
    for i in 0..plan.count {
        let at = plan.slot(start, i);
        alarm.sleep_until(at).await;
        let now = Instant::now();
        lag.record(now.saturating_duration_since(at));
        match permits.clone().try_acquire_owned() {
            Ok(permit) => {
                let fut = op(i, at);
                running.spawn(async move {
                    fut.await;
                    drop(permit);
                });
                started += 1;
                last_start = now;
            }
            Err(_) => skipped_saturated += 1,
        }
        // Reap what ended, so a long plan does not keep every finished task around.
        while let Some(ended) = running.try_join_next() {
            report_panic(ended);
        }
    }
    while let Some(ended) = running.join_next().await {
        report_panic(ended);
    }
    Outcome {
        started,
        skipped_saturated,
        elapsed: start.elapsed(),
        start_span: last_start - start,
    }
}

fn report_panic(ended: Result<(), tokio::task::JoinError>) {
    if let Err(e) = ended {
        tracing::error!("a scheduled operation failed: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    #[tokio::test]
    async fn operations_start_on_schedule_at_the_rate() {
        let plan = Plan::for_duration(200.0, Duration::from_millis(500), 100);
        assert_eq!(plan.count, 100);
        let starts = Arc::new(Mutex::new(Vec::new()));
        let begin = Instant::now();
        let outcome = run(&plan, &SchedLag::new(), |i, at| {
            let starts = starts.clone();
            async move { crate::sync::lock(&starts).push((i, at, Instant::now())) }
        })
        .await;
        assert_eq!((outcome.started, outcome.skipped_saturated), (100, 0));
        let starts = crate::sync::lock(&starts);
        for (i, at, actual) in starts.iter() {
            // Never early; the planned instant is i / rate after the start.
            assert!(actual >= at);
            let planned = at.duration_since(begin).as_secs_f64();
            assert!(
                (planned - *i as f64 / 200.0).abs() < 0.05,
                "op {i} planned at {planned}"
            );
        }
        // 100 ops at 200/s span ~0.5 s; a noisy machine may stretch it, never shrink it.
        assert!(outcome.elapsed >= Duration::from_millis(490), "{outcome:?}");
        assert!(
            outcome.achieved_rate(&plan) > 100.0,
            "{}",
            outcome.achieved_rate(&plan)
        );
    }

    #[tokio::test]
    async fn past_max_in_flight_operations_are_skipped_not_queued() {
        let plan = Plan {
            rate: 1000.0,
            count: 100,
            max_in_flight: 5,
        };
        let ran = Arc::new(AtomicU64::new(0));
        let outcome = run(&plan, &SchedLag::new(), |_, _| {
            let ran = ran.clone();
            async move {
                ran.fetch_add(1, Ordering::Relaxed);
                // Far longer than the whole plan: the first 5 hold every permit throughout.
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        })
        .await;
        assert_eq!(outcome.started, 5);
        assert_eq!(outcome.skipped_saturated, 95);
        assert_eq!(ran.load(Ordering::Relaxed), 5);
        // The schedule did not wait for the slow operations before moving on.
        assert!(
            outcome.start_span < Duration::from_millis(500),
            "{outcome:?}"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn latency_counts_from_the_planned_start_when_the_generator_is_late() {
        let plan = Plan {
            rate: 100.0,
            count: 5,
            max_in_flight: 10,
        };
        let lag = SchedLag::new();
        let latencies = Arc::new(Mutex::new(Vec::new()));
        run(&plan, &lag, |i, at| {
            let latencies = latencies.clone();
            async move {
                if i == 0 {
                    // Stall the only thread: every later operation starts late.
                    std::thread::sleep(Duration::from_millis(300));
                }
                crate::sync::lock(&latencies).push((i, at.elapsed()));
            }
        })
        .await;
        let latencies = crate::sync::lock(&latencies);
        let second = latencies.iter().find(|(i, _)| *i == 1).expect("op 1 ran").1;
        // Op 1 was planned at 10 ms and could only start after the 300 ms stall.
        assert!(
            second >= Duration::from_millis(250),
            "latency {second:?} hides the stall"
        );
        assert!(lag.summary().max >= 250.0, "{:?}", lag.summary());
    }
}
