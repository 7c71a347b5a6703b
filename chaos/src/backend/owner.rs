//! Who owns what may outlive a supervisor (a run's containers, PostgreSQL's scratch directory):
//! the supervisor process, named so that a later run can tell that it is *provably* dead before
//! it removes what that run left behind.
//!
//! A pid with its start time names one process, but only in one PID namespace of one booted
//! kernel: a supervisor in another PID namespace (inside a container), or on another machine
//! that shares a Docker engine, is absent from our `/proc` while it runs. So an owner names its
//! host too (the kernel's boot id and the inode of its PID namespace), and only an owner of this
//! very host whose process is gone counts as dead. Anything else is left alone.

use std::os::unix::fs::MetadataExt;

use super::process::start_time;

/// A supervisor process and where its pid means something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// `<boot id>/<pid namespace inode>`; empty when this kernel does not tell.
    pub host: String,
    /// `<pid>@<start time>`, the start time in clock ticks after boot (a pid alone is reused).
    pub process: String,
}

impl Owner {
    /// This process.
    pub fn this() -> Owner {
        let pid = std::process::id();
        let start = i32::try_from(pid).ok().and_then(start_time);
        Owner {
            host: this_host(),
            process: format!("{pid}@{}", start.unwrap_or_default()),
        }
    }

    /// True only when the owner ran on this host (same boot, same PID namespace) and its
    /// process no longer runs.
    pub fn is_provably_dead(&self) -> bool {
        provably_dead(self, &this_host(), process_gone)
    }

    /// Two lines, host then process, for a marker file.
    pub fn to_text(&self) -> String {
        format!("{}\n{}\n", self.host, self.process)
    }

    /// One path component naming the owner, for what cannot hold a marker file (a cgroup, a
    /// mount's source): `<process>_<boot id>_<pid namespace inode>`.
    pub fn to_name(&self) -> String {
        format!("{}_{}", self.process, self.host.replace('/', "_"))
    }

    /// Reads what [`Owner::to_name`] wrote; `None` when it is not that.
    pub fn from_name(name: &str) -> Option<Owner> {
        let (process, host) = name.split_once('_')?;
        let (boot, namespace) = host.split_once('_')?;
        (!namespace.contains('_')).then(|| Owner {
            host: format!("{boot}/{namespace}"),
            process: process.to_owned(),
        })
    }

    /// Reads what [`Owner::to_text`] wrote; `None` when it is not that.
    pub fn from_text(text: &str) -> Option<Owner> {
        let mut lines = text.lines();
        let owner = Owner {
            host: lines.next()?.to_owned(),
            process: lines.next()?.to_owned(),
        };
        lines.next().is_none().then_some(owner)
    }
}

/// The decision, apart from the machine it runs on: dead only when `owner` names the host
/// `here` (which must be known) and `gone` says its process no longer runs.
fn provably_dead(owner: &Owner, here: &str, gone: impl Fn(&str) -> bool) -> bool {
    !here.is_empty() && owner.host == here && gone(&owner.process)
}

/// `<boot id>/<pid namespace inode>`, or empty when either is unknown.
fn this_host() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let namespace = std::fs::metadata("/proc/self/ns/pid").map(|meta| meta.ino());
    match (boot.trim(), namespace) {
        ("", _) | (_, Err(_)) => String::new(),
        (boot, Ok(inode)) => format!("{boot}/{inode}"),
    }
}

/// Whether `<pid>@<start time>` is known not to run in this PID namespace now (no process of
/// that pid, or one started at another time). Text that names no process proves nothing.
fn process_gone(process: &str) -> bool {
    let Some((pid, started)) = process.split_once('@') else {
        return false;
    };
    match (pid.parse(), started.parse::<u64>()) {
        (Ok(pid), Ok(started)) => start_time(pid) != Some(started),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(host: &str, process: &str) -> Owner {
        Owner {
            host: host.into(),
            process: process.into(),
        }
    }

    #[test]
    fn only_a_dead_owner_of_this_very_host_is_dead() {
        let dead = |_: &str| true;
        let alive = |_: &str| false;
        assert!(provably_dead(&owner("boot/1", "7@9"), "boot/1", dead));
        assert!(!provably_dead(&owner("boot/1", "7@9"), "boot/1", alive));
        // Another PID namespace or another machine: our /proc says nothing about it.
        assert!(!provably_dead(&owner("boot/2", "7@9"), "boot/1", dead));
        assert!(!provably_dead(&owner("other/1", "7@9"), "boot/1", dead));
        // No host recorded (an older run), or ours unknown: nothing is provable.
        assert!(!provably_dead(&owner("", "7@9"), "boot/1", dead));
        assert!(!provably_dead(&owner("", "7@9"), "", dead));
    }

    #[test]
    fn this_process_is_alive_and_a_reused_pid_is_not() {
        let me = Owner::this();
        assert!(
            !me.host.is_empty(),
            "Linux tells its boot id and PID namespace"
        );
        assert!(!me.is_provably_dead(), "{me:?}");
        let (pid, _) = me.process.split_once('@').unwrap();
        assert!(owner(&me.host, &format!("{pid}@1")).is_provably_dead());
        assert!(
            owner(&me.host, "4194305@1").is_provably_dead(),
            "above pid_max"
        );
        assert!(!owner(&me.host, "garbage").is_provably_dead());
        assert!(!owner("another-host/1", "4194305@1").is_provably_dead());
    }

    #[test]
    fn reads_back_its_text() {
        let me = Owner::this();
        assert_eq!(Owner::from_text(&me.to_text()), Some(me.clone()));
        assert_eq!(Owner::from_text("one line"), None);
        assert_eq!(Owner::from_text("a\nb\nc\n"), None);
        assert_eq!(Owner::from_name(&me.to_name()), Some(me.clone()));
        assert!(!me.to_name().contains('/'), "one path component");
        assert_eq!(Owner::from_name("no-underscore"), None);
        assert_eq!(Owner::from_name("a_b_c_d"), None);
    }
}
