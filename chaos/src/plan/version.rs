//! `versions:` the builds of the cloud a plan's nodes may run, by name: a binary on this
//! machine, a Docker image, a commit of this repository that the run builds, or the built-in
//! cloud under an environment of its own (a configuration rolled out as a release). A node runs
//! the cloud built into `anyplay-chaos` (named [`VersionName::BUILT_IN`]) unless
//! `services.nodes.version` names another; `upgrade` moves nodes between them.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// The longest version name: enough for `release-2026.12.04-rc1` and then some.
const NAME_MAX: usize = 63;

/// A version's name as a plan writes it: ASCII letters, digits, `.`, `_` and `-`, at most
/// 63 of them. `Copy`, so that the actions naming one stay plain values.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VersionName {
    len: u8,
    bytes: [u8; NAME_MAX],
}

impl VersionName {
    /// The cloud built into `anyplay-chaos`: every node's version unless the plan says other.
    pub const BUILT_IN: VersionName = VersionName::from_ascii(b"built-in");

    const fn from_ascii(name: &[u8]) -> VersionName {
        let mut bytes = [0; NAME_MAX];
        let mut i = 0;
        while i < name.len() {
            bytes[i] = name[i];
            i += 1;
        }
        VersionName {
            len: name.len() as u8,
            bytes,
        }
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).expect("ASCII by construction")
    }
}

impl Default for VersionName {
    fn default() -> Self {
        VersionName::BUILT_IN
    }
}

impl FromStr for VersionName {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let fine = !text.is_empty()
            && text.len() <= NAME_MAX
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !fine {
            return Err(format!(
                "`{text}` is not a version name (1 to {NAME_MAX} of A-Z a-z 0-9 . _ -)"
            ));
        }
        Ok(VersionName::from_ascii(text.as_bytes()))
    }
}

impl fmt::Display for VersionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for VersionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// Where a version's nodes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionSource {
    /// An `anyplay-cloud` binary on this machine (process and netns nodes).
    Binary(PathBuf),
    /// A node image (Docker nodes).
    Image(String),
    /// A commit of the repository the run starts in, built by the run (once per commit,
    /// into a cache) as an `anyplay-cloud` binary.
    Git(String),
    /// The cloud inside `anyplay-chaos` (`built-in: true`), with the version's `env`.
    BuiltIn,
}

impl VersionSource {
    /// The plan key that names this kind of source.
    pub fn key(&self) -> &'static str {
        match self {
            VersionSource::Binary(_) => "binary",
            VersionSource::Image(_) => "image",
            VersionSource::Git(_) => "git",
            VersionSource::BuiltIn => "built-in",
        }
    }
}

/// One entry of `versions:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub source: VersionSource,
    /// Environment for the nodes of this version, over `services.nodes.env`.
    pub env: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_print_and_refuse() {
        for name in ["current", "candidate", "v1.4.2", "release_2026-12-04"] {
            assert_eq!(name.parse::<VersionName>().unwrap().to_string(), name);
        }
        assert_eq!(VersionName::BUILT_IN.as_str(), "built-in");
        assert_eq!(
            "built-in".parse::<VersionName>().unwrap(),
            VersionName::BUILT_IN
        );
        for bad in ["", "a b", "../x", "é", &"x".repeat(64)] {
            assert!(bad.parse::<VersionName>().is_err(), "{bad:?}");
        }
    }
}
