//! The plan's `clients`: real client programs that ride through the run beside the load.
//! Each starts once every player is online, with `{urls}`, `{name}` and `{out}` filled in,
//! writes to `logs/<name>.log`, and its exit (or its end at the end of the run) becomes
//! the check `client:<name>`.

use std::path::Path;
use std::process::Stdio;

use tokio::process::{Child, Command};

use crate::events::{Event, EventLog};
use crate::plan::Client;
use crate::supervisor::services::log_path;

use super::topology::NodeAddrs;

/// A started client and how it ended, once it has.
pub struct Running {
    name: String,
    child: Child,
}

/// The command line of `client` with its placeholders filled.
fn command_line(client: &Client, urls: &str, out: &Path) -> String {
    client
        .cmd
        .replace("{urls}", urls)
        .replace("{name}", &client.name)
        .replace("{out}", &out.display().to_string())
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
        let started = std::fs::create_dir_all(&out).and_then(|()| {
            let log_file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log_path(dir, &client.name))?;
            Command::new("sh")
                .arg("-c")
                .arg(command_line(client, &urls, &out))
                .current_dir(dir)
                .stdin(Stdio::null())
                .stdout(log_file.try_clone()?)
                .stderr(log_file)
                .kill_on_drop(true)
                .spawn()
        });
        match started {
            Ok(child) => running.push(Running {
                name: client.name.clone(),
                child,
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

/// Ends the clients still running (SIGKILL) and records how each ended.
pub async fn finish(running: Vec<Running>, log: &EventLog) {
    for mut client in running {
        if let Ok(None) = client.child.try_wait() {
            let _ = client.child.start_kill();
        }
        let status = client.child.wait().await;
        let (code, signal) = match status {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt;
                let signal = status
                    .signal()
                    .and_then(|s| nix::sys::signal::Signal::try_from(s).ok())
                    .map(|s| s.as_str().to_owned());
                (status.code(), signal)
            }
            Err(_) => (None, None),
        };
        let _ = log.record(Event::ClientExit {
            name: client.name,
            code,
            signal,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            ),
            "./c --server http://a,http://b --name headless-1 --out /r/clients/headless-1"
        );
    }
}
