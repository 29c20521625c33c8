use std::process::ExitCode;

fn main() -> ExitCode {
    pitboss::cli::run(pitboss::games::registry())
}
