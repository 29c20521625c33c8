use std::path::PathBuf;
use std::process::ExitCode;

use pitboss::auth::{now_unix, TokenSigner};
use pitboss::config::{LoadOptions, Settings};
use pitboss::lease::ClaimError;
use pitboss::startup::Application;

const USAGE: &str = "usage: pitboss [serve] [--host H] [--port N] [--config-dir DIR] | pitboss token [--config-dir DIR] <player>";

/// What the command line asks for.
enum Command<'a> {
    Serve,
    Token(&'a str),
    Help,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (command, options) = match parse_args(&args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("pitboss: {e}; {USAGE}");
            return ExitCode::from(2);
        }
    };
    if let Command::Help = command {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let settings = match Settings::load_with(&options) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match command {
        Command::Serve => serve(settings),
        Command::Token(player) => token(&settings, player),
        Command::Help => ExitCode::SUCCESS,
    }
}

/// `pitboss` alone (or with only flags) serves.
fn parse_args<'a>(args: &'a [&'a str]) -> Result<(Command<'a>, LoadOptions), String> {
    let (command, flags) = match args {
        ["-h" | "--help" | "help", ..] => return Ok((Command::Help, LoadOptions::default())),
        ["serve", rest @ ..] => ("serve", rest),
        ["token", rest @ ..] => ("token", rest),
        rest => ("serve", rest),
    };
    let mut options = LoadOptions::default();
    let mut player = None;
    let mut flags = flags.iter();
    while let Some(&arg) = flags.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag, Some(value)),
            _ => (arg, None),
        };
        let mut value = || {
            inline
                .or_else(|| flags.next().copied())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match (command, flag) {
            (_, "-h" | "--help") => return Ok((Command::Help, options)),
            (_, "--config-dir") => options.config_dir = Some(PathBuf::from(value()?)),
            ("serve", "--host") => options.http_host = Some(value()?.to_string()),
            ("serve", "--port") => {
                let port = value()?;
                options.http_port =
                    Some(port.parse().map_err(|_| {
                        format!("--port needs a port number (0-65535), not {port:?}")
                    })?);
            }
            (_, flag) if flag.starts_with('-') => {
                return Err(format!("unknown flag {flag} for {command}"));
            }
            ("token", name) if player.is_none() => player = Some(name),
            (_, extra) => return Err(format!("unexpected argument {extra:?}")),
        }
    }
    match (command, player) {
        ("token", Some(player)) => Ok((Command::Token(player), options)),
        ("token", None) => Err("token needs a player name".into()),
        _ => Ok((Command::Serve, options)),
    }
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

fn serve(settings: Settings) -> ExitCode {
    pitboss::telemetry::init(&settings.log.format);
    let system = actix_rt::System::new();
    let result = system.block_on(async move {
        let app = Application::build(settings).await?;
        pitboss::shutdown::run_until_stopped(app).await
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
