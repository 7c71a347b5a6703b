//! What a plan has the supervisor, root, run or reach beyond its own parts: shell commands,
//! environment and arguments handed to the services (`LD_PRELOAD`, `archive_command`), a
//! binary or a build of its choosing, a remote Docker engine. A plan one wrote is trusted with
//! them; a recorded one (`rerun DIR`: a run directory may come from anywhere) only when told
//! `--trust-plan`.

use super::{Host, Plan, VersionSource};

impl Plan {
    /// Each part that needs trust, as the plan writes it (`services.nats.args: --pid f`).
    pub fn needs_trust(&self) -> Vec<String> {
        let mut parts: Vec<String> = self
            .clients
            .iter()
            .map(|c| format!("clients.{}: {}", c.name, c.cmd))
            .collect();
        let env = |env: &std::collections::BTreeMap<String, String>| {
            let pairs: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            pairs.join(" ")
        };
        if !self.services.nodes.env.is_empty() {
            parts.push(format!(
                "services.nodes.env: {}",
                env(&self.services.nodes.env)
            ));
        }
        for (name, dependency) in [
            ("postgres", &self.services.postgres),
            ("nats", &self.services.nats),
        ] {
            if let Some(args) = dependency
                .as_ref()
                .map(|d| &d.args)
                .filter(|a| !a.is_empty())
            {
                parts.push(format!("services.{name}.args: {}", args.join(" ")));
            }
        }
        for (name, version) in &self.versions {
            match &version.source {
                VersionSource::Binary(path) => {
                    parts.push(format!("versions.{name}.binary: {}", path.display()))
                }
                VersionSource::Git(revision) => {
                    parts.push(format!("versions.{name}.git: {revision}"))
                }
                VersionSource::Image(_) | VersionSource::BuiltIn => {}
            }
            if !version.env.is_empty() {
                parts.push(format!("versions.{name}.env: {}", env(&version.env)));
            }
        }
        for (name, host) in &self.hosts.declared {
            if let Host::Docker(engine) = host {
                parts.push(format!("hosts.{name}.docker: {}", engine.docker));
            }
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    use crate::plan::Plan;

    #[test]
    fn what_runs_beyond_the_plans_own_parts_is_named() {
        let plan = Plan::from_yaml(
            "name: x\nstore: postgres\nservices:\n  postgres: {args: [-c, archive_command=id]}\n  \
             nats: {args: [--pid, /etc/passwd]}\n  nodes: {count: 2, env: {LD_PRELOAD: /tmp/evil.so}}\n\
             versions:\n  old: {binary: /tmp/anyplay-cloud, env: {A: b}}\n  \
             new: {git: HEAD}\nload: {players: 2}\n\
             clients:\n  - {name: rider, cmd: echo hi}\n",
        )
        .unwrap();
        assert_eq!(
            plan.needs_trust(),
            [
                "clients.rider: echo hi",
                "services.nodes.env: LD_PRELOAD=/tmp/evil.so",
                "services.postgres.args: -c archive_command=id",
                "services.nats.args: --pid /etc/passwd",
                "versions.new.git: HEAD",
                "versions.old.binary: /tmp/anyplay-cloud",
                "versions.old.env: A=b",
            ]
        );
        let own = Plan::from_yaml("name: x\nload: {players: 2}\n").unwrap();
        assert!(own.needs_trust().is_empty());
    }
}
