//! `versions:`, `services.nodes.version` and `upgrade`'s `to`: every name declared, and each
//! version a build that the nodes it goes to can run (a binary or a commit as a process, an
//! image in a container).

use std::collections::BTreeMap;

use super::super::raw::{KeyPath, RawVersion};
use super::super::timeline::services_of;
use super::super::{
    Action, Backend, HostKind, Hosts, PlanError, Service, Target, Version, VersionName,
    VersionSource,
};
use super::Cx;

impl Cx<'_> {
    /// `versions:`: each entry one source, well formed, under a name of its own.
    pub(super) fn versions(
        &self,
        raw: &BTreeMap<String, RawVersion>,
    ) -> Result<BTreeMap<VersionName, Version>, PlanError> {
        let root = KeyPath::default().key("versions");
        let mut versions = BTreeMap::new();
        for (name, entry) in raw {
            let path = root.key(name);
            let parsed: VersionName = name.parse().map_err(|m| self.err(&path, m))?;
            if parsed == VersionName::BUILT_IN {
                return Err(self.err(
                    &path,
                    "`built-in` names the cloud inside anyplay-chaos; give this version another name".into(),
                ));
            }
            if entry.built_in == Some(false) {
                return Err(self.err(
                    &path.key("built-in"),
                    "`built-in: false` names no build: leave the key out and give another source"
                        .into(),
                ));
            }
            let built_in = entry.built_in.map(|_| String::new());
            let sources: Vec<(&str, &String)> = [
                ("binary", &entry.binary),
                ("image", &entry.image),
                ("git", &entry.git),
                ("built-in", &built_in),
            ]
            .into_iter()
            .filter_map(|(key, value)| value.as_ref().map(|v| (key, v)))
            .collect();
            let (key, text) = match sources.as_slice() {
                [one] => *one,
                [] => {
                    return Err(self.err(
                        &path,
                        "a version needs one of `binary: PATH`, `image: IMAGE`, `git: REV` or `built-in: true`".into(),
                    ))
                }
                [(first, _), (second, _), ..] => {
                    return Err(self.err(
                        &path.key(second),
                        format!("a version has one source, and this one has `{first}` already"),
                    ))
                }
            };
            let at = path.key(key);
            let blank = text.trim().is_empty() || text.chars().any(char::is_control);
            let source = match key {
                "built-in" => VersionSource::BuiltIn,
                "binary" if !blank => VersionSource::Binary(text.into()),
                "image" if !blank && !text.contains(char::is_whitespace) => {
                    VersionSource::Image(text.clone())
                }
                // Given to git as one argument: never an option, never two words.
                "git"
                    if !blank && !text.starts_with('-') && !text.contains(char::is_whitespace) =>
                {
                    VersionSource::Git(text.clone())
                }
                _ => return Err(self.err(&at, format!("`{text}` is not a {key} of a version"))),
            };
            let env = match &entry.env {
                Some(env) => self.env(env, &path.key("env"))?,
                None => BTreeMap::new(),
            };
            versions.insert(parsed, Version { source, env });
        }
        Ok(versions)
    }

    /// A version name where one is used: `built-in` or one of `versions`.
    pub(super) fn version_named(
        &self,
        text: &str,
        versions: &BTreeMap<VersionName, Version>,
        path: &KeyPath,
    ) -> Result<VersionName, PlanError> {
        let name: VersionName = text.parse().map_err(|m| self.err(path, m))?;
        if name != VersionName::BUILT_IN && !versions.contains_key(&name) {
            let mut known = vec![VersionName::BUILT_IN.to_string()];
            known.extend(versions.keys().map(|v| v.to_string()));
            return Err(self.err(
                path,
                format!("no version `{name}` (versions: {})", known.join(", ")),
            ));
        }
        Ok(name)
    }

    /// Refuses a version on nodes that cannot run it: a binary or a commit runs as a process
    /// (the process backend or a netns host), an image in a container (Docker); the built-in
    /// cloud runs anywhere.
    pub(super) fn runnable(
        &self,
        version: VersionName,
        nodes: Target,
        cx: &Runs<'_>,
        path: &KeyPath,
    ) -> Result<(), PlanError> {
        let Some(source) = cx.versions.get(&version).map(|v| &v.source) else {
            return Ok(());
        };
        for node in services_of(nodes, cx.count) {
            let in_container = cx.in_container(node);
            let fits = match source {
                VersionSource::BuiltIn => true,
                VersionSource::Image(_) => in_container,
                VersionSource::Binary(_) | VersionSource::Git(_) => !in_container,
            };
            if !fits {
                let (runs, needs) = match in_container {
                    true => ("in a container", "an `image`"),
                    false => ("as a process", "a `binary` or `git`"),
                };
                return Err(self.err(
                    path,
                    format!(
                        "{node} runs {runs}, and version `{version}` names a `{}`: it needs {needs}",
                        source.key()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// An `upgrade`'s version, declared and runnable on the nodes it goes to.
    pub(super) fn upgrade_runnable(
        &self,
        action: &Action,
        cx: &Runs<'_>,
        path: &KeyPath,
    ) -> Result<(), PlanError> {
        if let Action::Upgrade { target, to, .. } = action {
            let at = path.key("to");
            self.version_named(to.as_str(), cx.versions, &at)?;
            self.runnable(*to, *target, cx, &at)?;
        }
        Ok(())
    }
}

/// Where a plan's nodes run, for [`Cx::runnable`].
pub(super) struct Runs<'a> {
    pub versions: &'a BTreeMap<VersionName, Version>,
    pub hosts: &'a Hosts,
    pub backend: Backend,
    pub count: u32,
}

impl Runs<'_> {
    fn in_container(&self, node: Service) -> bool {
        match self.hosts.kind_of(node) {
            HostKind::Docker => true,
            HostKind::Netns => false,
            HostKind::Local => self.backend == Backend::Docker,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::plan::{Action, Plan, PlanError, Target, VersionName, VersionSource};

    const CLUSTER: &str = "name: up\nstore: postgres\nservices:\n  postgres: {}\n  nats: {}\n";

    fn plan(versions: &str, nodes: &str, timeline: &str) -> Result<Plan, PlanError> {
        Plan::from_yaml(&format!(
            "{CLUSTER}  nodes: {{count: 2{nodes}}}\n{versions}load: {{players: 10}}\ntimeline:\n{timeline}"
        ))
    }

    fn refusal(result: Result<Plan, PlanError>) -> (usize, String, String) {
        match result {
            Err(PlanError::Invalid { line, key, message }) => (line, key, message),
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn an_upgrade_names_its_nodes_version_and_gap_and_prints_back() {
        let plan = plan(
            "versions:\n  current: {binary: /opt/anyplay/1.4.2/anyplay-cloud}\n  candidate: {git: main, env: {RUST_LOG: debug}}\n",
            ", version: current",
            "  - {at: 20s, upgrade: nodes, to: candidate, gap: 2s}\n  - {at: 70s, upgrade: node-1, to: current}\n",
        )
        .unwrap();
        let current: VersionName = "current".parse().unwrap();
        let candidate: VersionName = "candidate".parse().unwrap();
        assert_eq!(plan.services.nodes.version, current);
        assert_eq!(
            plan.versions[&candidate].source,
            VersionSource::Git("main".into())
        );
        assert_eq!(plan.versions[&candidate].env["RUST_LOG"], "debug");
        assert_eq!(
            plan.timeline[0].action,
            Action::Upgrade {
                target: Target::Nodes,
                to: candidate,
                gap: std::time::Duration::from_secs(2),
            }
        );
        assert_eq!(
            plan.timeline[1].action.to_string(),
            "upgrade node-1 to current, gap 0s"
        );
        let again = Plan::from_yaml(&plan.to_yaml()).unwrap();
        assert_eq!(
            (&again.versions, &again.services),
            (&plan.versions, &plan.services)
        );
        let actions = |p: &Plan| p.timeline.iter().map(|e| e.action).collect::<Vec<_>>();
        assert_eq!(actions(&again), actions(&plan));
    }

    #[test]
    fn the_built_in_cloud_is_a_version_without_being_declared() {
        let rollback = plan(
            "versions:\n  candidate: {binary: /opt/cloud}\n",
            "",
            "  - {at: 5s, upgrade: nodes, to: candidate}\n  - {at: 30s, upgrade: node-2, to: built-in}\n",
        )
        .unwrap();
        assert_eq!(rollback.services.nodes.version, VersionName::BUILT_IN);
        assert!(rollback.to_yaml().contains("to: built-in"));
        // The built-in cloud under another environment: a configuration rolled out.
        let flagged_plan = plan(
            "versions:\n  flagged: {built-in: true, env: {ANYPLAY_FLAG: on}}\n",
            "",
            "  - {at: 5s, upgrade: nodes, to: flagged}\n",
        )
        .unwrap();
        let flagged: VersionName = "flagged".parse().unwrap();
        assert_eq!(
            flagged_plan.versions[&flagged].source,
            VersionSource::BuiltIn
        );
        let text = flagged_plan.to_yaml();
        assert!(text.contains("built-in: true"), "{text}");
        assert_eq!(
            Plan::from_yaml(&text).unwrap().versions,
            flagged_plan.versions
        );
    }

    #[test]
    fn every_refusal_names_its_line_and_key() {
        let (line, key, message) = refusal(plan(
            "",
            "",
            "  - {at: 5s, upgrade: nodes, to: candidate}\n",
        ));
        assert_eq!((line, key.as_str()), (9, "timeline[0].to"));
        assert!(
            message.contains("no version `candidate` (versions: built-in)"),
            "{message}"
        );

        let (_, key, message) = refusal(plan("", ", version: current", ""));
        assert_eq!(key, "services.nodes.version");
        assert!(message.contains("no version `current`"), "{message}");

        let (_, key, message) = refusal(plan("versions:\n  c: {binary: /a, git: main}\n", "", ""));
        assert_eq!(key, "versions.c.git");
        assert!(message.contains("one source"), "{message}");

        let (_, key, _) = refusal(plan("versions:\n  c: {}\n", "", ""));
        assert_eq!(key, "versions.c");
        let (_, key, _) = refusal(plan("versions:\n  c: {built-in: false}\n", "", ""));
        assert_eq!(key, "versions.c.built-in");
        let (_, key, _) = refusal(plan(
            "versions:\n  c: {built-in: true, git: main}\n",
            "",
            "",
        ));
        assert_eq!(key, "versions.c.built-in");
        let (_, key, _) = refusal(plan("versions:\n  c: {git: --upload-pack=x}\n", "", ""));
        assert_eq!(key, "versions.c.git");
        let (_, key, _) = refusal(plan("versions:\n  built-in: {binary: /a}\n", "", ""));
        assert_eq!(key, "versions.built-in");
        let (_, key, message) = refusal(plan(
            "versions:\n  c: {binary: /a}\n",
            "",
            "  - {at: 5s, upgrade: postgres, to: c}\n",
        ));
        assert_eq!(key, "timeline[0].upgrade");
        assert!(message.contains("cannot aim at `postgres`"), "{message}");
        let (_, key, message) = refusal(plan(
            "versions:\n  c: {binary: /a}\n",
            "",
            "  - {at: 5s, upgrade: nodes}\n",
        ));
        assert_eq!(key, "timeline[0].to");
        assert!(message.contains("needs `to`"), "{message}");
        let (_, key, _) = refusal(plan(
            "versions:\n  c: {binary: /a}\n",
            "",
            "  - {at: 5s, upgrade: nodes, to: c, for: 3s}\n",
        ));
        assert_eq!(key, "timeline[0].for");
    }

    #[test]
    fn a_version_must_be_a_build_its_nodes_can_run() {
        let docker = |versions: &str, nodes: &str, timeline: &str| {
            Plan::from_yaml(&format!(
                "name: up\nbackend: docker\n{versions}services:\n  nodes: {{count: 1{nodes}}}\nload: {{players: 10}}\ntimeline:\n{timeline}"
            ))
        };
        let (_, key, message) =
            refusal(docker("versions:\n  c: {binary: /a}\n", ", version: c", ""));
        assert_eq!(key, "services.nodes.version");
        assert!(message.contains("node-1 runs in a container"), "{message}");
        assert!(docker(
            "versions:\n  c: {image: anyplay/node:next}\n",
            ", version: c",
            ""
        )
        .is_ok());
        // Containers move between images; a binary or a commit is for processes.
        assert!(docker(
            "versions:\n  c: {image: anyplay/node:next}\n",
            "",
            "  - {at: 5s, upgrade: nodes, to: c}\n",
        )
        .is_ok());
        let (_, key, _) = refusal(docker(
            "versions:\n  c: {git: main}\n",
            "",
            "  - {at: 5s, upgrade: nodes, to: c}\n",
        ));
        assert_eq!(key, "timeline[0].to");
        let (_, key, message) = refusal(plan(
            "versions:\n  c: {image: anyplay/node:next}\n",
            "",
            "  - {at: 5s, upgrade: nodes, to: c}\n",
        ));
        assert_eq!(key, "timeline[0].to");
        assert!(message.contains("runs as a process"), "{message}");
    }
}
