//! A NATS server of a test's own, which the test may kill: the shared one
//! (`ANYPLAY_TEST_NATS_URL`) serves every other test at the same time.

use std::process::{Child, Command, Stdio};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

pub struct TestNats {
    child: Child,
    pub url: String,
}

impl TestNats {
    pub async fn start() -> TestNats {
        // Below the ephemeral range, as the nodes' (see `node::free_port`).
        let port = anyplay_cloud::ports::free_port().expect("a free loopback port");
        let bin = "nats-server";
        let child = Command::new(bin)
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
        let deadline = std::time::Instant::now() + super::SOON;
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(std::time::Instant::now() < deadline, "NATS did not start");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        TestNats {
            child,
            url: format!("nats://127.0.0.1:{port}"),
        }
    }

    /// Stops the server (SIGSTOP): its sockets stay open and nothing moves, as in a
    /// chaos plan's `pause: nats`.
    pub fn pause(&self) {
        self.signal(Signal::SIGSTOP);
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn resume(&self) {
        self.signal(Signal::SIGCONT);
    }

    fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, signal).expect("signal the NATS server");
    }

    /// Kills the server: the nodes lose NATS until the test ends.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for TestNats {
    fn drop(&mut self) {
        self.kill();
    }
}
