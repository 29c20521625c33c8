//! The `pitboss` command line: `serve` (the default) and `token`. The
//! binary is [`run`] with the games of this build; a binary that hosts
//! other games beside them calls [`run`] with its own registry.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Args, Parser, Subcommand};

use crate::actors::table::Games;
use crate::auth::{now_unix, TokenSigner};
use crate::config::{LoadOptions, Settings};
use crate::lease::ClaimError;
use crate::startup::Application;

/// The usage line a usage error ends with.
const USAGE: &str = "usage: pitboss [serve] [--host H] [--port N] [--config-dir DIR] | pitboss token [--config-dir DIR] <player>";

/// pitboss: game tables as actors, one dealer per table under an ownership
/// lease in Redis, every write fenced in Postgres. Without a command it
/// serves.
#[derive(Debug, Parser)]
#[command(
    name = "pitboss",
    version,
    verbatim_doc_comment,
    args_conflicts_with_subcommands = true,
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply the migrations, then serve HTTP, WebSocket and the actors
    /// (the default); SIGTERM or SIGINT drains and exits 0
    Serve(ServeArgs),
    /// Print a signed player token (the secret is auth.secret)
    Token {
        /// The config directory (default: PITBOSS_CONFIG_DIR, else
        /// ./config)
        #[arg(long, value_name = "DIR")]
        config_dir: Option<PathBuf>,
        /// The player's name: 1-32 of A-Z a-z 0-9 _ - .
        player: String,
    },
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// The address to listen on (http.host)
    #[arg(long, value_name = "H")]
    host: Option<String>,
    /// The port to listen on, 0-65535 (http.port)
    #[arg(long, value_name = "N")]
    port: Option<u16>,
    /// The config directory (default: PITBOSS_CONFIG_DIR, else ./config)
    #[arg(long, value_name = "DIR")]
    config_dir: Option<PathBuf>,
}

impl ServeArgs {
    fn options(self) -> LoadOptions {
        LoadOptions {
            config_dir: self.config_dir,
            http_host: self.host,
            http_port: self.port,
        }
    }
}

/// Parses the command line and runs it; `games` are what `serve` hosts.
pub fn run(games: Games) -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // One line, as every other refusal to start: what was wrong,
            // then the usage.
            eprintln!("pitboss: {}; {USAGE}", first_line(&e));
            return ExitCode::from(2);
        }
    };
    let (player, options) = match cli.command {
        None => (None, cli.serve.options()),
        Some(Command::Serve(serve)) => (None, serve.options()),
        Some(Command::Token { config_dir, player }) => (
            Some(player),
            LoadOptions {
                config_dir,
                ..LoadOptions::default()
            },
        ),
    };
    let settings = match Settings::load_with(&options) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match player {
        None => serve(settings, games),
        Some(player) => token(&settings, &player),
    }
}

/// clap's message without its `error: ` prefix, tips and usage block.
fn first_line(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let line = rendered.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_string()
}

fn token(settings: &Settings, player: &str) -> ExitCode {
    let Some(secret) = settings.auth.secret.clone() else {
        eprintln!("config error: auth.secret is not set (PITBOSS__AUTH__SECRET)");
        return ExitCode::from(2);
    };
    match TokenSigner::new(secret).mint(player, now_unix()) {
        Ok(t) => {
            println!("{t}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

fn serve(settings: Settings, games: Games) -> ExitCode {
    crate::telemetry::init(&settings.log.format);
    let system = actix_rt::System::new();
    let result = system.block_on(async move {
        let app = Application::build(settings, games).await?;
        crate::shutdown::run_until_stopped(app).await
    });
    // Actors still alive when the system goes away get one last poll as
    // they drop, and that poll may need the runtime (a timer in `started`):
    // drop the system inside its own runtime's context.
    let runtime = system.runtime().tokio_runtime().handle().clone();
    {
        let _inside = runtime.enter();
        drop(system);
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "pitboss stopped");
            eprintln!("pitboss: {e:#}");
            // Another live process with this id is a configuration error,
            // not a failure to start.
            match e.downcast_ref::<ClaimError>() {
                Some(ClaimError::InUse { .. }) => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn serve_is_the_default_and_token_takes_one_player() {
        let cli = Cli::try_parse_from(["pitboss", "--port", "9000"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.serve.port, Some(9000));
        let cli = Cli::try_parse_from(["pitboss", "token", "alice"]).unwrap();
        assert!(
            matches!(cli.command, Some(Command::Token { ref player, .. }) if player == "alice")
        );
        assert!(Cli::try_parse_from(["pitboss", "token", "alice", "bob"]).is_err());
        assert!(Cli::try_parse_from(["pitboss", "--port", "70000"]).is_err());
    }
}
