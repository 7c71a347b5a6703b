//! The plan's `clients`: real client programs that ride through the run beside the load.
//! Each starts once every player is online, with `{urls}`, `{name}` and `{out}` filled in,
//! writes to `logs/<name>.log`, and its exit (or its end at the end of the run) becomes
//! the check `client:<name>`. `ANYPLAY_CHAOS` names this program, so a plan's client may be
//! its `client` command (`"$ANYPLAY_CHAOS" client …`) wherever it was built. A client runs as a service process does (its own process group,
//! the parent-death signal, a guard), so neither it nor anything it started outlives the run,
//! even when the supervisor is SIGKILLed.

use std::path::Path;

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
}

/// The command line of `client` with its placeholders filled, a value with anything but
/// plain path and address characters quoted for the shell: a run directory named `$(…)` or
/// with a space is a path, not more of the command. Plain values go in as they are, so a plan
/// that quotes its placeholders itself keeps working.
fn command_line(client: &Client, urls: &str, out: &Path) -> Result<String, String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./:,@+=-".contains(c);
    let quoted = |value: &str| {
        if !value.is_empty() && value.chars().all(plain) {
            return Ok(value.to_owned());
        }
        shlex::try_quote(value)
            .map(|q| q.into_owned())
            .map_err(|e| format!("{value:?} cannot be given to the shell: {e}"))
    };
    Ok(client
        .cmd
        .replace("{urls}", &quoted(urls)?)
        .replace("{name}", &quoted(&client.name)?)
        .replace("{out}", &quoted(&out.display().to_string())?))
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
            std::fs::create_dir_all(&out)
                .map_err(|e| format!("{}: {e}", out.display()))
                .and_then(|()| process::spawn(&command, &client.name).map_err(|e| e.to_string()))
        });
        match started {
            Ok(leader) => running.push(Running {
                name: client.name.clone(),
                leader,
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

/// Ends the clients (SIGKILL to each one's whole tree, what it left behind included) and
/// records how each ended: a client that exited by itself keeps its own exit.
pub async fn finish(running: Vec<Running>, log: &EventLog) {
    for client in running {
        if let Err(e) = client.leader.kill() {
            tracing::warn!("client {}: {e}", client.name);
        }
        let exit = client.leader.wait().await;
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
    async fn the_end_of_the_run_ends_a_clients_background_children() {
        let dir =
            std::env::temp_dir().join(format!("anyplay-chaos-clients-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("logs")).expect("run dir");
        let log = EventLog::create(&dir.join("events.jsonl"), std::time::Instant::now())
            .expect("event log");
        let client = Client {
            name: "forker".into(),
            cmd: "sleep 300 & echo $! > {out}/pid; wait".into(),
            expect_exit: 0,
        };
        let running = start(&[client], &dir, &[], &log);
        let pid_file = dir.join("clients/forker/pid");
        let deadline = Instant::now() + Duration::from_secs(10);
        let grandchild = loop {
            let text = std::fs::read_to_string(&pid_file).unwrap_or_default();
            if let Ok(pid) = text.trim().parse::<i32>() {
                break pid;
            }
            assert!(
                Instant::now() < deadline,
                "the client never wrote its child's pid"
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
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            !survived,
            "the client's child {grandchild} outlived the run"
        );
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
        // A run directory given with --out is a path, whatever it is called.
        let line = command_line(&client, "http://a", Path::new("/r/$(touch x) y")).unwrap();
        assert!(line.ends_with("--out '/r/$(touch x) y'"), "{line}");
        assert_eq!(
            shlex::split(&line).unwrap().last().map(String::as_str),
            Some("/r/$(touch x) y")
        );
    }
}
