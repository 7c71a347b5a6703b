//! A node on a Docker engine other than the local one, reached over TLS: the test starts a
//! second `dockerd` in a network namespace of its own (its own data root, exec root, pidfile
//! and managed containerd, listening with TLS on the namespace's address only), loads the
//! project's node image into it, and runs `node-crash` with node-2 placed on that engine. With
//! a client certificate the engine's CA did not sign, the run stops before anything starts and
//! says why. Needs root, iproute2, openssl, dockerd and the local images (deploy/test.sh); it
//! fails without them.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{a_run_turn, chaos, reduced_plan_with, report, run_plan, scratch};

const PORT: u16 = 2376;
/// The second engine takes about 25 s to answer on these machines.
const ENGINE_START: Duration = Duration::from_secs(120);

fn sh(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} cannot run: {e}"));
    assert!(
        out.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, and a certificate it signs for `name` with the given extensions.
fn ca(dir: &Path, name: &str) {
    let p = |f: &str| dir.join(f).display().to_string();
    sh(
        "openssl",
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &p(&format!("{name}-key.pem")),
            "-out",
            &p(&format!("{name}.pem")),
        ],
    );
}

fn signed(dir: &Path, ca: &str, name: &str, extensions: &str) {
    let p = |f: &str| dir.join(f).display().to_string();
    std::fs::write(dir.join(format!("{name}.ext")), extensions).unwrap();
    sh(
        "openssl",
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &p(&format!("{name}-key.pem")),
            "-out",
            &p(&format!("{name}.csr")),
        ],
    );
    sh(
        "openssl",
        &[
            "x509",
            "-req",
            "-days",
            "2",
            "-CAcreateserial",
            "-in",
            &p(&format!("{name}.csr")),
            "-CA",
            &p(&format!("{ca}.pem")),
            "-CAkey",
            &p(&format!("{ca}-key.pem")),
            "-extfile",
            &p(&format!("{name}.ext")),
            "-out",
            &p(&format!("{name}.pem")),
        ],
    );
}

/// The second engine and everything made for it; all removed on drop.
struct Engine {
    dir: PathBuf,
    namespace: String,
    bridge: String,
    address: Ipv4Addr,
    dockerd: Option<Child>,
}

impl Engine {
    fn start(dir: &Path) -> Engine {
        std::fs::create_dir_all(dir).unwrap();
        let id = std::process::id();
        let address = Ipv4Addr::new(10, 214, (id % 250 + 1) as u8, 2);
        let mut engine = Engine {
            dir: dir.to_owned(),
            namespace: format!("apre-{id}"),
            bridge: format!("apreb{}", id % 100_000),
            address,
            dockerd: None,
        };
        let (ns, br) = (engine.namespace.clone(), engine.bridge.clone());
        let veth = format!("aprev{}", id % 100_000);
        sh("ip", &["netns", "add", &ns]);
        sh("ip", &["link", "add", &br, "type", "bridge"]);
        let gateway = Ipv4Addr::new(10, 214, address.octets()[2], 1);
        sh("ip", &["addr", "add", &format!("{gateway}/24"), "dev", &br]);
        sh("ip", &["link", "set", &br, "up"]);
        sh(
            "ip",
            &[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ],
        );
        sh("ip", &["link", "set", &veth, "master", &br, "up"]);
        sh(
            "ip",
            &[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{address}/24"),
                "dev",
                "eth0",
            ],
        );
        sh("ip", &["-n", &ns, "link", "set", "eth0", "up"]);
        sh("ip", &["-n", &ns, "link", "set", "lo", "up"]);

        ca(dir, "ca");
        signed(
            dir,
            "ca",
            "server",
            &format!("subjectAltName=IP:{address}\nextendedKeyUsage=serverAuth\n"),
        );
        signed(dir, "ca", "client", "extendedKeyUsage=clientAuth\n");
        ca(dir, "other-ca");
        signed(dir, "other-ca", "stranger", "extendedKeyUsage=clientAuth\n");

        let p = |f: &str| dir.join(f).display().to_string();
        // nsenter, not `ip netns exec`: that one remounts /sys and hides the cgroup mounts.
        let log = std::fs::File::create(dir.join("dockerd.log")).unwrap();
        let dockerd = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{ns}"))
            .args([
                "dockerd",
                "--data-root",
                &p("data"),
                "--exec-root",
                &p("exec"),
            ])
            .args(["--pidfile", &p("dockerd.pid")])
            .args(["-H", &format!("tcp://{address}:{PORT}"), "--tlsverify"])
            .args(["--tlscacert", &p("ca.pem"), "--tlscert", &p("server.pem")])
            .args(["--tlskey", &p("server-key.pem")])
            .args(["--bridge=none", "--iptables=false"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("dockerd runs (Debian package docker.io)");
        engine.dockerd = Some(dockerd);
        let deadline = Instant::now() + ENGINE_START;
        while !engine.cli(&["version"]).status.success() {
            assert!(
                Instant::now() < deadline,
                "the second engine did not answer within {ENGINE_START:?}:\n{}",
                std::fs::read_to_string(dir.join("dockerd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        engine
    }

    fn url(&self) -> String {
        format!("tcp://{}:{PORT}", self.address)
    }

    /// The docker CLI against this engine, with the client's certificate.
    fn cli(&self, args: &[&str]) -> std::process::Output {
        let p = |f: &str| self.dir.join(f).display().to_string();
        Command::new("docker")
            .args([
                "-H",
                &self.url(),
                "--tlsverify",
                "--tlscacert",
                &p("ca.pem"),
            ])
            .args([
                "--tlscert",
                &p("client.pem"),
                "--tlskey",
                &p("client-key.pem"),
            ])
            .args(args)
            .output()
            .expect("the docker CLI runs")
    }

    /// Copies an image of the local engine into this one.
    fn load(&self, image: &str) {
        let p = |f: &str| self.dir.join(f).display().to_string();
        let tar = p("image.tar");
        sh("docker", &["save", "-o", &tar, image]);
        let loaded = self.cli(&["load", "-i", &tar]);
        assert!(
            loaded.status.success(),
            "{}",
            String::from_utf8_lossy(&loaded.stderr)
        );
        let _ = std::fs::remove_file(tar);
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(mut dockerd) = self.dockerd.take() {
            let _ = Command::new("kill").arg(dockerd.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(20);
            while dockerd.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = dockerd.kill();
            let _ = dockerd.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.namespace])
            .status();
        let _ = Command::new("ip")
            .args(["link", "delete", &self.bridge])
            .status();
        // The engine leaves mounts behind in its roots: layers, and its exec root's handle on
        // the namespace, which would keep the namespace (and its veth) alive. Deepest first.
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let mut under: Vec<&str> = mounts
            .lines()
            .filter_map(|line| line.split_whitespace().nth(1))
            .filter(|point| Path::new(point).starts_with(&self.dir))
            .collect();
        under.sort_by_key(|point| std::cmp::Reverse(point.len()));
        for point in under {
            let _ = Command::new("umount").args(["-l", point]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// node-crash with node-2 on the engine, reached with `cert` and `key`, trusting `ca`.
fn on_engine(dir: &Path, engine: &Engine, ca: &str, cert: &str, key: &str) -> PathBuf {
    let p = |f: &str| engine.dir.join(f).display().to_string();
    let host = format!(
        "{{docker: '{}', tls: {{ca: '{}', cert: '{}', key: '{}'}}}}",
        engine.url(),
        p(ca),
        p(cert),
        p(key)
    );
    reduced_plan_with("node-crash", dir, 150, "10s", |plan| {
        plan["hosts"]["remote"] = serde_yaml::from_str(&host).unwrap();
        plan["services"]["nodes"]["host"] = serde_yaml::from_str("[local, remote]").unwrap();
        // A node elsewhere sees every player as one address: no per-player limits there.
        plan["load"]["rate_limits"] = false.into();
        super::at_lighter_rates(plan);
    })
}

#[test]
fn a_node_on_a_remote_engine_over_tls_passes_and_a_wrong_certificate_stops_the_run() {
    let _engine = crate::support::containers::engine_shared();
    let _turn = a_run_turn();
    let dir = scratch("remote-engine");
    let engine = Engine::start(&dir.join("engine"));
    engine.load("anyplay/node:local");

    let wrong = on_engine(&dir, &engine, "ca.pem", "stranger.pem", "stranger-key.pem");
    let out = dir.join("refused");
    let refused = run_plan(&wrong, &out, &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("host remote: cannot reach the Docker engine at tcp://"),
        "{stderr}"
    );
    assert!(
        !out.join("logs/postgres.log").exists() && !out.join("logs/node-1.log").exists(),
        "nothing starts before the engine is reached"
    );

    // Regression (issue 30): the engine's CA trusted by the system (SSL_CERT_FILE) but not
    // by the plan, whose CA is another: bollard's TLS trusted the system's roots too.
    let untrusted = on_engine(
        &dir,
        &engine,
        "other-ca.pem",
        "client.pem",
        "client-key.pem",
    );
    let out = dir.join("untrusted");
    let refused = chaos(&[
        "run",
        untrusted.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
    .env("SSL_CERT_FILE", engine.dir.join("ca.pem"))
    .output()
    .expect("anyplay-chaos runs");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("host remote: cannot reach the Docker engine at tcp://"),
        "{stderr}"
    );

    let plan = on_engine(&dir, &engine, "ca.pem", "client.pem", "client-key.pem");
    let out = dir.join("run");
    let output = run_plan(&plan, &out, &[]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(report(&out)["verdict"], "pass");
    let history = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    assert!(
        history.contains(&format!(
            r#""host":"remote","host_kind":"docker","address":"{}","services":["node-2"]"#,
            engine.address
        )),
        "no host_up of the remote engine"
    );
    // node-2's container ran there (its log came back from that engine), and is gone now.
    let log = std::fs::read_to_string(out.join("logs/node-2.log")).unwrap();
    assert!(log.contains("image anyplay/node:local"), "{log}");
    let left = engine.cli(&["ps", "--all", "--quiet"]);
    assert!(
        String::from_utf8_lossy(&left.stdout).trim().is_empty(),
        "containers left on the engine"
    );
    drop(engine);
    let _ = std::fs::remove_dir_all(&dir);
}
