//! The committed run of `plans/node-crash.yaml` (`results/node-crash/run`), as the tests that
//! read it need it: its directory, and its event log, which is stored gzipped.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;

/// `results/node-crash/run` in the source tree.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/node-crash/run")
}

/// The text of its `events.jsonl`, unzipped from `events.jsonl.gz`.
pub fn events_jsonl() -> String {
    let path = dir().join("events.jsonl.gz");
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut text = String::new();
    GzDecoder::new(file)
        .read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("{} does not unzip: {e}", path.display()));
    text
}
