//! Prints one RULER prompt (the text a model is asked to continue), e.g. to feed
//! `gattn-cpu sink -f`: `cargo run --release -p gattn-eval --example ruler_prompt -- niah_single_1 1000`
//! (task, target length in characters = tokens of a byte-level tokenizer, optional sample index).

use gattn_eval::{CharCounter, Corpus, TaskName, generate_sample};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(task), Some(length)) = (args.first(), args.get(1)) else {
        return Err("usage: ruler_prompt TASK LENGTH [INDEX]".into());
    };
    let task: TaskName = task.parse()?;
    let length: usize = length.parse()?;
    let index: usize = args.get(2).map_or(Ok(0), |i| i.parse())?;
    let counter = CharCounter { chars_per_token: 1 };
    let sample = generate_sample(task, length, index, 42, &counter, &Corpus::builtin())?;
    print!("{}", sample.prompt());
    Ok(())
}
