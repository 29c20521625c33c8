//! Tracing subscriber: pretty or compact for people, JSON for log pipelines.

use tracing_subscriber::{fmt, EnvFilter};

pub fn init(format: &str) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,actix_server=warn"));
    // Colour codes only for a terminal: log files and collectors get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let builder = fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(ansi);
    // A second init (tests that build the app twice in one process) is harmless.
    let _ = match format {
        "json" => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
        "compact" => builder.compact().try_init(),
        _ => builder.pretty().try_init(),
    };
}
