//! Runs spread over load agents: three `anyplay-load agent` processes and a coordinator
//! (`anyplay-load --agents 3 --nats ...`) meet on the NATS of `deploy/test-services.sh` and play
//! a two-node cluster of `anyplay-cloud` processes on its PostgreSQL. What the agents send the
//! coordinator is read off NATS too, to check the merge against the agents' own samples.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use hdrhistogram::Histogram;
use serde_json::Value;

use anyplay_load::agents::protocol::{self, Event, Phase, ScenarioResult};
use anyplay_load::agents::Coordinator;
use anyplay_load::measure::stats::ms;
use anyplay_load::seal::{self, Secret};

use crate::processes::{load, Cluster, LOAD};
use crate::support::{check_contract_fields, services, temp_path};

/// Idle agents take any coordinator's offer, so the two tests' agents must not meet on the
/// one NATS: they run one after the other.
static ONE_RUN_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The secret the tests' coordinators and agents share.
const SECRET: &str = "the tests' shared secret, not a real one";

/// A file holding [`SECRET`], for the coordinator's `--secret-file`.
fn secret_file() -> PathBuf {
    let path = temp_path("agents-secret");
    std::fs::write(&path, SECRET).expect("the secret file");
    path
}

/// An `anyplay-load agent` process, killed when dropped.
struct Agent {
    name: String,
    child: tokio::process::Child,
    log: PathBuf,
}

impl Agent {
    fn start(nats: &str, name: &str) -> Agent {
        Agent::start_with(nats, name, &[])
    }

    /// With more flags of its own.
    fn start_with(nats: &str, name: &str, flags: &[&str]) -> Agent {
        let log = temp_path(&format!("agent-{name}.log"));
        let child = tokio::process::Command::new(LOAD)
            .args(["agent", "--nats", nats, "--name", name])
            .args(flags)
            .env(seal::SECRET_ENV, SECRET)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("the agent's log"))
            .kill_on_drop(true)
            .spawn()
            .expect("anyplay-load agent starts");
        Agent {
            name: name.to_string(),
            child,
            log,
        }
    }

    /// Waits until it listens for offers.
    async fn listening(&self) {
        let waited = std::time::Instant::now();
        while !self.log().contains("waiting for work") {
            assert!(waited.elapsed() < Duration::from_secs(30), "{}", self.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// An agent's results of a phase, as it sent them.
type PhaseDone = (String, Phase, Vec<ScenarioResult>);

/// What the agents told the coordinator at the end of each phase, read off NATS.
#[derive(Clone, Default)]
struct Overheard(Arc<Mutex<Vec<PhaseDone>>>);

impl Overheard {
    async fn listen(nats: &str) -> Overheard {
        let client = async_nats::connect(nats).await.expect("NATS");
        let mut events = client
            .subscribe("anyplay.load.*.from.*")
            .await
            .expect("a subscription");
        let overheard = Overheard::default();
        let sink = overheard.clone();
        tokio::spawn(async move {
            let _client = client;
            while let Some(message) = events.next().await {
                let agent = message
                    .subject
                    .as_str()
                    .rsplit('.')
                    .next()
                    .unwrap_or("")
                    .to_string();
                let body = seal::unverified_body(&message.payload).unwrap_or_default();
                if let Ok(Event::PhaseDone { phase, results }) = protocol::decode(body) {
                    sink.0
                        .lock()
                        .expect("not poisoned")
                        .push((agent, phase, results));
                }
            }
        });
        // The subscription is in place once the server has seen it.
        tokio::time::sleep(Duration::from_millis(200)).await;
        overheard
    }

    fn done(&self, phase: Phase) -> usize {
        self.0
            .lock()
            .expect("not poisoned")
            .iter()
            .filter(|(_, p, _)| *p == phase)
            .count()
    }

    /// Every agent's result of scenario `name`.
    fn results(&self, name: &str) -> Vec<(String, ScenarioResult)> {
        self.0
            .lock()
            .expect("not poisoned")
            .iter()
            .flat_map(|(agent, _, results)| results.iter().map(move |r| (agent.clone(), r.clone())))
            .filter(|(_, r)| r.scenario == name)
            .collect()
    }
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn read_report(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("the --json report");
    let _ = std::fs::remove_file(path);
    serde_json::from_str(&text).expect("JSON")
}

fn args(flags: &[&str], cluster: &Cluster, nats: &str, json: &Path) -> Vec<String> {
    let mut args: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    args.extend(["--agents", "3", "--nats", nats].map(String::from));
    args.extend([
        "--secret-file".to_string(),
        secret_file().display().to_string(),
    ]);
    args.extend(cluster.flags());
    args.extend(["--json".to_string(), json.display().to_string()]);
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_agents_merge_into_the_histogram_of_all_their_samples() {
    let _alone = ONE_RUN_AT_A_TIME.lock().await;
    let services = services();
    let cluster = Cluster::start(&services, "clean", &[]).await;
    let agents: Vec<Agent> = ["c1", "c2", "c3"]
        .iter()
        .map(|n| Agent::start(&services.nats_url, n))
        .collect();
    let overheard = Overheard::listen(&services.nats_url).await;
    let json = temp_path("agents-clean.json");
    let flags = [
        "--players",
        "90",
        "--rate",
        "100",
        "--friends",
        "4",
        "--scenarios",
        "presence,cards,storm",
        "--presence-rate",
        "30",
        "--presence-seconds",
        "2",
        "--cards-rate",
        "30",
        "--cards-seconds",
        "2",
        "--storm-timeout",
        "30",
    ];
    let out = load(&args(&flags, &cluster, &services.nats_url, &json)).await;
    let logs: Vec<String> = agents
        .iter()
        .map(|a| format!("{}:\n{}", a.name, a.log()))
        .collect();
    assert!(
        out.status.success(),
        "{}\nagents:\n{}",
        text(&out),
        logs.join("\n")
    );
    let report = read_report(&json);
    check_contract_fields(&report);
    assert_eq!(report["incomplete"], false);

    // Each agent plays a third of the players, numbered on from the one before.
    let shares: Vec<(String, Value)> = report["agents"]
        .as_array()
        .expect("the agents")
        .iter()
        .map(|a| {
            (
                a["name"].as_str().expect("a name").to_string(),
                a["players"].clone(),
            )
        })
        .collect();
    let mut firsts: Vec<u64> = shares
        .iter()
        .map(|(_, p)| p[0].as_u64().expect("first"))
        .collect();
    firsts.sort();
    assert_eq!(firsts, [0, 30, 60], "{shares:?}");
    for agent in report["agents"].as_array().expect("the agents") {
        assert_eq!(agent["lost"], false, "{agent}");
        assert_eq!(agent["players"][1], 30, "{agent}");
        assert!(agent["rtt_ms"].as_f64() >= Some(0.0), "{agent}");
        assert!(agent["clock_offset_ms"].is_number(), "{agent}");
        let health = agent["health"].as_array().expect("health");
        assert!(!health.is_empty(), "{agent}");
        for key in [
            "t",
            "sched_lag_ms_p99",
            "cpu",
            "rss_mb",
            "connections",
            "send_queue",
        ] {
            assert!(
                health[0].get(key).is_some(),
                "health has no {key}: {}",
                health[0]
            );
        }
    }

    let scenario = |name: &str| {
        report["scenarios"]
            .as_array()
            .expect("scenarios")
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {report}"))
            .clone()
    };
    assert_eq!(scenario("login")["players"]["online"], 90);
    assert_eq!(scenario("login")["ops"]["e2e_login"]["ok"], 90);
    let storm = &scenario("storm")["storm"];
    assert_eq!(storm["players_hit"], 90, "{storm}");
    assert_eq!(storm["players_back"], 90, "{storm}");

    // The merged figures are those of all the agents' samples together.
    for name in ["login", "friends", "presence", "cards", "storm"] {
        let merged = scenario(name);
        let parts = overheard.results(name);
        let mut from: Vec<&str> = parts.iter().map(|(agent, _)| agent.as_str()).collect();
        from.sort();
        assert_eq!(from, ["c1", "c2", "c3"], "{name}");
        let ops = merged["ops"].as_object().expect("ops");
        assert!(!ops.is_empty(), "{name}");
        for (op, figures) in ops {
            let mut union: Option<Histogram<u64>> = None;
            let mut count = 0;
            for (_, part) in &parts {
                let Some(wire) = part.ops.get(op) else {
                    continue;
                };
                count += wire.count;
                let h = wire.latency.decode().expect("a histogram");
                match &mut union {
                    Some(u) => u.add(&h).expect("same shape"),
                    None => union = Some(h),
                }
            }
            let union = union.expect("some agent recorded the op");
            assert_eq!(figures["count"].as_u64(), Some(count), "{name}.{op}");
            assert_eq!(union.len(), count, "{name}.{op}");
            for (key, q) in [("p50_ms", 0.5), ("p95_ms", 0.95), ("p99_ms", 0.99)] {
                assert_eq!(
                    figures[key].as_f64(),
                    Some(ms(union.value_at_quantile(q))),
                    "{name}.{op}.{key}"
                );
            }
            assert_eq!(
                figures["max_ms"].as_f64(),
                Some(ms(union.max())),
                "{name}.{op}"
            );
        }
        let calls: u64 = merged["series"]
            .as_array()
            .expect("series")
            .iter()
            .map(|s| s["calls"].as_u64().expect("calls"))
            .sum();
        let sent: u64 = parts
            .iter()
            .flat_map(|(_, p)| p.series.iter().map(|s| s.calls))
            .sum();
        assert_eq!(calls, sent, "{name}: series calls");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_mid_run_is_named_and_the_run_is_incomplete() {
    let _alone = ONE_RUN_AT_A_TIME.lock().await;
    let services = services();
    let cluster = Cluster::start(&services, "killed", &[]).await;
    let mut agents: Vec<Agent> = ["k1", "k2", "k3"]
        .iter()
        .map(|n| Agent::start(&services.nats_url, n))
        .collect();
    let overheard = Overheard::listen(&services.nats_url).await;
    let json = temp_path("agents-killed.json");
    let flags = [
        "--players",
        "60",
        "--rate",
        "100",
        "--friends",
        "4",
        "--scenarios",
        "presence,storm",
        "--presence-rate",
        "20",
        "--presence-seconds",
        "12",
        "--storm-timeout",
        "20",
    ];
    let coordinator_args = args(&flags, &cluster, &services.nats_url, &json);
    let coordinator = tokio::spawn(async move { load(&coordinator_args).await });
    // Once the warm-up is over, the presence phase starts within seconds and runs for 12.
    let waited = std::time::Instant::now();
    while overheard.done(Phase::WarmUp) < 3 {
        assert!(
            waited.elapsed() < Duration::from_secs(90),
            "no warm-up from all three agents"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    agents[1].child.start_kill().expect("SIGKILL to k2");

    let out = coordinator.await.expect("the coordinator's task");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        stderr.contains("agent \"k2\" stopped answering at") && stderr.contains("incomplete"),
        "{}",
        text(&out)
    );
    let report = read_report(&json);
    assert_eq!(report["incomplete"], true);
    for agent in report["agents"].as_array().expect("the agents") {
        let lost = agent["name"] == "k2";
        assert_eq!(agent["lost"], lost, "{agent}");
        assert_eq!(agent.get("lost_at_s").is_some(), lost, "{agent}");
    }
    // What the others measured is still there: the run is smaller, and says so.
    let scenarios = report["scenarios"].as_array().expect("scenarios");
    let names: Vec<&str> = scenarios
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["login", "friends", "presence", "storm"]);
    assert_eq!(scenarios[0]["players"]["online"], 60);
    assert_eq!(scenarios[3]["storm"]["players_hit"], 40, "{}", scenarios[3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_agents_is_an_error_that_says_who_answered() {
    let _alone = ONE_RUN_AT_A_TIME.lock().await;
    let services = services();
    let agent = Agent::start(&services.nats_url, "only");
    // The agent is listening once it says so.
    let waited = std::time::Instant::now();
    while !agent.log().contains("waiting for work") {
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "{}",
            agent.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let secret = Secret::new(SECRET.into()).expect("the tests' secret");
    let recruited = Coordinator::recruit(
        &services.nats_url,
        None,
        None,
        2,
        Duration::from_secs(3),
        &secret,
    )
    .await;
    let e = recruited.err().expect("one agent is not two");
    assert!(
        e.to_string().contains("1 of 2 load agents answered") && e.to_string().contains("only"),
        "{e}"
    );
}

/// Issue 30: an agent obeyed anyone on its NATS. It now needs the secret to start at all.
#[tokio::test]
async fn an_agent_without_the_secret_does_not_start() {
    let services = services();
    let out = tokio::process::Command::new(LOAD)
        .args(["agent", "--nats", &services.nats_url, "--name", "nosecret"])
        .env_remove(seal::SECRET_ENV)
        .output()
        .await
        .expect("anyplay-load agent runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no secret"), "{stderr}");
}

/// A coordinator that lacks the agents' secret recruits nobody, and each agent says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_without_the_secret_recruits_nobody() {
    let _alone = ONE_RUN_AT_A_TIME.lock().await;
    let services = services();
    let agent = Agent::start(&services.nats_url, "guarded");
    agent.listening().await;
    let wrong = Secret::new(b"somebody else's secret".to_vec()).expect("a secret");
    let recruited = Coordinator::recruit(
        &services.nats_url,
        None,
        None,
        1,
        Duration::from_secs(3),
        &wrong,
    )
    .await;
    let e = recruited.err().expect("nobody answers");
    assert!(e.to_string().contains("0 of 1 load agents answered"), "{e}");
    assert!(agent.log().contains("ignored an offer"), "{}", agent.log());
    // With the secret, the same agent answers.
    let right = Secret::new(SECRET.into()).expect("the tests' secret");
    let recruited = Coordinator::recruit(
        &services.nats_url,
        None,
        None,
        1,
        Duration::from_secs(10),
        &right,
    )
    .await;
    assert!(recruited.is_ok(), "{:?}", recruited.err());
}

/// A genuine offer played again by someone on the agents' NATS takes no agent, and messages
/// without the secret on an agent's own subject do not keep it from its next coordinator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offer_played_again_or_junk_on_its_subject_holds_no_agent() {
    let _alone = ONE_RUN_AT_A_TIME.lock().await;
    let services = services();
    let agent = Agent::start(&services.nats_url, "replayed");
    agent.listening().await;
    let spy = async_nats::connect(&services.nats_url).await.expect("NATS");
    let mut offers = spy.subscribe(protocol::ANY_OFFER).await.expect("subscribe");
    let secret = Secret::new(SECRET.into()).expect("the tests' secret");
    // Two wanted, one there: the agent answers an offer and is never assigned.
    let recruited = Coordinator::recruit(
        &services.nats_url,
        None,
        None,
        2,
        Duration::from_secs(2),
        &secret,
    )
    .await;
    assert!(recruited.is_err(), "one agent is not two");
    let captured = offers.next().await.expect("an offer was sent");
    let run = captured
        .subject
        .as_str()
        .split('.')
        .nth(2)
        .expect("a run")
        .to_owned();
    // While it waits to be assigned, junk on its own subject, then the captured offer again.
    let junk_subject = protocol::to_agent(&run, "replayed");
    let junk = tokio::spawn({
        let spy = spy.clone();
        async move {
            for _ in 0..15 {
                let _ = spy.publish(junk_subject.clone(), "junk".into()).await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    });
    tokio::time::sleep(Duration::from_secs(12)).await;
    let inbox = spy.new_inbox();
    let mut answers = spy.subscribe(inbox.clone()).await.expect("subscribe");
    spy.publish_with_reply(captured.subject.clone(), inbox, captured.payload.clone())
        .await
        .expect("publish");
    let answered = tokio::time::timeout(Duration::from_secs(2), answers.next()).await;
    assert!(
        answered.is_err(),
        "the agent answered an offer played again"
    );
    // The junk still flows; a coordinator of its own finds the agent free.
    let recruited = Coordinator::recruit(
        &services.nats_url,
        None,
        None,
        1,
        Duration::from_secs(5),
        &secret,
    )
    .await;
    junk.abort();
    assert!(recruited.is_ok(), "{:?}\n{}", recruited.err(), agent.log());
    assert!(agent.log().contains("played again"), "{}", agent.log());
}

/// An agent plays only against the targets its own command line allows, whoever offers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_refuses_a_target_outside_its_allowlist() {
    let _alone = ONE_RUN_AT_A_TIME.lock().await;
    let services = services();
    let cluster = Cluster::start(&services, "allow", &[]).await;
    let agent = Agent::start_with(
        &services.nats_url,
        "fenced",
        &["--allow-target", "127.0.0.2/32"],
    );
    agent.listening().await;
    let mut args: Vec<String> = [
        "--players",
        "4",
        "--friends",
        "2",
        "--rate",
        "50",
        "--scenarios",
        "login",
    ]
    .map(String::from)
    .to_vec();
    args.extend(["--agents", "1", "--nats", &services.nats_url].map(String::from));
    args.extend([
        "--secret-file".to_string(),
        secret_file().display().to_string(),
    ]);
    args.extend(cluster.flags());
    let out = load(&args).await;
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("allow-target"), "{}", text(&out));
    assert!(agent.log().contains("refused"), "{}", agent.log());
}
