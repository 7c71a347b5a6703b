//! The harness's own health, so a reader can tell a tail is the cloud's and not the harness's:
//! how late its scheduler ran, its CPU and peak memory, the nodes' processes, and (in process)
//! the store pool's busy count.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::measure::stats::ms;
use crate::sync::lock;

/// The in-process store pool, sampled 4 times a second into the generator's health.
pub trait PoolProbe: Send + Sync {
    /// Connections of the pool in use right now.
    fn busy(&self) -> u32;
}

/// 4 samples a second.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// How late the schedulers started operations, merged over every scenario of a run.
#[derive(Clone)]
pub struct SchedLag(Arc<Mutex<Histogram<u64>>>);

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct LagReport {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Default for SchedLag {
    fn default() -> Self {
        Self::new()
    }
}

impl SchedLag {
    pub fn new() -> Self {
        // Microseconds: 0 (on time) up to an hour late.
        let hist =
            Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant bounds are valid");
        SchedLag(Arc::new(Mutex::new(hist)))
    }

    pub fn record(&self, late: Duration) {
        let micros = u64::try_from(late.as_micros()).unwrap_or(u64::MAX);
        lock(&self.0).saturating_record(micros);
    }

    /// Everything recorded so far.
    pub fn histogram(&self) -> Histogram<u64> {
        lock(&self.0).clone()
    }

    /// In milliseconds.
    pub fn summary(&self) -> LagReport {
        LagReport::of(&lock(&self.0))
    }
}

impl LagReport {
    /// The lateness in `hist` (µs), in milliseconds.
    pub fn of(hist: &Histogram<u64>) -> Self {
        LagReport {
            p50: ms(hist.value_at_quantile(0.5)),
            p99: ms(hist.value_at_quantile(0.99)),
            max: ms(hist.max()),
        }
    }
}

/// CPU and memory of one process over the run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ProcessUsage {
    pub pid: u32,
    pub cpu_cores_avg: f64,
    pub rss_mb_peak: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct PoolReport {
    pub samples: usize,
    pub avg: f64,
    pub max: u32,
}

/// The report's `generator` object.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GeneratorReport {
    pub sched_lag_ms: LagReport,
    pub cpu_cores_avg: f64,
    pub rss_mb_peak: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool_busy: Option<PoolReport>,
}

/// The report's `process` object.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessReport {
    pub harness: ProcessUsage,
    /// True when the cloud runs inside the harness, so `harness` counts it too.
    pub cloud_in_harness: bool,
    pub nodes: Vec<ProcessUsage>,
}

#[derive(Clone, Copy)]
struct Usage {
    pid: u32,
    first: Option<(Instant, u64)>,
    last: Option<(Instant, u64)>,
    rss_peak: u64,
}

impl Usage {
    fn new(pid: u32) -> Self {
        Usage {
            pid,
            first: None,
            last: None,
            rss_peak: 0,
        }
    }

    fn report(&self) -> ProcessUsage {
        let cpu_cores_avg = match (self.first, self.last) {
            (Some((t0, cpu0)), Some((t1, cpu1))) if t1 > t0 => {
                cpu1.saturating_sub(cpu0) as f64 / 1000.0 / (t1 - t0).as_secs_f64()
            }
            _ => 0.0,
        };
        ProcessUsage {
            pid: self.pid,
            cpu_cores_avg,
            rss_mb_peak: self.rss_peak as f64 / (1024.0 * 1024.0),
        }
    }
}

struct Samples {
    harness: Usage,
    nodes: Vec<Usage>,
    pool_busy: Vec<u32>,
}

/// Samples the processes and the pool until [`Generator::finish`].
pub struct Generator {
    lag: SchedLag,
    samples: Arc<Mutex<Samples>>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Generator {
    /// Starts sampling this process, the nodes' processes `node_pids`, and `pool`.
    pub fn start(node_pids: Vec<u32>, pool: Option<Arc<dyn PoolProbe>>) -> Generator {
        let own = std::process::id();
        let samples = Arc::new(Mutex::new(Samples {
            harness: Usage::new(own),
            nodes: node_pids.into_iter().map(Usage::new).collect(),
            pool_busy: Vec::new(),
        }));
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn({
            let samples = samples.clone();
            async move {
                let mut system = System::new();
                let mut tick = tokio::time::interval(SAMPLE_EVERY);
                loop {
                    tokio::select! {
                        _ = tick.tick() => sample(&mut system, &samples, pool.as_deref()),
                        _ = &mut stopped => break,
                    }
                }
                sample(&mut system, &samples, pool.as_deref());
            }
        });
        Generator {
            lag: SchedLag::new(),
            samples,
            stop,
            task,
        }
    }

    /// The lateness recorder every scheduler of the run shares.
    pub fn lag(&self) -> &SchedLag {
        &self.lag
    }

    /// Stops sampling and sums up.
    pub async fn finish(self, cloud_in_harness: bool) -> (GeneratorReport, ProcessReport) {
        // The sampler may already have ended if the runtime is shutting down.
        let _ = self.stop.send(());
        if let Err(e) = self.task.await {
            tracing::warn!("the generator's sampler ended badly: {e}");
        }
        let samples = lock(&self.samples);
        let harness = samples.harness.report();
        let pool_busy = (!samples.pool_busy.is_empty()).then(|| PoolReport {
            samples: samples.pool_busy.len(),
            avg: samples.pool_busy.iter().map(|b| f64::from(*b)).sum::<f64>()
                / samples.pool_busy.len() as f64,
            max: samples.pool_busy.iter().copied().max().unwrap_or(0),
        });
        let generator = GeneratorReport {
            sched_lag_ms: self.lag.summary(),
            cpu_cores_avg: harness.cpu_cores_avg,
            rss_mb_peak: harness.rss_mb_peak,
            pool_busy,
        };
        let nodes = samples.nodes.iter().map(Usage::report).collect();
        (
            generator,
            ProcessReport {
                harness,
                cloud_in_harness,
                nodes,
            },
        )
    }
}

fn sample(system: &mut System, samples: &Mutex<Samples>, pool: Option<&dyn PoolProbe>) {
    let pids: Vec<Pid> = {
        let samples = lock(samples);
        std::iter::once(&samples.harness)
            .chain(&samples.nodes)
            .map(|u| Pid::from_u32(u.pid))
            .collect()
    };
    let what = ProcessRefreshKind::nothing().with_cpu().with_memory();
    system.refresh_processes_specifics(ProcessesToUpdate::Some(&pids), true, what);
    let now = Instant::now();
    let mut samples = lock(samples);
    let samples = &mut *samples;
    for usage in std::iter::once(&mut samples.harness).chain(samples.nodes.iter_mut()) {
        if let Some(process) = system.process(Pid::from_u32(usage.pid)) {
            let cpu = (now, process.accumulated_cpu_time());
            usage.first.get_or_insert(cpu);
            usage.last = Some(cpu);
            usage.rss_peak = usage.rss_peak.max(process.memory());
        }
    }
    if let Some(pool) = pool {
        samples.pool_busy.push(pool.busy());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_summary_is_in_milliseconds() {
        let lag = SchedLag::new();
        for ms in 1..=100 {
            lag.record(Duration::from_millis(ms));
        }
        let s = lag.summary();
        assert!((s.p50 - 50.0).abs() < 0.5, "{s:?}");
        assert!((s.p99 - 99.0).abs() < 0.5, "{s:?}");
        assert!((s.max - 100.0).abs() < 0.5, "{s:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_harness_measures_its_own_cpu_and_memory() {
        struct Busy;
        impl PoolProbe for Busy {
            fn busy(&self) -> u32 {
                3
            }
        }
        let generator = Generator::start(Vec::new(), Some(Arc::new(Busy)));
        // Burn some CPU so the average is above zero on any machine.
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_millis(600) {
            std::hint::black_box(spin.elapsed());
        }
        let (report, process) = generator.finish(true).await;
        assert!(report.cpu_cores_avg > 0.0, "{report:?}");
        assert!(report.rss_mb_peak > 1.0, "{report:?}");
        assert_eq!(report.pool_busy.map(|p| p.max), Some(3));
        assert_eq!(process.harness.pid, std::process::id());
    }
}
