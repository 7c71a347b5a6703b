//! The plan's `clients`: real client programs that ride through the run beside the load.
//! Each starts once every player is online, with `{urls}`, `{name}` and `{out}` filled in,
//! writes to `logs/<name>.log`, and its exit (or its end at the end of the run) becomes
//! the check `client:<name>`. `ANYPLAY_CHAOS` names this program, so a plan's client may be
//! its `client` command (`"$ANYPLAY_CHAOS" client …`) wherever it was built. A client runs as
//! a service process does (its own process group, the parent-death signal, a guard), in a
//! cgroup of its own where the supervisor may make one (root), so neither it nor anything it
//! started outlives the run, a daemon it double-forked included, even when the supervisor is
//! SIGKILLed (the next run removes its cgroup and what is in it).

use std::path::Path;

use crate::backend::process::cgroup::{self, Cgroup};
use crate::backend::process::{self, Leader};
use crate::backend::Command;
use crate::events::{Event, EventLog};
use crate::plan::Client;
use crate::supervisor::services::log_path;

use super::topology::NodeAddrs;

/// A started client.
pub struct Running {
    name: String,
    leader: Leader,
    /// Everything it started is in it (`None` where cgroups cannot be made: not root).
    cgroup: Option<Cgroup>,
}

/// The command line of `client` with its placeholders filled. A value with anything but plain
/// path and address characters is refused, not quoted: the plan's own quotes around a
/// placeholder would open a quoted value to the shell again (`"{out}"` with `'$(…)'` in it),
/// and a run directory named `$(…)` must be a path, never more of the command.
fn command_line(client: &Client, urls: &str, out: &Path) -> Result<String, String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./:,@+=-".contains(c);
    let checked = |what: &str, value: &str| {
        if value.chars().all(plain) {
            return Ok(value.to_owned());
        }
        Err(format!(
            "{what} {:?} holds characters a shell command cannot be given safely (only \
             letters, digits and _./:,@+=- are); choose another run directory",
            crate::printable::line(value)
        ))
    };
    Ok(client
        .cmd
        .replace("{urls}", &checked("{urls}", urls)?)
        .replace("{name}", &checked("{name}", &client.name)?)
        .replace("{out}", &checked("{out}", &out.display().to_string())?))
}

/// Starts every client; one that cannot start is recorded as a failed exit at once.
pub fn start(clients: &[Client], dir: &Path, nodes: &[NodeAddrs], log: &EventLog) -> Vec<Running> {
    let urls = nodes
        .iter()
        .map(|n| format!("http://{}", n.players))
        .collect::<Vec<_>>()
        .join(",");
    let mut running = Vec::new();
    for client in clients {
        let out = dir.join("clients").join(&client.name);
        let started = command_line(client, &urls, &out).and_then(|line| {
            let mut command = Command::new("/bin/sh", log_path(dir, &client.name))
                .args(["-c".to_owned(), line])
                .cwd(dir);
            if let Ok(me) = std::env::current_exe() {
                command = command.env("ANYPLAY_CHAOS", me.display().to_string());
            }
            std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            let cgroup = match cgroup::check_available() {
                Ok(()) => Some(
                    Cgroup::create(&format!("client-{}", client.name))
                        .map_err(|e| e.to_string())?,
                ),
                Err(_) => None,
            };
            let join = cgroup
                .as_ref()
                .map(|c| c.join_fds().to_vec())
                .unwrap_or_default();
            let leader =
                process::spawn_joined(&command, &client.name, &join).map_err(|e| e.to_string())?;
            Ok((leader, cgroup))
        });
        match started {
            Ok((leader, cgroup)) => running.push(Running {
                name: client.name.clone(),
                leader,
                cgroup,
            }),
            Err(e) => {
                let _ = log.record(Event::Note {
                    text: format!("client {} could not start: {e}", client.name),
                });
                let _ = log.record(Event::ClientExit {
                    name: client.name.clone(),
                    code: Some(127),
                    signal: None,
                });
            }
        }
    }
    running
}

/// Ends the clients (SIGKILL to each one's whole tree and cgroup, what it left behind
/// included) and records how each ended: a client that exited by itself keeps its own exit.
pub async fn finish(running: Vec<Running>, log: &EventLog) {
    for client in running {
        if let Err(e) = client.leader.kill() {
            tracing::warn!("client {}: {e}", client.name);
        }
        let exit = client.leader.wait().await;
        if let Some(cgroup) = &client.cgroup {
            cgroup.kill_members();
        }
        let _ = log.record(Event::ClientExit {
            name: client.name,
            code: exit.code(),
            signal: exit.signal_name().map(str::to_owned),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// True once `pid` no longer runs (gone, or a zombie nobody reaped).
    fn gone(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'))
        })
    }

    #[tokio::test]
    async fn the_end_of_the_run_ends_a_clients_background_children_and_daemons() {
        let dir =
            std::env::temp_dir().join(format!("anyplay-chaos-clients-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("logs")).expect("run dir");
        let log = EventLog::create(&dir.join("events.jsonl"), std::time::Instant::now())
            .expect("event log");
        for cmd in [
            "sleep 300 & echo $! > {out}/pid; wait",
            // Double-forked into a session of its own: no longer in the client's tree.
            "(setsid sleep 300 & echo $! > {out}/pid); sleep 300",
        ] {
            let client = Client {
                name: "forker".into(),
                cmd: cmd.into(),
                expect_exit: 0,
            };
            let pid_file = dir.join("clients/forker/pid");
            let _ = std::fs::remove_file(&pid_file);
            let running = start(&[client], &dir, &[], &log);
            let deadline = Instant::now() + Duration::from_secs(10);
            let grandchild = loop {
                let text = std::fs::read_to_string(&pid_file).unwrap_or_default();
                if let Ok(pid) = text.trim().parse::<i32>() {
                    break pid;
                }
                assert!(
                    Instant::now() < deadline,
                    "{cmd}: the client never wrote its child's pid"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            };
            finish(running, &log).await;
            let deadline = Instant::now() + Duration::from_secs(5);
            while !gone(grandchild) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let survived = !gone(grandchild);
            if survived {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(grandchild),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            assert!(
                !survived,
                "{cmd}: the client's child {grandchild} outlived the run"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn placeholders_are_filled() {
        let client = Client {
            name: "headless-1".into(),
            cmd: "./c --server {urls} --name {name} --out {out}".into(),
            expect_exit: 0,
        };
        assert_eq!(
            command_line(
                &client,
                "http://a,http://b",
                Path::new("/r/clients/headless-1")
            )
            .unwrap(),
            "./c --server http://a,http://b --name headless-1 --out /r/clients/headless-1"
        );
        // A run directory whose path the shell would read as more than a word is refused,
        // whether the plan quotes its placeholder or not.
        for cmd in [
            "./c --out {out}",
            "./c --out \"{out}\"",
            "./c --out '{out}'",
        ] {
            let client = Client {
                cmd: cmd.into(),
                ..client.clone()
            };
            for dir in ["/r/$(touch x)", "/r/a b", "/r/'x'", "/r/`id`"] {
                let refused = command_line(&client, "http://a", Path::new(dir)).unwrap_err();
                assert!(
                    refused.contains("choose another run directory"),
                    "{refused}"
                );
            }
        }
    }
}
