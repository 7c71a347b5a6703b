//! What a run made of the machine's network, written down as it is made, so that a later run
//! can undo it when this one's supervisor died without cleaning up (SIGKILL): one directory per
//! run under `/run/anyplay-chaos/net`, with its owner and one line per thing made.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use super::command::run;
use super::NetworkError;
use crate::backend::owner::Owner;

/// Where the records live: `/run` is emptied at boot, as the namespaces and links are.
const RECORDS: &str = "/run/anyplay-chaos/net";
const OWNER: &str = "owner";
const MADE: &str = "made";
/// A file beside the runs' directories, locked while one run sweeps.
const SWEEP_LOCK: &str = ".sweep.lock";

/// One thing a run made, as its record line reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Thing {
    /// A network namespace (its veth end and firewall tables go with it).
    Netns(String),
    /// The bridge in the supervisor's namespace (its record line says `link`, as `ip` does).
    Bridge(String),
    /// The rule that lets the bridge's own traffic past a `FORWARD DROP` policy (Docker's).
    ForwardAccept(String),
}

impl Thing {
    fn to_line(&self) -> String {
        match self {
            Thing::Netns(name) => format!("netns {name}"),
            Thing::Bridge(name) => format!("link {name}"),
            Thing::ForwardAccept(bridge) => format!("forward {bridge}"),
        }
    }

    fn from_line(line: &str) -> Option<Thing> {
        let (kind, name) = line.split_once(' ')?;
        match kind {
            "netns" => Some(Thing::Netns(name.to_owned())),
            "link" => Some(Thing::Bridge(name.to_owned())),
            "forward" => Some(Thing::ForwardAccept(name.to_owned())),
            _ => None,
        }
    }

    /// Whether it is still on the machine.
    fn exists(&self) -> bool {
        match self {
            Thing::Netns(name) => Path::new("/run/netns").join(name).exists(),
            Thing::Bridge(name) => Path::new("/sys/class/net").join(name).exists(),
            Thing::ForwardAccept(bridge) => {
                run("iptables", &forward_rule("-C", bridge), None).is_ok()
            }
        }
    }

    /// Removes it from the machine.
    pub(super) fn undo(&self) -> Result<(), NetworkError> {
        match self {
            Thing::Netns(name) => run("ip", &["netns", "delete", name], None),
            Thing::Bridge(name) => run("ip", &["link", "delete", name], None),
            Thing::ForwardAccept(bridge) => run("iptables", &forward_rule("-D", bridge), None),
        }
    }
}

/// What a clean-up says it removed.
impl std::fmt::Display for Thing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Thing::Netns(name) => write!(f, "network namespace {name}"),
            Thing::Bridge(name) => write!(f, "bridge {name}"),
            Thing::ForwardAccept(bridge) => write!(f, "the FORWARD accept rule of {bridge}"),
        }
    }
}

/// `iptables` arguments that insert (`-I`) or delete (`-D`) the accept rule of `bridge`.
pub(super) fn forward_rule<'a>(op: &'a str, bridge: &'a str) -> [&'a str; 8] {
    [op, "FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"]
}

/// The record of one run, appended to as things are made.
#[derive(Debug)]
pub(super) struct Record {
    dir: PathBuf,
}

impl Record {
    pub(super) fn create(tag: &str) -> Result<Record, NetworkError> {
        Self::create_in(Path::new(RECORDS), tag)
    }

    fn create_in(root: &Path, tag: &str) -> Result<Record, NetworkError> {
        let dir = root.join(tag);
        let io = |source| NetworkError::Record {
            path: dir.clone(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        std::fs::write(dir.join(OWNER), Owner::this().to_text()).map_err(io)?;
        Ok(Record { dir })
    }

    /// Notes `thing` before it is made, so a crash in between still has it undone.
    pub(super) fn note(&self, thing: &Thing) -> Result<(), NetworkError> {
        let path = self.dir.join(MADE);
        let io = |source| NetworkError::Record {
            path: path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        writeln!(file, "{}", thing.to_line()).map_err(io)
    }

    /// Undoes everything noted, last first, and removes the record; returns what went.
    pub(super) fn undo_all(&self) -> Vec<Thing> {
        undo_dir(&self.dir)
    }
}

/// Undoes the record in `dir`, last first (a namespace before its bridge), then removes it.
/// Things already gone count as undone; what could not be undone and is still there stays
/// in the record, for the next sweep, and the record with it.
fn undo_dir(dir: &Path) -> Vec<Thing> {
    let made = std::fs::read_to_string(dir.join(MADE)).unwrap_or_default();
    let things: Vec<Thing> = made.lines().filter_map(Thing::from_line).collect();
    let mut undone = Vec::new();
    let mut left = Vec::new();
    for thing in things.into_iter().rev() {
        match thing.undo() {
            Ok(()) => undone.push(thing),
            Err(e) if thing.exists() => {
                tracing::warn!("{thing} could not be undone, and stays recorded: {e}");
                left.push(thing);
            }
            Err(e) => tracing::debug!("{thing}: {e}"),
        }
    }
    if left.is_empty() {
        let _ = std::fs::remove_dir_all(dir);
    } else {
        // In the order they were made, as the record had them.
        let lines: String = left.iter().rev().map(|t| t.to_line() + "\n").collect();
        if let Err(e) = std::fs::write(dir.join(MADE), lines) {
            tracing::warn!("rewriting {}: {e}", dir.display());
        }
    }
    undone
}

/// Holds the records' sweep lock until dropped; a file of the supervisor's own, not followed
/// through a link.
fn lock(root: &Path) -> std::io::Result<Flock<std::fs::File>> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(root.join(SWEEP_LOCK))?;
    Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| e.into())
}

/// Undoes what runs whose supervisor is provably dead made; returns what went.
pub fn sweep() -> Vec<Thing> {
    sweep_in(Path::new(RECORDS))
}

fn sweep_in(root: &Path) -> Vec<Thing> {
    // One sweep at a time: two runs starting together would otherwise each undo part of the
    // same dead run's record, and neither could say what that run left.
    let _sweeping = match lock(root) {
        Ok(lock) => lock,
        Err(e) => {
            tracing::debug!("no records to sweep in {}: {e}", root.display());
            return Vec::new();
        }
    };
    let Ok(runs) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut undone = Vec::new();
    for run in runs.flatten() {
        let owner = std::fs::read_to_string(run.path().join(OWNER)).unwrap_or_default();
        if Owner::from_text(&owner).is_some_and(|o| o.is_provably_dead()) {
            undone.extend(undo_dir(&run.path()));
        }
    }
    undone
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_lines_read_back() {
        for thing in [
            Thing::Netns("anyplay-ab12cd-db".into()),
            Thing::Bridge("apbr-ab12cd".into()),
            Thing::ForwardAccept("apbr-ab12cd".into()),
        ] {
            assert_eq!(Thing::from_line(&thing.to_line()), Some(thing));
        }
        assert_eq!(Thing::from_line("route 10.0.0.0/8"), None);
    }

    #[test]
    fn only_records_of_dead_owners_are_swept() {
        let root = std::env::temp_dir().join(format!("anyplay-made-{}", std::process::id()));
        let alive = Record::create_in(&root, "alive").unwrap();
        // Nothing real is noted: the sweep's commands then fail, and the record goes anyway.
        alive.note(&Thing::Bridge("apbr-nothere".into())).unwrap();
        let dead = root.join("dead");
        std::fs::create_dir_all(&dead).unwrap();
        let mut owner = Owner::this();
        owner.process = "4194305@1".into();
        std::fs::write(dead.join(OWNER), owner.to_text()).unwrap();
        assert!(sweep_in(&root).is_empty(), "nothing real was made");
        assert!(!dead.exists(), "the dead run's record is gone");
        assert!(root.join("alive").exists(), "a live run's record stays");
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Issue 30: a dead run's record was deleted even when undoing what it made failed, so
    /// nothing would ever undo it. The loopback link cannot be deleted, and is there.
    #[test]
    fn what_could_not_be_undone_stays_recorded() {
        let root = std::env::temp_dir().join(format!("anyplay-kept-{}", std::process::id()));
        let dead = Record::create_in(&root, "dead").unwrap();
        dead.note(&Thing::Bridge("apbr-nothere".into())).unwrap();
        dead.note(&Thing::Bridge("lo".into())).unwrap();
        let mut owner = Owner::this();
        owner.process = "4194305@1".into();
        std::fs::write(root.join("dead").join(OWNER), owner.to_text()).unwrap();
        assert!(sweep_in(&root).is_empty());
        let kept = std::fs::read_to_string(root.join("dead").join(MADE)).expect("the record stays");
        assert_eq!(kept, "link lo\n");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
