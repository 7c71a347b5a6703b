//! A command is data: what to run, with which arguments, environment, directory, user and log file.

use std::path::{Path, PathBuf};

use nix::sys::signal::Signal;
use nix::unistd::{Gid, Uid, User};

use super::BackendError;

/// What to run: an executable for the process backend, an image for the Docker backend (whose
/// entrypoint then gets `args`, as `docker run IMAGE ARGS` does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    Executable(PathBuf),
    Image(String),
}

impl From<PathBuf> for Program {
    fn from(path: PathBuf) -> Self {
        Program::Executable(path)
    }
}

impl From<&Path> for Program {
    fn from(path: &Path) -> Self {
        Program::Executable(path.to_owned())
    }
}

impl From<&PathBuf> for Program {
    fn from(path: &PathBuf) -> Self {
        Program::Executable(path.clone())
    }
}

impl From<&str> for Program {
    fn from(path: &str) -> Self {
        Program::Executable(path.into())
    }
}

impl std::fmt::Display for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Program::Executable(path) => write!(f, "{}", path.display()),
            Program::Image(image) => write!(f, "image {image}"),
        }
    }
}

/// What to run, with which arguments, environment, directory, user and log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub program: Program,
    pub args: Vec<String>,
    /// Added to the supervisor's own environment.
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Run as this user instead of the supervisor's (PostgreSQL refuses to run as root).
    pub user: Option<RunAs>,
    /// stdout and stderr are appended here, across restarts.
    pub log: PathBuf,
    /// What asks it to stop gracefully: SIGTERM, but SIGINT for PostgreSQL (its fast shutdown;
    /// SIGTERM would wait for every client to leave). Docker calls it STOPSIGNAL.
    pub stop_signal: Signal,
    /// A process gets a cgroup of its own, so that CPU and memory limits can be set while it
    /// runs (a container always has one).
    pub cgroup: bool,
    /// Host paths the service must see at the same path: a container gets them bind-mounted
    /// read-only (a process sees the host's files anyway).
    pub binds: Vec<PathBuf>,
    /// A process runs in this network namespace (`/run/netns/<name>`) instead of the
    /// supervisor's: the process backend only.
    pub netns: Option<PathBuf>,
}

impl Command {
    pub fn new(program: impl Into<Program>, log: impl Into<PathBuf>) -> Self {
        Command {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            user: None,
            log: log.into(),
            stop_signal: Signal::SIGTERM,
            cgroup: false,
            binds: Vec::new(),
            netns: None,
        }
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    pub fn run_as(mut self, user: Option<RunAs>) -> Self {
        self.user = user;
        self
    }

    pub fn netns(mut self, namespace: Option<PathBuf>) -> Self {
        self.netns = namespace;
        self
    }

    pub fn stop_signal(mut self, signal: Signal) -> Self {
        self.stop_signal = signal;
        self
    }

    /// The command line as one string, for log headers and error messages.
    pub fn display(&self) -> String {
        let mut line = self.program.to_string();
        for arg in &self.args {
            line.push(' ');
            line.push_str(arg);
        }
        line
    }
}

/// A system user a child switches to before it executes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    pub name: String,
    pub uid: Uid,
    pub gid: Gid,
}

impl RunAs {
    pub fn lookup(name: &str) -> Result<RunAs, BackendError> {
        match User::from_name(name) {
            Ok(Some(user)) => Ok(RunAs {
                name: user.name,
                uid: user.uid,
                gid: user.gid,
            }),
            Ok(None) => Err(BackendError::NoSuchUser(name.to_owned())),
            Err(source) => Err(BackendError::UserLookup {
                name: name.to_owned(),
                source,
            }),
        }
    }

    /// Hands `path` to this user, so that a child running as it can write there.
    pub fn chown(&self, path: &Path) -> std::io::Result<()> {
        nix::unistd::chown(path, Some(self.uid), Some(self.gid)).map_err(std::io::Error::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_a_command_line() {
        let command = Command::new("/bin/echo", "/tmp/echo.log")
            .arg("-n")
            .args(["a", "b"])
            .env("K", "V")
            .cwd("/tmp");
        assert_eq!(command.display(), "/bin/echo -n a b");
        let image = Command::new(Program::Image("nats:2.10".into()), "/tmp/nats.log").arg("-p");
        assert_eq!(image.display(), "image nats:2.10 -p");
        assert_eq!(command.env, vec![("K".to_owned(), "V".to_owned())]);
        assert_eq!(command.cwd.as_deref(), Some(Path::new("/tmp")));
        assert_eq!(command.user, None);
        assert_eq!(command.stop_signal, Signal::SIGTERM);
    }

    #[test]
    fn looks_up_users() {
        let root = RunAs::lookup("root").expect("every Unix has root");
        assert!(root.uid.is_root());
        assert!(matches!(
            RunAs::lookup("no-such-user-anyplay"),
            Err(BackendError::NoSuchUser(_))
        ));
    }
}
