//! RULER's variable tracking generator (`scripts/data/synthetic/variable_tracking.py`),
//! noise haystack, with its one-shot example.

use std::collections::HashSet;

use super::{Built, Insertion, SampleSpec, fit_sample, unit_cap};
use crate::corpus::Corpus;
use crate::error::EvalError;
use crate::fit::largest_fitting;
use crate::generate::Sample;
use crate::rng::{SampleRng, UPPERCASE};
use crate::task::{TaskConfig, TaskFamily};
use crate::templates::{NOISE, VARIABLE_TRACKING, fill};
use crate::tokens::TokenCounter;

/// RULER builds its one-shot example at this many tokens.
const ICL_LENGTH: usize = 500;
/// The example's placeholder value, replaced per sample.
const ICL_VALUE: &str = "12345";

struct Chain {
    vars: Vec<String>,
    /// "VAR X = 12345", then "VAR Y = VAR X " per hop (RULER's trailing space included).
    links: Vec<String>,
}

/// RULER's `generate_chains`: distinct upper-case names (5 letters, 3 for the example),
/// a 5-digit start value (`np.random.randint(10000, 99999)`).
fn chains(rng: &mut SampleRng, num_chains: usize, num_hops: usize, icl: bool) -> Vec<Chain> {
    let name_len = if icl { 3 } else { 5 };
    let mut seen = HashSet::new();
    let mut names = Vec::new();
    while names.len() < num_chains * (num_hops + 1) {
        let name = rng.string_from(UPPERCASE, name_len);
        // "VAR" as a name would be rewritten with every "VAR" when the example is
        // randomised; RULER does not guard this 1-in-17576 case.
        if name != "VAR" && seen.insert(name.clone()) {
            names.push(name);
        }
    }
    names
        .chunks(num_hops + 1)
        .map(|vars| {
            let value = if icl {
                ICL_VALUE.to_string()
            } else {
                rng.randint(10_000, 99_998).to_string()
            };
            let mut links = vec![format!("VAR {} = {value}", vars[0])];
            for j in 0..num_hops {
                links.push(format!("VAR {} = VAR {} ", vars[j + 1], vars[j]));
            }
            Chain {
                vars: vars.to_vec(),
                links,
            }
        })
        .collect()
}

/// The noise haystack with every chain's links inserted in order at random lines.
fn context(n: usize, chains: &[Chain], rng: &mut SampleRng) -> (String, Vec<Insertion>) {
    let mut lines: Vec<&str> = vec![NOISE; n];
    let mut insertions = Vec::new();
    for chain in chains {
        let len_before = lines.len();
        let mut positions = rng.sample_indices(len_before, chain.links.len());
        positions.sort_unstable();
        for (j, (&p, link)) in positions.iter().zip(&chain.links).enumerate() {
            lines.insert(p + j, link);
            insertions.push(Insertion {
                text: link.clone(),
                depth: p as f64 / len_before as f64,
            });
        }
    }
    (lines.join("\n").replace(". \n", ".\n"), insertions)
}

fn prompt(context: &str, value: &str, num_v: usize) -> (String, String) {
    let num_v = num_v.to_string();
    let fields = [
        ("context", context),
        ("query", value),
        ("num_v", num_v.as_str()),
    ];
    (
        fill(VARIABLE_TRACKING.template, &fields),
        fill(VARIABLE_TRACKING.answer_prefix, &fields),
    )
}

/// RULER's one-shot example: a full task of ~500 tokens with its answer, generated once
/// per run seed (the example's structure is shared by all samples, as in RULER).
fn icl_example(
    spec: &SampleSpec,
    num_chains: usize,
    num_hops: usize,
    counter: &dyn TokenCounter,
) -> (String, Vec<String>) {
    let mut rng = spec.seed_only_rng("vt-icl-chains");
    let chains = chains(&mut rng, num_chains, num_hops, true);
    let build = |n: usize| {
        let mut layout = spec.seed_only_rng("vt-icl-layout");
        let (ctx, _) = context(n, &chains, &mut layout);
        let (input, prefix) = prompt(&ctx, ICL_VALUE, num_hops + 1);
        format!("{input}{prefix} {}\n", chains[0].vars.join(" "))
    };
    // RULER fits the example to 500 tokens with nothing to generate; if even one noise
    // block is too long for the counter, the smallest example is used.
    let min = num_hops + 1;
    let n = largest_fitting(min, unit_cap(ICL_LENGTH), ICL_LENGTH, |n| {
        counter.count_tokens(&build(n))
    })
    .unwrap_or(min);
    (build(n), chains[0].vars.clone())
}

/// RULER's `randomize_icl`: fresh names of the same length for the example's answer
/// variables and a fresh value, so samples do not share the example's literal answers.
fn randomize_icl(example: &str, answer_vars: &[String], rng: &mut SampleRng) -> String {
    let mut out = example.to_string();
    for var in answer_vars {
        let fresh = loop {
            let f = rng.string_from(UPPERCASE, var.len());
            if f != "VAR" {
                break f;
            }
        };
        out = out.replace(var.as_str(), &fresh);
    }
    let value = rng.randint(10_000, 99_998).to_string();
    out.replace(ICL_VALUE, &value)
}

pub(crate) fn generate(
    spec: &SampleSpec,
    config: &TaskConfig,
    counter: &dyn TokenCounter,
    _corpus: &Corpus,
) -> Result<Sample, EvalError> {
    let TaskFamily::VariableTracking {
        num_chains,
        num_hops,
    } = config.family
    else {
        unreachable!("vt::generate called for {:?}", config.family);
    };
    let (example, example_vars) = icl_example(spec, num_chains, num_hops, counter);
    let mut rng = spec.fixed_rng();
    let example = randomize_icl(&example, &example_vars, &mut rng);
    let chains = chains(&mut rng, num_chains, num_hops, false);
    let value = chains[0].links[0]
        .rsplit('=')
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    let references = chains[0].vars.clone();
    let build = |n: usize| {
        let mut layout = spec.layout_rng();
        let (ctx, insertions) = context(n, &chains, &mut layout);
        let (input, answer_prefix) = prompt(&ctx, &value, num_hops + 1);
        // RULER puts the example in front of the task template (after any model template).
        Built {
            input: format!("{example}\n{input}"),
            answer_prefix,
            references: references.clone(),
            insertions,
        }
    };
    fit_sample(
        spec,
        config,
        counter,
        (num_hops + 1)..=unit_cap(spec.length),
        build,
    )
}
