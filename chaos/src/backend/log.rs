//! A service's log file: appended across restarts, each start marked with a header line.

use std::fs::File;
use std::io::Write;

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::{BackendError, Command};

/// Opens the log for appending (creating its directory) and marks where this start begins.
pub(crate) fn open_log(command: &Command, name: &str) -> Result<File, BackendError> {
    let path = &command.log;
    let error = |source| BackendError::Log {
        path: path.clone(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(error)?;
    }
    let mut file = crate::run_files::append(path).map_err(error)?;
    let now = OffsetDateTime::now_utc()
        .format(&Rfc3339)
        .unwrap_or_else(|_| "now".to_owned());
    writeln!(
        file,
        "==== anyplay-chaos: {now} starting {name}: {}",
        command.display()
    )
    .map_err(error)?;
    Ok(file)
}
