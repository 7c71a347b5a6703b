//! Progress on stderr while a run goes (indicatif), or nothing when a library caller asks.

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// Hands out one bar per phase.
#[derive(Clone)]
pub struct Progress {
    multi: Option<MultiProgress>,
}

impl Progress {
    /// Bars on stderr (indicatif draws nothing when stderr is not a terminal).
    pub fn stderr() -> Self {
        Progress {
            multi: Some(MultiProgress::new()),
        }
    }

    /// No bars at all.
    pub fn hidden() -> Self {
        Progress { multi: None }
    }

    /// A bar for `len` steps of phase `name`.
    pub fn bar(&self, name: &str, len: u64) -> ProgressBar {
        let style = ProgressStyle::with_template(
            "{prefix:>10} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}) {msg}",
        )
        .expect("a constant template");
        self.add(ProgressBar::new(len).with_style(style), name)
    }

    /// A spinner for phase `name`, whose message tells where it is.
    pub fn spinner(&self, name: &str) -> ProgressBar {
        let style =
            ProgressStyle::with_template("{prefix:>10} [{elapsed_precise}] {spinner} {msg}")
                .expect("a constant template");
        let bar = self.add(ProgressBar::new_spinner().with_style(style), name);
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        bar
    }

    fn add(&self, bar: ProgressBar, name: &str) -> ProgressBar {
        match &self.multi {
            Some(multi) => multi.add(bar.with_prefix(name.to_string())),
            None => ProgressBar::hidden(),
        }
    }
}
