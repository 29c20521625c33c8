use std::process::ExitCode;

use pitboss::auth::{now_unix, TokenSigner};
use pitboss::config::Settings;
use pitboss::startup::Application;

const USAGE: &str = "usage: pitboss [serve] | pitboss token <player>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let settings = match Settings::load() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] | ["serve"] => serve(settings),
        ["token", player] => token(&settings, player),
        ["-h" | "--help" | "help"] => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
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
    let result = actix_rt::System::new().block_on(async move {
        let app = Application::build(settings).await?;
        pitboss::shutdown::run_until_stopped(app).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "pitboss stopped");
            eprintln!("pitboss: {e:#}");
            ExitCode::FAILURE
        }
    }
}
