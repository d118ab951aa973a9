//! RULER's needle-in-a-haystack generator (`scripts/data/synthetic/niah.py`).

use std::collections::HashSet;

use super::{Built, Insertion, SampleSpec, fit_sample, push_words, unit_cap};
use crate::corpus::Corpus;
use crate::error::EvalError;
use crate::generate::Sample;
use crate::rng::SampleRng;
use crate::task::{HaystackKind, NeedleKind, TaskConfig, TaskFamily};
use crate::templates::{NIAH, NIAH_NEEDLE, NOISE, fill};
use crate::tokens::TokenCounter;

/// RULER's `DEPTHS = np.round(np.linspace(0, 100, num=40)).astype(int)`.
pub(crate) fn depths() -> [u32; 40] {
    let mut out = [0u32; 40];
    for (i, d) in out.iter_mut().enumerate() {
        // No value lands on .5 (i * 100 / 39 is never half-integral), so rounding is plain.
        *d = (i as f64 * 100.0 / 39.0).round() as u32;
    }
    out
}

fn random_value(rng: &mut SampleRng, kind: NeedleKind, corpus: &Corpus) -> String {
    match kind {
        // RULER: random.choice over every "adjective-noun" pair.
        NeedleKind::Words => format!(
            "{}-{}",
            rng.choose(&corpus.adjectives),
            rng.choose(&corpus.nouns)
        ),
        // RULER: random.randint(10**6, 10**7 - 1).
        NeedleKind::Numbers => rng.randint(1_000_000, 9_999_999).to_string(),
        NeedleKind::Uuids => rng.uuid4(),
    }
}

fn needle(kind_v: NeedleKind, key: &str, value: &str) -> String {
    fill(
        NIAH_NEEDLE,
        &[
            ("type_needle_v", kind_v.plural()),
            ("key", key),
            ("value", value),
        ],
    )
}

/// RULER's singular rewrite when a single value is asked for, applied in its order.
fn singular(text: &str) -> String {
    text.replace("Some", "A")
        .replace("are all", "is")
        .replace("are", "is")
        .replace("answers", "answer")
}

struct Needles {
    keys: Vec<String>,
    /// Values per key.
    values: Vec<Vec<String>>,
    /// Needle sentences in insertion order (shuffled like RULER's fixed-seed shuffle).
    texts: Vec<String>,
    /// Which keys are asked for, in query order.
    queried: Vec<usize>,
}

pub(crate) fn generate(
    spec: &SampleSpec,
    config: &TaskConfig,
    counter: &dyn TokenCounter,
    corpus: &Corpus,
) -> Result<Sample, EvalError> {
    let TaskFamily::Niah {
        haystack,
        key: key_kind,
        value: value_kind,
        num_needle_k,
        num_needle_v,
        num_needle_q,
    } = config.family
    else {
        unreachable!("niah::generate called for {:?}", config.family);
    };
    // RULER: args.num_needle_k = max(args.num_needle_k, args.num_needle_q)
    let num_needle_k = num_needle_k.max(num_needle_q);

    let mut rng = spec.fixed_rng();
    let mut keys = Vec::with_capacity(num_needle_k);
    let mut values = Vec::with_capacity(num_needle_k);
    let mut texts = Vec::new();
    for _ in 0..num_needle_k {
        let key = random_value(&mut rng, key_kind, corpus);
        let mut vs = Vec::with_capacity(num_needle_v);
        for _ in 0..num_needle_v {
            let v = random_value(&mut rng, value_kind, corpus);
            texts.push(needle(value_kind, &key, &v));
            vs.push(v);
        }
        keys.push(key);
        values.push(vs);
    }
    spec.seed_only_rng("niah-needle-order").shuffle(&mut texts);
    let queried = rng.sample_indices(num_needle_k, num_needle_q);
    let needles = Needles {
        keys,
        values,
        texts,
        queried,
    };

    let single = num_needle_q * num_needle_v == 1;
    let (template, prefix_template, type_needle_v) = if single {
        let plural = value_kind.plural();
        (
            singular(NIAH.template),
            singular(NIAH.answer_prefix),
            &plural[..plural.len() - 1],
        )
    } else {
        (
            NIAH.template.to_string(),
            NIAH.answer_prefix.to_string(),
            value_kind.plural(),
        )
    };
    let queries: Vec<&str> = needles
        .queried
        .iter()
        .map(|&i| needles.keys[i].as_str())
        .collect();
    let query = match queries.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{}, and {last}", rest.join(", ")),
        _ => queries.join(""),
    };
    let references: Vec<String> = needles
        .queried
        .iter()
        .flat_map(|&i| needles.values[i].iter().cloned())
        .collect();
    let answer_prefix = fill(
        &prefix_template,
        &[("type_needle_v", type_needle_v), ("query", &query)],
    );

    let build = |n: usize| {
        let mut layout = spec.layout_rng();
        let (context, insertions) = match haystack {
            HaystackKind::Essay => essay_context(corpus, n, &needles.texts, &mut layout),
            HaystackKind::Noise => {
                line_context(n, &needles.texts, &mut layout, |_| NOISE.to_string())
            }
            HaystackKind::Needle => {
                let real: HashSet<&str> = needles.keys.iter().map(String::as_str).collect();
                line_context(n, &needles.texts, &mut layout, |rng| {
                    // Distractors never reuse a real key, so the question stays well-posed
                    // (RULER does not check; a collision there is astronomically rare).
                    let key = loop {
                        let k = random_value(rng, key_kind, corpus);
                        if !real.contains(k.as_str()) {
                            break k;
                        }
                    };
                    let value = random_value(rng, value_kind, corpus);
                    needle(value_kind, &key, &value)
                })
            }
        };
        let input = fill(
            &template,
            &[
                ("type_needle_v", type_needle_v),
                ("context", &context),
                ("query", &query),
            ],
        );
        Built {
            input,
            answer_prefix: answer_prefix.clone(),
            references: references.clone(),
            insertions,
        }
    };
    let min_units = match haystack {
        HaystackKind::Essay => 1,
        // random.sample(range(n), len(needles)) needs n >= len(needles).
        _ => needles.texts.len(),
    };
    fit_sample(
        spec,
        config,
        counter,
        min_units..=unit_cap(spec.length),
        build,
    )
}

/// RULER's essay haystack: the first `n` words (repeating the corpus if needed), split into
/// sentences, with the needles put after `int(sentences * depth / 100)` sentences for
/// depths drawn without replacement from [`depths`].
fn essay_context(
    corpus: &Corpus,
    n: usize,
    needles: &[String],
    rng: &mut SampleRng,
) -> (String, Vec<Insertion>) {
    let essay = &corpus.essay;
    let per_copy = essay.words.len();
    // Sentence boundaries of the prefix: whole-corpus boundaries repeated per copy, plus n.
    let mut ends = Vec::new();
    'copies: for copy in 0.. {
        for &e in &essay.sentence_ends {
            let end = copy * per_copy + e;
            if end >= n {
                break 'copies;
            }
            ends.push(end);
        }
    }
    ends.push(n);
    let num_sentences = ends.len();
    let sentence_start = |s: usize| if s == 0 { 0 } else { ends[s - 1] };

    let mut chosen: Vec<u32> = rng.sample(&depths(), needles.len());
    chosen.sort_unstable();
    // Python: int(len(document_sents) * (depth / 100)), float math included.
    let mut positions = vec![0usize];
    positions.extend(
        chosen
            .iter()
            .map(|&d| (num_sentences as f64 * (f64::from(d) / 100.0)) as usize),
    );
    positions.push(num_sentences);

    let mut context = String::with_capacity(n * 7);
    let mut insertions = Vec::with_capacity(needles.len());
    for i in 1..positions.len() {
        if i > 1 {
            context.push(' ');
        }
        let (from, to) = (positions[i - 1], positions[i]);
        if from < to {
            push_words(
                &mut context,
                &essay.words,
                sentence_start(from),
                sentence_start(to),
            );
        }
        if let Some(text) = needles.get(i - 1) {
            context.push(' ');
            context.push_str(text);
            insertions.push(Insertion {
                text: text.clone(),
                depth: f64::from(chosen[i - 1]) / 100.0,
            });
        }
    }
    (context, insertions)
}

/// RULER's line haystacks (`noise`/`repeat` and `needle`): `n` lines, the needles inserted
/// before the lines at `sorted(random.sample(range(n), len(needles)), reverse=True)`,
/// the first needle at the largest index; lines joined by newlines.
fn line_context(
    n: usize,
    needles: &[String],
    rng: &mut SampleRng,
    mut line: impl FnMut(&mut SampleRng) -> String,
) -> (String, Vec<Insertion>) {
    let lines: Vec<String> = (0..n).map(|_| line(rng)).collect();
    let mut at = rng.sample_indices(n, needles.len());
    at.sort_unstable_by(|a, b| b.cmp(a));
    // before[i] = the needle that ends up right in front of original line i.
    let mut before: Vec<Option<&String>> = vec![None; n];
    let mut insertions = Vec::with_capacity(needles.len());
    for (&i, text) in at.iter().zip(needles) {
        before[i] = Some(text);
        insertions.push(Insertion {
            text: text.clone(),
            depth: i as f64 / n as f64,
        });
    }
    let mut context = String::with_capacity(n * (NOISE.len() + 1));
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            context.push('\n');
        }
        if let Some(text) = before[i] {
            context.push_str(text);
            context.push('\n');
        }
        context.push_str(l);
    }
    (context, insertions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depths_match_numpy_linspace_rounding() {
        let d = depths();
        assert_eq!(&d[..6], &[0, 3, 5, 8, 10, 13]);
        assert_eq!(d[19], 49);
        assert_eq!(d[20], 51);
        assert_eq!(d[39], 100);
    }

    #[test]
    fn singular_rewrite_matches_ruler() {
        let t = singular(NIAH.template);
        assert!(t.starts_with("A special magic {type_needle_v} is hidden"));
        assert!(t.ends_with(
            "What is the special magic {type_needle_v} for {query} mentioned in the provided text?"
        ));
        assert_eq!(
            singular(NIAH.answer_prefix),
            " The special magic {type_needle_v} for {query} mentioned in the provided text is"
        );
    }
}
