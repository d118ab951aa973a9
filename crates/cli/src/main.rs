//! `gattn-cpu`: a thin command line over `gattn-model`. Bad arguments exit with 2 (clap's, and
//! our own checks': `failure.rs`), bad input files and failed runs with 1, always with a message
//! naming what is wrong.

mod args;
mod commands;
mod failure;
mod limits;
mod npy;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => commands::run::run(args),
        Command::Logits(args) => commands::logits::run(args),
        Command::Init(args) => commands::init::run(args),
        Command::Info(args) => commands::info::run(args),
        Command::Ruler(args) => commands::ruler::run(args),
        Command::Quantize(args) => commands::quantize::run(args),
        Command::Sink(args) => commands::sink::run(args),
        Command::AttnMap(args) => commands::attn_map::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::Perplexity(args) => commands::perplexity::run(args),
        Command::Serve(args) => commands::serve::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", failure::message(&error));
            ExitCode::from(failure::exit_code(&error))
        }
    }
}
