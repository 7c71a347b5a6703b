//! PostgreSQL for a run: `initdb` once into `<run dir>/postgres/data`, then `postgres` on a free
//! loopback port with settings for a throwaway cluster (no fsync); or the same server as a
//! container. Both programs refuse to run as root, so under root they run as the `postgres`
//! system user (Debian's `postgresql` package creates it). That user may not be able to enter
//! the run directory (a `mktemp -d` is mode 700), so under root the cluster lives in a
//! [`Scratch`] directory for the run's length instead, and `<run dir>/postgres` links to it.

use std::net::Ipv4Addr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::unistd::geteuid;
use sqlx::postgres::PgConnectOptions;

use super::scratch::Scratch;
use super::{find_program, io_error, is_executable, log_path, pick_port, Placement, SetupError};
use crate::backend::{process, Command, Exit, Program, RunAs};
use crate::supervisor::service_faults::Disk;
use crate::supervisor::{Probe, ServiceSpec};

/// The service's name in the topology.
pub const NAME: &str = "postgres";
/// The database the nodes use; the readiness probe creates it.
pub const DATABASE: &str = "anyplay";
/// The cluster's superuser. Over TCP it needs its password, made for the cluster: a
/// superuser can run programs on the server's host (`COPY … TO PROGRAM`), and a server on a
/// netns or Docker host listens where others may reach it.
pub const USER: &str = "anyplay";
/// Connections beyond the nodes' pools: probes, a psql, superuser_reserved_connections (3).
const HEADROOM: u32 = 10;
const INITDB_TIMEOUT: Duration = Duration::from_secs(120);
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Linux's `sun_path` size, terminating NUL included.
const SOCKET_PATH_MAX: usize = 108;

#[derive(Debug, Clone)]
pub struct PostgresSettings {
    /// A free port when `None`.
    pub port: Option<u16>,
    /// What the nodes' pools need together (nodes × db_connections); headroom is added.
    pub max_connections: u32,
    /// Extra `postgres` arguments, e.g. `["-c", "log_statement=all"]`.
    pub args: Vec<String>,
    /// fsync and synchronous commit on: a killed server keeps what it acknowledged. Off only
    /// when a plan trades that for speed.
    pub durable: bool,
    pub placement: Placement,
}

impl Default for PostgresSettings {
    fn default() -> Self {
        PostgresSettings {
            port: None,
            max_connections: 0,
            args: Vec::new(),
            durable: true,
            placement: Placement::default(),
        }
    }
}

/// A prepared cluster: its spec for the supervisor and the URL the nodes use.
#[derive(Debug, Clone)]
pub struct Postgres {
    pub spec: ServiceSpec,
    pub port: u16,
    /// `postgres://anyplay:PASSWORD@ADDRESS:PORT/anyplay`
    pub url: String,
    /// On the host: the process backend's cluster (a container keeps its own inside).
    pub data_dir: Option<PathBuf>,
    /// Where the cluster lives when it cannot live in the run directory; removed when
    /// the last clone is dropped or on `Scratch::remove`: keep it for the run's length.
    pub scratch: Option<Arc<Scratch>>,
}

/// Finds the binaries, creates the cluster unless `<run dir>/postgres/data` holds one already,
/// and builds the server's command. Nothing is left running.
pub async fn prepare(run_dir: &Path, settings: &PostgresSettings) -> Result<Postgres, SetupError> {
    prepare_on_disk(run_dir, settings, None).await
}

/// As [`prepare`]; with `disk` bytes, the cluster lives on a filesystem of that size (for
/// `disk_full`), mounted before `initdb` at `<base>/disk`, and its WAL is kept small enough to fit.
pub async fn prepare_on_disk(
    run_dir: &Path,
    settings: &PostgresSettings,
    disk: Option<u64>,
) -> Result<Postgres, SetupError> {
    let bin = bin_dir().await?;
    let user = if geteuid().is_root() {
        Some(RunAs::lookup("postgres").map_err(|error| {
            SetupError::NotFound(format!(
                "{error}: PostgreSQL refuses to run as root and needs the `postgres` system user \
                 (the `postgresql` package creates it)"
            ))
        })?)
    } else {
        None
    };
    let (base, scratch) = match &user {
        Some(_) => {
            let scratch = Scratch::create(&std::env::temp_dir(), NAME)
                .map_err(io_error(&std::env::temp_dir()))?;
            let base = scratch.path().join(NAME);
            link(&run_dir.join(NAME), &base)?;
            (base, Some(Arc::new(scratch)))
        }
        None => (run_dir.join(NAME), None),
    };
    let sockets = base.join("sock");
    for dir in [&base, &sockets] {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        if let Some(user) = &user {
            user.chown(dir).map_err(io_error(dir))?;
        }
    }
    if let Some(user) = &user {
        check_reachable(&base, user)?;
    }
    let disk = match disk {
        Some(bytes) => Some(Arc::new(Disk::mount(
            &base.join("disk"),
            bytes,
            user.as_ref(),
        )?)),
        None => None,
    };
    let data = match &disk {
        Some(disk) => disk.path().join("data"),
        None => base.join("data"),
    };
    check_socket_path(&sockets)?;

    let log = log_path(run_dir, NAME);
    let password = kept_password(&base, user.as_ref())?;
    if !data.join("PG_VERSION").exists() {
        let initdb = Command::new(bin.join("initdb"), &log)
            .args(["-D", utf8(&data)?, "-U", USER, "-E", "UTF8"])
            // Its own socket trusts the server's user; TCP wants the password.
            .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", utf8(&base.join(PASSWORD_FILE))?))
            .args(["--locale=C", "--no-sync"])
            .cwd(&base)
            .run_as(user.clone());
        // On timeout the dropped child is SIGKILLed (kill_on_drop).
        let exit = tokio::time::timeout(INITDB_TIMEOUT, process::run_to_exit(&initdb, "initdb"))
            .await
            .unwrap_or_else(|_| {
                Ok(Exit::Unknown(format!(
                    "still running after {INITDB_TIMEOUT:?}"
                )))
            })?;
        if !exit.success() {
            return Err(SetupError::Failed {
                what: "initdb",
                exit,
                log,
            });
        }
    }

    let address = settings.placement.address;
    if !address.is_loopback() {
        admit_same_net(&data)?;
    }

    let port = pick_port(settings.port)?;
    let command = Command::new(bin.join("postgres"), &log)
        .args(["-D", utf8(&data)?, "-k", utf8(&sockets)?])
        .args(server_args(port, settings))
        .args(small_wal(&disk))
        .cwd(&base)
        .run_as(user)
        .netns(settings.placement.netns.clone())
        // Fast shutdown: SIGTERM (smart) would wait for every node to disconnect.
        .stop_signal(Signal::SIGINT);
    Ok(on_disk(
        Postgres {
            data_dir: Some(data),
            scratch,
            ..served(command, port, address, password)
        },
        disk,
    ))
}

/// Lets the nodes of the run's own subnet in, with the password (as `initdb` lets loopback in):
/// a server on a netns host is reached from the other namespaces on the run's bridge.
fn admit_same_net(data: &Path) -> Result<(), SetupError> {
    const LINE: &str = "host all all samenet scram-sha-256";
    let hba = data.join("pg_hba.conf");
    let text = std::fs::read_to_string(&hba).map_err(io_error(&hba))?;
    if !text.lines().any(|l| l.trim() == LINE) {
        std::fs::write(&hba, format!("{text}\n{LINE}\n")).map_err(io_error(&hba))?;
    }
    Ok(())
}

/// Where the superuser's password is kept, beside the cluster.
const PASSWORD_FILE: &str = "password";

/// The password of the cluster under `base`: the one kept there when a cluster was made there
/// before, else a new one, kept (mode 600, for the server's user, whose `initdb` reads it).
fn kept_password(base: &Path, user: Option<&RunAs>) -> Result<String, SetupError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;

    let file = base.join(PASSWORD_FILE);
    match std::fs::read_to_string(&file) {
        Ok(kept) => return Ok(kept.trim().to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error(&file)(e)),
    }
    let password = new_password();
    // `create_new` follows no link that something else put there.
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file)
        .map_err(io_error(&file))?;
    writeln!(out, "{password}").map_err(io_error(&file))?;
    if let Some(user) = user {
        user.chown(&file).map_err(io_error(&file))?;
    }
    Ok(password)
}

/// 128 random bits, in hex.
fn new_password() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// WAL settings for a cluster on a size-limited disk: two 16 MB segments kept, a checkpoint
/// once 48 MB were written (the defaults, 80 MB and 1 GB, would not fit a small disk).
fn small_wal(disk: &Option<Arc<Disk>>) -> Vec<String> {
    let small = ["-c", "min_wal_size=32MB", "-c", "max_wal_size=48MB"];
    match disk {
        Some(_) => small.map(str::to_owned).into(),
        None => Vec::new(),
    }
}

/// `postgres` with `disk` made ready for `disk_full`.
fn on_disk(mut postgres: Postgres, disk: Option<Arc<Disk>>) -> Postgres {
    postgres.spec.faults.disk = disk;
    postgres
}

/// Makes `at` (in the run directory) a symbolic link to `target`, replacing an older link.
fn link(at: &Path, target: &Path) -> Result<(), SetupError> {
    if at.symlink_metadata().is_ok_and(|meta| meta.is_symlink()) {
        std::fs::remove_file(at).map_err(io_error(at))?;
    }
    std::os::unix::fs::symlink(target, at).map_err(io_error(at))
}

/// PostgreSQL as a container of `image`, driven the way the official `postgres` image is (and
/// the project's local one follows): its entrypoint creates the cluster on the first start
/// from `POSTGRES_*` settings, inside the container, which keeps it across restarts.
pub fn container(
    run_dir: &Path,
    settings: &PostgresSettings,
    image: &str,
) -> Result<Postgres, SetupError> {
    container_on_disk(run_dir, settings, image, None)
}

/// As [`container`]; with `disk` bytes, the cluster (`PGDATA`) lives on a filesystem of that
/// size mounted at `<run dir>/postgres-disk`, which the container sees through the run
/// directory's bind mount, and its WAL is kept small enough to fit.
pub fn container_on_disk(
    run_dir: &Path,
    settings: &PostgresSettings,
    image: &str,
    disk: Option<u64>,
) -> Result<Postgres, SetupError> {
    let port = pick_port(settings.port)?;
    // The container keeps its cluster for the run's length; a password made now is its own.
    let password = new_password();
    let disk = match disk {
        Some(bytes) => Some(Arc::new(Disk::mount(
            &run_dir.join("postgres-disk"),
            bytes,
            None,
        )?)),
        None => None,
    };
    let mut command = Command::new(Program::Image(image.to_owned()), log_path(run_dir, NAME))
        .arg("postgres")
        .args(server_args(port, settings))
        .args(small_wal(&disk));
    if let Some(disk) = &disk {
        command = command.env("PGDATA", disk.path().join("data").display().to_string());
    }
    let command = command
        .env("POSTGRES_USER", USER)
        .env("POSTGRES_DB", DATABASE)
        .env("POSTGRES_PASSWORD", &password)
        // A throwaway cluster, as with processes: no fsync while it is made either.
        .env("POSTGRES_INITDB_ARGS", "--no-sync")
        .stop_signal(Signal::SIGINT);
    Ok(on_disk(
        served(command, port, settings.placement.address, password),
        disk,
    ))
}

/// The server's settings on either backend: its host's address only, and durable unless the plan says
/// otherwise (a `kill: postgres` must not lose what it acknowledged, or `lost_writes` would
/// blame the cloud for the harness).
fn server_args(port: u16, settings: &PostgresSettings) -> Vec<String> {
    let max_connections = settings.max_connections.saturating_add(HEADROOM);
    let fast: &[&str] = if settings.durable {
        &[]
    } else {
        &[
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
        ]
    };
    let address = settings.placement.address.to_string();
    let mut args: Vec<String> = ["-h", &address, "-p", &port.to_string()]
        .into_iter()
        .chain(fast.iter().copied())
        .chain(["-c", &format!("max_connections={max_connections}")])
        .map(str::to_owned)
        .collect();
    args.extend(settings.args.iter().cloned());
    args
}

/// The spec, probe and URL of a server that `command` runs on `port`.
fn served(command: Command, port: u16, address: Ipv4Addr, password: String) -> Postgres {
    let server = PgConnectOptions::new()
        .host(&address.to_string())
        .port(port)
        .username(USER)
        .password(&password)
        .database("postgres");
    let probe = Probe::Postgres {
        server: Box::new(server),
        database: DATABASE.to_owned(),
    };
    Postgres {
        spec: ServiceSpec::new(NAME, command, probe).ready_timeout(READY_TIMEOUT),
        port,
        // Hex: nothing to escape in a URL.
        url: format!("postgres://{USER}:{password}@{address}:{port}/{DATABASE}"),
        data_dir: None,
        scratch: None,
    }
}

/// The directory holding `initdb` and `postgres`: `pg_config --bindir`, the newest
/// `/usr/lib/postgresql/*/bin` (Debian keeps initdb off `PATH`), then `PATH`.
async fn bin_dir() -> Result<PathBuf, SetupError> {
    let mut candidates = Vec::new();
    if let Some(pg_config) = find_program("pg_config", &[]) {
        let output = tokio::process::Command::new(pg_config)
            .arg("--bindir")
            .output()
            .await;
        if let Ok(output) = output.as_ref().map(|out| &out.stdout) {
            candidates.push(PathBuf::from(String::from_utf8_lossy(output).trim()));
        }
    }
    candidates.extend(versioned_bin_dirs(Path::new("/usr/lib/postgresql")));
    if let Some(initdb) = find_program("initdb", &[]) {
        // /usr/local/bin/initdb may be a symlink into the real directory.
        let real = std::fs::canonicalize(&initdb).unwrap_or(initdb);
        candidates.extend(real.parent().map(Path::to_owned));
    }
    candidates
        .into_iter()
        .find(|dir| is_executable(&dir.join("initdb")) && is_executable(&dir.join("postgres")))
        .ok_or_else(|| {
            SetupError::NotFound(
                "PostgreSQL server programs (initdb, postgres) not found via `pg_config --bindir`, \
                 /usr/lib/postgresql/*/bin or PATH: install the postgresql package"
                    .to_owned(),
            )
        })
}

/// `root/<major>/bin` directories, newest major first.
fn versioned_bin_dirs(root: &Path) -> Vec<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let major = entry.file_name().to_str()?.parse().ok()?;
            Some((major, entry.path().join("bin")))
        })
        .collect();
    versions.sort_by_key(|(major, _)| std::cmp::Reverse(*major));
    versions.into_iter().map(|(_, dir)| dir).collect()
}

/// Every directory above `dir` must let `user` pass, or initdb fails with a confusing message.
fn check_reachable(dir: &Path, user: &RunAs) -> Result<(), SetupError> {
    for ancestor in dir.ancestors().skip(1) {
        let meta = ancestor.metadata().map_err(io_error(ancestor))?;
        if !can_enter(meta.mode(), meta.uid(), meta.gid(), user) {
            return Err(SetupError::Unusable(format!(
                "the {} user cannot enter {} (mode {:o}); choose a run directory others can \
                 reach, or `chmod o+x` it",
                user.name,
                ancestor.display(),
                meta.mode() & 0o7777,
            )));
        }
    }
    Ok(())
}

fn can_enter(mode: u32, owner: u32, group: u32, user: &RunAs) -> bool {
    let bit = if owner == user.uid.as_raw() {
        0o100
    } else if group == user.gid.as_raw() {
        0o010
    } else {
        0o001
    };
    mode & bit != 0
}

fn check_socket_path(sockets: &Path) -> Result<(), SetupError> {
    let socket = sockets.join(".s.PGSQL.65535");
    if socket.as_os_str().len() >= SOCKET_PATH_MAX {
        return Err(SetupError::Unusable(format!(
            "the PostgreSQL socket path {} is longer than Linux allows ({} bytes): use a shorter \
             run directory",
            socket.display(),
            SOCKET_PATH_MAX - 1
        )));
    }
    Ok(())
}

fn utf8(path: &Path) -> Result<&str, SetupError> {
    path.to_str()
        .ok_or_else(|| SetupError::Unusable(format!("{} is not valid UTF-8", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::unistd::{Gid, Uid};

    fn user() -> RunAs {
        RunAs {
            name: "postgres".into(),
            uid: Uid::from_raw(101),
            gid: Gid::from_raw(104),
        }
    }

    #[test]
    fn entering_needs_the_matching_execute_bit() {
        let user = user();
        assert!(can_enter(0o755, 0, 0, &user));
        assert!(!can_enter(0o700, 0, 0, &user));
        assert!(can_enter(0o700, 101, 0, &user));
        assert!(can_enter(0o750, 0, 104, &user));
        assert!(!can_enter(0o705, 0, 104, &user));
    }

    #[test]
    fn sorts_versions_newest_first() {
        let root =
            std::env::temp_dir().join(format!("anyplay-chaos-pgvers-{}", std::process::id()));
        for name in ["9", "15", "13", "not-a-version"] {
            std::fs::create_dir_all(root.join(name)).expect("mkdir");
        }
        let dirs = versioned_bin_dirs(&root);
        let _ = std::fs::remove_dir_all(&root);
        let expected: Vec<PathBuf> = ["15", "13", "9"]
            .iter()
            .map(|v| root.join(v).join("bin"))
            .collect();
        assert_eq!(dirs, expected);
    }

    #[test]
    fn refuses_socket_paths_linux_cannot_bind() {
        assert!(check_socket_path(Path::new("/tmp/run/postgres/sock")).is_ok());
        let long = PathBuf::from("/").join("x".repeat(100));
        assert!(matches!(
            check_socket_path(&long),
            Err(SetupError::Unusable(_))
        ));
    }
}
