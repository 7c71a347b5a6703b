//! The builds a run's nodes may run, one per version of the plan, ready before anything
//! starts: the cloud inside this binary (`built-in`), a binary on this machine, an image, or
//! a commit of the repository the run starts in, built once into a cache and reused.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::backend::{Command, Program};
use crate::plan::{ImageSlot, Plan, Version, VersionName, VersionSource};

use super::images;

/// What one version runs.
#[derive(Debug, Clone)]
pub struct Build {
    program: Program,
    /// The built-in cloud is this binary's hidden `node` command; a cloud binary or a node
    /// image's entrypoint is the node itself.
    subcommand: bool,
    /// The version's own environment, over the nodes'.
    env: BTreeMap<String, String>,
}

impl Build {
    /// `base` (a node's arguments and environment, any program) made to run this build.
    pub fn command(&self, base: &Command) -> Command {
        let mut command = Command {
            program: self.program.clone(),
            args: Vec::with_capacity(base.args.len() + 1),
            ..base.clone()
        };
        if self.subcommand {
            command.args.push("node".into());
        }
        command.args.extend(base.args.iter().cloned());
        for (key, value) in &self.env {
            command = command.env(key.clone(), value.clone());
        }
        command
    }
}

/// Why a version could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("version `{version}`: {path}: {problem}")]
    Binary {
        version: VersionName,
        path: PathBuf,
        problem: String,
    },
    #[error("version `{version}` (git {rev}): {problem}")]
    Git {
        version: VersionName,
        rev: String,
        problem: String,
    },
    #[error("cannot find this program to run nodes with: {0}")]
    ThisProgram(#[source] std::io::Error),
}

/// Every version of a plan, ready to run, by name.
#[derive(Debug, Clone)]
pub struct Builds {
    /// The built-in cloud as a process: this binary.
    this_program: PathBuf,
    /// The built-in cloud in a container: the plan's node image.
    node_image: String,
    /// The environment of each version that is the built-in cloud (`built-in: true`).
    built_in_env: BTreeMap<VersionName, BTreeMap<String, String>>,
    versions: BTreeMap<VersionName, Build>,
}

impl Builds {
    /// Makes every version of `plan` ready, a `git:` one built if the cache lacks it.
    pub async fn prepare(plan: &Plan) -> Result<Builds, BuildError> {
        let mut builds = BTreeMap::new();
        for (&name, version) in &plan.versions {
            let Version { source, env } = version;
            let program = match source {
                // Made at `of`, where it is known whether the node is a container.
                VersionSource::BuiltIn => continue,
                VersionSource::Image(image) => Program::Image(image.clone()),
                VersionSource::Binary(path) => trusted_binary(name, path)?.into(),
                VersionSource::Git(rev) => {
                    let (name, rev) = (name, rev.clone());
                    tokio::task::spawn_blocking(move || built_commit(name, &rev))
                        .await
                        .expect("the build does not panic")?
                        .into()
                }
            };
            builds.insert(
                name,
                Build {
                    program,
                    subcommand: false,
                    env: env.clone(),
                },
            );
        }
        Ok(Builds {
            this_program: std::env::current_exe().map_err(BuildError::ThisProgram)?,
            node_image: images::image(plan, ImageSlot::Nodes),
            built_in_env: plan
                .versions
                .iter()
                .filter(|(_, v)| v.source == VersionSource::BuiltIn)
                .map(|(name, v)| (*name, v.env.clone()))
                .collect(),
            versions: builds,
        })
    }

    /// What `version` runs, in a container or as a process.
    pub fn of(&self, version: VersionName, in_container: bool) -> Build {
        if let Some(build) = self.versions.get(&version) {
            return build.clone();
        }
        // `built-in`, or a version of it with an environment of its own (validation refused
        // every name the plan does not declare).
        let env = self.built_in_env.get(&version).cloned().unwrap_or_default();
        match in_container {
            true => Build {
                program: Program::Image(self.node_image.clone()),
                subcommand: false,
                env,
            },
            false => Build {
                program: self.this_program.clone().into(),
                subcommand: true,
                env,
            },
        }
    }
}

/// A binary the plan names, run as root: an executable file that nobody but its owner and
/// root may change (else anyone could swap what the supervisor starts).
fn trusted_binary(version: VersionName, path: &Path) -> Result<PathBuf, BuildError> {
    let refuse = |problem: String| BuildError::Binary {
        version,
        path: path.to_owned(),
        problem,
    };
    let full = path
        .canonicalize()
        .map_err(|e| refuse(format!("cannot be found: {e}")))?;
    let meta = std::fs::metadata(&full).map_err(|e| refuse(e.to_string()))?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(refuse("is not an executable file".into()));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(refuse(format!(
            "may be changed by others (mode {:o}): the supervisor runs it as root",
            meta.permissions().mode() & 0o777
        )));
    }
    let owner = meta.uid();
    if owner != 0 && owner != nix::unistd::geteuid().as_raw() {
        return Err(refuse(format!(
            "belongs to uid {owner}, neither root nor this user"
        )));
    }
    Ok(full)
}

/// Where built commits are kept: `$ANYPLAY_CACHE`, else `$XDG_CACHE_HOME/anyplay`, else
/// `~/.cache/anyplay`.
fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("ANYPLAY_CACHE") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("anyplay")
}

/// The `anyplay-cloud` binary of `rev` in the repository the run starts in: from the cache,
/// else built there now (cargo's progress on stderr), once per commit.
fn built_commit(version: VersionName, rev: &str) -> Result<PathBuf, BuildError> {
    let fail = |problem: String| BuildError::Git {
        version,
        rev: rev.to_owned(),
        problem,
    };
    let root = git(None, &["rev-parse", "--show-toplevel"]).map_err(|e| {
        fail(format!(
            "the run builds it from the repository it starts in, and this directory is not in one ({e})"
        ))
    })?;
    let root = PathBuf::from(root);
    let commit = git(
        Some(&root),
        &[
            "rev-parse",
            "--verify",
            "--end-of-options",
            &format!("{rev}^{{commit}}"),
        ],
    )
    .map_err(|e| fail(format!("no such commit in {}: {e}", root.display())))?;
    let cache = cache_root().join("versions");
    let binary = cache.join(&commit).join("anyplay-cloud");
    if binary.is_file() {
        eprintln!(
            "  version {version}: git {rev} ({}), built before: {}",
            &commit[..12],
            binary.display()
        );
        return Ok(binary);
    }
    eprintln!(
        "  version {version}: building git {rev} ({}) into {} (once per commit; minutes the first time)",
        &commit[..12],
        cache.display()
    );
    let io = |what: &str| {
        let what = what.to_owned();
        move |e: std::io::Error| fail(format!("{what}: {e}"))
    };
    let source = cache.join("src").join(&commit);
    let _ = std::fs::remove_dir_all(&source);
    std::fs::create_dir_all(&source).map_err(io("the build directory"))?;
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700))
        .map_err(io("the cache"))?;
    // The commit's files alone (`git archive`), so the checkout it starts in stays as it is.
    let archive = std::process::Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["archive", "--format=tar", &commit])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(io("git archive"))?;
    let untar = std::process::Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(&source)
        .stdin(archive.stdout.expect("piped"))
        .status()
        .map_err(io("tar"))?;
    if !untar.success() {
        return Err(fail(format!("extracting the commit failed ({untar})")));
    }
    let target = cache.join("target");
    let built = std::process::Command::new("cargo")
        .args(["build", "--release", "--locked", "-p", "anyplay-cloud"])
        .arg("--bin")
        .arg("anyplay-cloud")
        .current_dir(&source)
        .env("CARGO_TARGET_DIR", &target)
        .stdout(Stdio::null())
        .status()
        .map_err(io("cargo"))?;
    if !built.success() {
        return Err(fail(format!(
            "`cargo build -p anyplay-cloud` of that commit failed ({built}); its output is above"
        )));
    }
    // Copied whole under another name first: a half-copied binary is never taken for built.
    let dir = binary.parent().expect("in the cache");
    std::fs::create_dir_all(dir).map_err(io("the cache"))?;
    let partial = dir.join("anyplay-cloud.partial");
    std::fs::copy(target.join("release").join("anyplay-cloud"), &partial)
        .map_err(io("copying the binary"))?;
    std::fs::rename(&partial, &binary).map_err(io("the cache"))?;
    let _ = std::fs::remove_dir_all(&source);
    eprintln!("  version {version}: built {}", binary.display());
    Ok(binary)
}

/// `git ARGS` (in `dir`), its output's first line.
fn git(dir: Option<&Path>, args: &[&str]) -> Result<String, String> {
    let mut command = std::process::Command::new("git");
    if let Some(dir) = dir {
        command.arg("-C").arg(dir);
    }
    let output = command
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).trim().to_owned());
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_runs_the_node_s_arguments_with_its_own_environment_last() {
        let base = Command::new("placeholder", "/tmp/node-1.log")
            .args(["--listen", "127.0.0.1:1"])
            .env("A", "nodes");
        let built_in = Build {
            program: "/usr/bin/anyplay-chaos".into(),
            subcommand: true,
            env: BTreeMap::new(),
        };
        let command = built_in.command(&base);
        assert_eq!(command.args, ["node", "--listen", "127.0.0.1:1"]);
        assert_eq!(command.log, PathBuf::from("/tmp/node-1.log"));
        let candidate = Build {
            program: "/opt/cloud".into(),
            subcommand: false,
            env: BTreeMap::from([("A".into(), "candidate".into())]),
        };
        let command = candidate.command(&base);
        assert_eq!(command.args, ["--listen", "127.0.0.1:1"]);
        assert_eq!(command.program, Program::from("/opt/cloud"));
        assert_eq!(
            command.env.last(),
            Some(&("A".to_owned(), "candidate".to_owned()))
        );
    }

    #[test]
    fn a_binary_others_may_change_is_refused() {
        let dir = tempfile_dir("binary");
        let path = dir.join("cloud");
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        let name: VersionName = "current".parse().unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(trusted_binary(name, &path)
            .unwrap_err()
            .to_string()
            .contains("not an executable"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(trusted_binary(name, &path)
            .unwrap_err()
            .to_string()
            .contains("changed by others"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            trusted_binary(name, &path).unwrap(),
            path.canonicalize().unwrap()
        );
        assert!(trusted_binary(name, &dir.join("missing")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir(label: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("anyplay-builds-{label}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
