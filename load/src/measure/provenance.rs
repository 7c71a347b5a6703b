//! Where a run's figures come from: the machine it ran on and the commit it was built from,
//! probed one way for the load report and for every chaos run.

use serde::{Deserialize, Serialize};
use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};

/// The machine a run ran on, so figures can be compared.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Absent from chaos runs recorded before the probe was shared.
    #[serde(default)]
    pub hostname: Option<String>,
    pub os: String,
    #[serde(default)]
    pub kernel: Option<String>,
    pub arch: String,
    pub cpu: String,
    /// Cores this process may use.
    pub cores: usize,
    pub memory_mb: u64,
}

impl Machine {
    pub fn detect() -> Machine {
        let system = System::new_with_specifics(
            RefreshKind::nothing()
                .with_cpu(CpuRefreshKind::nothing())
                .with_memory(MemoryRefreshKind::nothing().with_ram()),
        );
        Machine {
            hostname: System::host_name(),
            os: System::long_os_version().unwrap_or_default(),
            kernel: System::kernel_version(),
            arch: System::cpu_arch(),
            cpu: system
                .cpus()
                .first()
                .map(|cpu| cpu.brand().trim().to_owned())
                .unwrap_or_default(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_mb: system.total_memory() / (1024 * 1024),
        }
    }
}

/// The commit this build came from: `ANYPLAY_COMMIT` at build time, else at run time, else
/// what git says of the source tree the build came from, else `unknown`.
pub fn commit() -> String {
    let set = |commit: &String| !commit.is_empty();
    option_env!("ANYPLAY_COMMIT")
        .map(str::to_owned)
        .filter(set)
        .or_else(|| std::env::var("ANYPLAY_COMMIT").ok().filter(set))
        .or_else(git_head)
        .unwrap_or_else(|| "unknown".to_owned())
}

fn git_head() -> Option<String> {
    let out = std::process::Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "rev-parse",
            "--short=12",
            "HEAD",
        ])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let commit = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !commit.is_empty()).then_some(commit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_sees_this_machine() {
        let machine = Machine::detect();
        assert!(machine.cores >= 1);
        assert!(machine.memory_mb > 0);
        assert!(!machine.arch.is_empty());
    }

    #[test]
    fn a_machine_recorded_before_hostname_and_kernel_still_reads() {
        let old = r#"{"os":"Linux","arch":"x86_64","cpu":"X","cores":2,"memory_mb":1024}"#;
        let machine: Machine = serde_json::from_str(old).unwrap();
        assert_eq!(machine.hostname, None);
        assert_eq!(machine.kernel, None);
        assert_eq!(machine.memory_mb, 1024);
    }

    #[test]
    fn the_commit_is_never_empty() {
        assert!(!commit().is_empty());
    }
}
