//! Whole runs of the shipped plans with the real binary, on real PostgreSQL, NATS and
//! nodes, with fewer players so the suite stays quick; and a supervisor SIGKILLed in the
//! middle of a run, which must leave no process behind.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{
    a_run_turn, assert_passed, chaos, reduced_plan, reduced_plan_with, report, run_plan, scratch,
};

/// Runs a reduced plan and asserts a pass, with every check and the files a run writes.
fn passes(name: &str, players: u32) {
    passes_with(name, name, players, |_| {}, |_| {});
}

/// [`passes`] with the plan changed by `edit` (the run's directory named `label`), and what
/// `more` asserts of the run directory.
fn passes_with(
    name: &str,
    label: &str,
    players: u32,
    edit: impl FnOnce(&mut serde_yaml::Value),
    more: impl FnOnce(&Path),
) {
    let _turn = a_run_turn();
    let dir = scratch(label);
    let plan = reduced_plan_with(name, &dir, players, "10s", edit);
    let out = dir.join("run");
    let output = run_plan(&plan, &out, &[]);
    assert_passed(&output, name);
    for file in [
        "plan.yaml",
        "events.jsonl",
        "report.json",
        "summary.md",
        "report.html",
        "load.json",
        "logs/node-1.log",
        "logs/node-2.log",
        "logs/postgres.log",
        "logs/nats.log",
    ] {
        assert!(out.join(file).is_file(), "{file} is missing");
    }
    let report = report(&out);
    assert_eq!(report["schema"], "anyplay-chaos/report/v1");
    assert_eq!(report["verdict"], "pass");
    let checks: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for check in [
        "players_back",
        "duplicate_sessions",
        "presence_missing",
        "lost_writes",
        "http_error_ratio",
        "failover",
    ] {
        assert!(checks.contains(&check), "{check} missing from {checks:?}");
    }
    assert!(!report["series"].as_array().unwrap().is_empty());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("## Checks") && stdout.contains("## Faults"),
        "{stdout}"
    );
    more(&out);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn node_crash_passes_on_postgres_and_nats() {
    passes("node-crash", 200);
}

/// The same plan with its players played by two local load agents: the same verdicts (every
/// check passes), each agent's players in the history, and the load report per agent.
#[test]
fn node_crash_passes_with_two_local_agents() {
    let agents = |plan: &mut serde_yaml::Value| {
        plan["load"]["agents"] = 2.into();
        plan["load"]["agents_local"] = true.into();
    };
    passes_with("node-crash", "node-crash-agents", 200, agents, |out| {
        let load: Value =
            serde_json::from_slice(&std::fs::read(out.join("load.json")).unwrap()).unwrap();
        assert_eq!(load["incomplete"], false);
        let agents = load["agents"].as_array().expect("the agents in load.json");
        let mut names: Vec<&str> = agents.iter().map(|a| a["name"].as_str().unwrap()).collect();
        names.sort_unstable();
        assert_eq!(names, ["agent-1", "agent-2"]);
        for agent in agents {
            assert_eq!(agent["lost"], false);
            assert_eq!(agent["players"][1], 100);
            assert!(!agent["health"].as_array().unwrap().is_empty());
        }
        for log in ["logs/agent-1.log", "logs/agent-2.log"] {
            assert!(out.join(log).is_file(), "{log} is missing");
        }
        // Both agents' players were welcomed into the history, on connections of their own.
        let history = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
        let welcomed: std::collections::BTreeSet<u64> = history
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|event| event["kind"] == "player" && event["fact"]["kind"] == "welcome")
            .map(|event| event["account"].as_u64().unwrap())
            .collect();
        assert!(
            welcomed.len() >= 200,
            "{} accounts welcomed",
            welcomed.len()
        );
    });
}

/// The shipped upgrade with the workspace's `anyplay-cloud` binary as the candidate (the
/// plan's `git: HEAD` would build one for minutes): every check passes across the mixed
/// cluster (its two riders' included), each node's versions over time are in the history, and
/// the faults table says where each upgrade went.
#[test]
fn an_upgrade_and_a_rollback_pass_and_each_node_s_versions_are_recorded() {
    let cloud =
        std::path::Path::new(env!("CARGO_BIN_EXE_anyplay-chaos")).with_file_name("anyplay-cloud");
    assert!(
        cloud.is_file(),
        "{} is missing: build the workspace first (cargo build --release --workspace)",
        cloud.display()
    );
    let candidate = |plan: &mut serde_yaml::Value| {
        plan["versions"]["candidate"] =
            serde_yaml::from_str(&format!("{{binary: {}}}", cloud.display())).unwrap();
        // The shipped timeline, sooner: each node upgraded in turn, then node-1 rolled back.
        plan["timeline"] = serde_yaml::from_str(
            "[{at: 5s, upgrade: nodes, to: candidate, gap: 1s}, {at: 25s, upgrade: node-1, to: built-in}]",
        )
        .unwrap();
        // The shipped budgets are a release machine's; three runs at once on two cores take
        // seconds for what takes milliseconds alone. The gates are judged the same way.
        plan["checks"]["latency"] = serde_yaml::from_str(
            "{e2e_login: {p99: 10s}, presence_delivery: {p99: 10s, during: outside_faults}, \
             friends_list: {p95: 3s}}",
        )
        .unwrap();
        // Its riders ride through that, sooner too: a client still running at the end fails.
        for client in plan["clients"].as_sequence_mut().unwrap() {
            let cmd = client["cmd"]
                .as_str()
                .unwrap()
                .replace("--for 110s", "--for 30s");
            client["cmd"] = cmd.into();
        }
    };
    passes_with("upgrade", "upgrade", 200, candidate, |out| {
        let history = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
        let mut versions: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for event in history
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|event| event["kind"] == "service_start")
        {
            if let Some(version) = event["version"].as_str() {
                versions
                    .entry(event["service"].as_str().unwrap().to_owned())
                    .or_default()
                    .push(version.to_owned());
            }
        }
        assert_eq!(versions["node-1"], ["built-in", "candidate", "built-in"]);
        assert_eq!(versions["node-2"], ["built-in", "candidate"]);
        assert_eq!(versions["node-3"], ["built-in", "candidate"]);
        let report = report(out);
        let upgrades: Vec<(&str, &str)> = report["faults"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["action"] == "upgrade")
            .map(|f| (f["target"].as_str().unwrap(), f["to"].as_str().unwrap()))
            .collect();
        assert_eq!(upgrades, [("nodes", "candidate"), ("node-1", "built-in")]);
        for gate in [
            "client:rider-1",
            "client:rider-2",
            "latency.e2e_login",
            "latency.presence_delivery",
            "latency.friends_list",
        ] {
            assert!(
                report["checks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c["name"] == gate),
                "{gate} missing"
            );
        }
        let page = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(page.contains(r#"data-version="candidate""#));
    });
}

#[test]
fn dependency_faults_pass_on_postgres_and_nats() {
    passes("dependency-faults", 200);
}

#[test]
fn network_faults_pass_on_postgres_and_nats() {
    passes("network-faults", 200);
}

#[test]
fn resource_faults_pass_on_processes() {
    passes("resource-faults", 200);
}

#[test]
fn nodes_outlive_restarts_of_nats_and_postgres() {
    let _turn = a_run_turn();
    let dir = scratch("dependency-restarts");
    let plan = reduced_plan("dependency-restarts", &dir, 100, "15s");
    let out = dir.join("run");
    let output = run_plan(&plan, &out, &[]);
    assert_passed(&output, "dependency-restarts");
    // After the last restart was done, presence changes still reached friends, who are
    // spread over both nodes (so through NATS), and the nodes answered calls.
    let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    let after: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .skip_while(|e| !(e["kind"] == "action_end" && e["target"] == "postgres"))
        .collect();
    assert!(!after.is_empty(), "the postgres restart never ended");
    assert!(
        after
            .iter()
            .any(|e| e["fact"]["kind"] == "received" && e["fact"]["event"]["kind"] == "presence"),
        "no presence delivered after the restarts"
    );
    assert!(
        after.iter().any(|e| e["kind"] == "load_tick"
            && e["http_calls"].as_u64() > Some(0)
            && e["http_errors"] == 0),
        "the nodes did not serve again"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every process whose command line names `dir`, or PostgreSQL's files that `dir/postgres`
/// may link to (outside the run directory under root).
fn processes_under(dir: &Path) -> Vec<String> {
    let postgres = dir
        .join("postgres")
        .canonicalize()
        .unwrap_or_else(|_| dir.to_owned());
    let mut found = processes_naming(dir);
    if postgres != dir {
        found.extend(processes_naming(&postgres));
    }
    found
}

fn processes_naming(dir: &Path) -> Vec<String> {
    let needle = dir.to_str().unwrap();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let cwd = std::fs::read_link(entry.path().join("cwd")).unwrap_or_default();
        if cmdline.contains(needle) || cwd.starts_with(dir) {
            found.push(format!("{pid}: {cmdline}"));
        }
    }
    found
}

#[test]
fn a_sigkilled_supervisor_leaves_no_process_behind() {
    let _turn = a_run_turn();
    let dir = scratch("sigkill");
    let plan = reduced_plan("node-crash", &dir, 50, "5s");
    // A client whose background child the parent-death signal alone would not reach.
    let mut yaml: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    yaml["clients"] = serde_yaml::from_str(
        "[{name: forker, cmd: 'sleep 300 & echo $! > {out}/pid; wait', expect_exit: 0}]",
    )
    .unwrap();
    std::fs::write(&plan, serde_yaml::to_string(&yaml).unwrap()).unwrap();
    let out = dir.join("run");
    // Wait until the whole topology is up and players play.
    let mut supervisor = start_until(&plan, &out, "timeline_start");
    assert!(
        !processes_under(&out).is_empty(),
        "the topology runs under the run directory"
    );
    let pid_file = out.join("clients/forker/pid");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&pid_file).is_ok_and(|pid| pid.ends_with('\n')) {
        assert!(
            Instant::now() < deadline,
            "the client never started its child"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    supervisor.kill().unwrap();
    supervisor.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = processes_under(&out);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "processes left after the supervisor died:\n{}",
            left.join("\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A local agent SIGKILLed during the timeline: the run names it, records it lost, judges
/// no player check (each `unknown`, naming the agent), says `incomplete`, and fails.
#[test]
fn a_killed_local_agent_is_named_and_leaves_the_player_checks_unknown() {
    let _turn = a_run_turn();
    let dir = scratch("agent-killed");
    let plan = reduced_plan_with("node-crash", &dir, 100, "5s", |plan| {
        plan["load"]["agents"] = 2.into();
        plan["load"]["agents_local"] = true.into();
    });
    let out = dir.join("run");
    let mut supervisor = start_until(&plan, &out, "timeline_start");
    // The run's agent-2: this supervisor's child started in the run directory.
    let run_dir = out.canonicalize().unwrap();
    let agent = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .find(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
            String::from_utf8_lossy(&cmdline).contains("agent-2") && cwd.as_ref() == Some(&run_dir)
        })
        .expect("agent-2 of the run is running");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(agent),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let status = supervisor.wait().unwrap();
    assert_eq!(status.code(), Some(1), "a run that lost an agent fails");
    let report = report(&out);
    for check in report["checks"].as_array().unwrap() {
        assert_eq!(check["result"], "unknown", "{check}");
        assert!(
            check["detail"].as_str().unwrap().contains("agent-2"),
            "{check}"
        );
    }
    let load: Value =
        serde_json::from_slice(&std::fs::read(out.join("load.json")).unwrap()).unwrap();
    assert_eq!(load["incomplete"], true);
    let history = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    assert!(history.contains(r#""kind":"agent_lost","agent":"agent-2""#));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts `plan`, waits until its history holds an event of `kind`, and returns the
/// supervisor.
fn start_until(plan: &Path, out: &Path, kind: &str) -> std::process::Child {
    let mut supervisor = chaos(&[
        "run",
        plan.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let marker = format!(r#""kind":"{kind}""#);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap_or_default();
        if events.contains(&marker) {
            return supervisor;
        }
        assert!(
            Instant::now() < deadline,
            "the run never got going:\n{events}"
        );
        assert!(
            supervisor.try_wait().unwrap().is_none(),
            "the supervisor ended early"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn interrupt(supervisor: &std::process::Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(supervisor.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
}

/// Waits (bounded) for the supervisor to end; how long it took.
fn ends_within(supervisor: &mut std::process::Child, limit: Duration) -> Duration {
    let since = Instant::now();
    loop {
        if supervisor.try_wait().unwrap().is_some() {
            return since.elapsed();
        }
        if since.elapsed() > limit {
            let _ = supervisor.kill();
            panic!("the supervisor still ran {limit:?} after the interrupt");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Regression (issue 12): Ctrl-C in the middle of a lasting partition read every player's
/// final state one by one through the still-cut link, 10 s a player (minutes to hours), and a
/// second Ctrl-C did nothing. Now the links heal first, the reads are bounded as a whole, and
/// a second signal ends the run at once; either way the report covers what ran.
#[test]
fn ctrl_c_in_a_lasting_partition_ends_soon_and_a_second_one_at_once() {
    let _turn = a_run_turn();
    let dir = scratch("interrupt");
    let plan = reduced_plan("players-partition", &dir, 60, "5s");
    let mut yaml: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    yaml["timeline"] =
        serde_yaml::from_str("[{at: 2s, partition: [players, node-1], for: 10m}]").unwrap();
    std::fs::write(&plan, serde_yaml::to_string(&yaml).unwrap()).unwrap();

    let out = dir.join("once");
    let mut supervisor = start_until(&plan, &out, "action_start");
    std::thread::sleep(Duration::from_secs(2));
    interrupt(&supervisor);
    let took = ends_within(&mut supervisor, Duration::from_secs(90));
    assert!(
        out.join("report.json").is_file(),
        "no report after {took:?}"
    );

    let out = dir.join("twice");
    let mut supervisor = start_until(&plan, &out, "action_start");
    std::thread::sleep(Duration::from_secs(2));
    // PostgreSQL's files live in a scratch directory the run dir links to.
    let postgres_files = std::fs::read_link(out.join("postgres")).expect("postgres is linked");
    assert!(postgres_files.is_dir());
    interrupt(&supervisor);
    std::thread::sleep(Duration::from_millis(300));
    interrupt(&supervisor);
    ends_within(&mut supervisor, Duration::from_secs(15));
    assert!(
        out.join("report.json").is_file(),
        "no report after a second interrupt"
    );
    // Stopping at once still removes what the run made.
    assert!(
        !postgres_files.exists(),
        "{} left behind",
        postgres_files.display()
    );
    assert!(
        processes_under(&out).is_empty(),
        "{:?}",
        processes_under(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The namespaces `ip netns` lists now.
fn namespaces() -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip runs (iproute2)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// `plans/hosts.yaml`: its first run SIGKILLed once the players play leaves its namespaces
/// behind; the next run says it removes them, removes them, passes with every service on a
/// netns host of its own and the firewall partitions, shows each host in report.html, and
/// leaves nothing of its own behind.
#[test]
fn netns_hosts_pass_firewall_partitions_and_a_killed_runs_leftovers_go() {
    let _turn = a_run_turn();
    let dir = scratch("hosts");
    let plan = reduced_plan("hosts", &dir, 200, "10s");
    let before = namespaces();

    let mut killed = start_until(&plan, &dir.join("killed"), "timeline_start");
    let left: Vec<String> = namespaces()
        .into_iter()
        .filter(|ns| ns.starts_with("anyplay-") && !before.contains(ns))
        .collect();
    assert_eq!(left.len(), 5, "one namespace per host: {left:?}");
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert!(
        left.iter().all(|ns| namespaces().contains(ns)),
        "a SIGKILLed supervisor cannot remove its namespaces"
    );

    let out = dir.join("run");
    let output = run_plan(&plan, &out, &[]);
    assert_passed(&output, "hosts");
    let now = namespaces();
    assert!(
        now.iter().all(|ns| before.contains(ns)),
        "namespaces left: {now:?}"
    );
    // Every run sweeps what dead runs left, so a run of another test that starts between the
    // kill and this run may sweep them first and say so on its own stderr; that they are gone
    // (above) is the property, and this run says so whenever the sweep was its own.
    let stderr = String::from_utf8_lossy(&output.stderr);
    let reported = |ns: &String| {
        stderr.contains(&format!(
            "removed network namespace {ns}, left by a run that died"
        ))
    };
    assert!(
        left.iter().all(reported) || !left.iter().any(reported),
        "some of {left:?} not reported removed:\n{stderr}"
    );
    let history = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    assert_eq!(history.matches(r#""via":"firewall""#).count(), 3);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<h2>Hosts</h2>"), "report.html has no hosts");
    for (host, services) in [
        ("db", "postgres"),
        ("bus", "nats"),
        ("a", "node-1"),
        ("b", "node-2"),
        ("c", "node-3"),
    ] {
        assert!(
            html.contains(&format!("<td>{host}</td><td>netns</td><td>10.213.")),
            "{host} missing from report.html"
        );
        assert!(html.contains(&format!("<td>{services}</td>")));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
