//! `--results FILE`: every hand result a bot was told, one JSON line each,
//! so a harness can compare what players were told with what the server
//! recorded.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::stats::lock;

pub struct ResultLog {
    out: Mutex<BufWriter<File>>,
}

impl ResultLog {
    pub fn create(path: &Path) -> std::io::Result<ResultLog> {
        Ok(ResultLog {
            out: Mutex::new(BufWriter::new(File::create(path)?)),
        })
    }

    /// One `hand_ended` event as `bot` received it, with the wall-clock
    /// time (ms since the Unix epoch) it arrived.
    pub fn record(&self, bot: &str, event: &Value) {
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let line = json!({
            "at_ms": at_ms,
            "bot": bot,
            "table": event["table"],
            "hand": event["hand"],
            "stacks": event["stacks"],
        });
        // A result that cannot be written is missing from the file, which
        // the reader sees as a result never told: it errs on the safe side.
        let _ = writeln!(lock(&self.out), "{line}");
    }

    pub fn flush(&self) -> std::io::Result<()> {
        lock(&self.out).flush()
    }
}
