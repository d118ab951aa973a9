//! RULER's QA generator (`scripts/data/synthetic/qa.py`): a SQuAD or HotpotQA question
//! with its gold documents hidden among distractor documents.

use super::{Built, SampleSpec, fit_sample};
use crate::corpus::{Corpus, QaDataset};
use crate::error::EvalError;
use crate::generate::Sample;
use crate::task::{QaSource, TaskConfig, TaskFamily};
use crate::templates::{QA, QA_DOCUMENT, fill};
use crate::tokens::TokenCounter;

pub(crate) fn generate(
    spec: &SampleSpec,
    config: &TaskConfig,
    counter: &dyn TokenCounter,
    corpus: &Corpus,
) -> Result<Sample, EvalError> {
    let TaskFamily::Qa { dataset } = config.family else {
        unreachable!("qa::generate called for {:?}", config.family);
    };
    let (data, flag, name): (Option<&QaDataset>, _, _) = match dataset {
        QaSource::Squad => (corpus.squad.as_ref(), "squad", "SQuAD"),
        QaSource::HotpotQa => (corpus.hotpotqa.as_ref(), "hotpotqa", "HotpotQA"),
    };
    let data = data.ok_or(EvalError::MissingQaDataset {
        task: spec.task.as_str(),
        flag,
        dataset: name,
    })?;
    // RULER takes question `index` in file order; the seed only moves the distractors.
    let item = data
        .items
        .get(spec.index)
        .ok_or(EvalError::QaIndexOutOfRange {
            task: spec.task.as_str(),
            index: spec.index,
            available: data.items.len(),
        })?;
    let total = data.docs.len();
    let gold = &item.context;
    let more = &item.more_context;

    let build = |num_docs: usize| {
        let mut rng = spec.layout_rng();
        let mut chosen: Vec<usize> = if num_docs < total {
            if num_docs - gold.len() > more.len() {
                // Every same-article document, then random others.
                let additional: Vec<usize> = (0..total)
                    .filter(|i| !gold.contains(i) && !more.contains(i))
                    .collect();
                let extra = num_docs - gold.len() - more.len();
                let mut c: Vec<usize> = gold.iter().chain(more).copied().collect();
                c.extend(rng.sample(&additional, extra.min(additional.len())));
                c
            } else {
                let mut c = gold.clone();
                c.extend(rng.sample(more, num_docs - gold.len()));
                c
            }
        } else {
            (0..total).collect()
        };
        spec.seed_only_rng("qa-doc-order").shuffle(&mut chosen);
        let context = chosen
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                let i = (i + 1).to_string();
                fill(
                    QA_DOCUMENT,
                    &[("i", i.as_str()), ("document", &data.docs[d])],
                )
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        let fields = [
            ("context", context.as_str()),
            ("query", item.query.as_str()),
        ];
        Built {
            input: fill(QA.template, &fields),
            answer_prefix: fill(QA.answer_prefix, &fields),
            references: item.outputs.clone(),
            insertions: Vec::new(),
        }
    };
    let min_docs = gold.len().max(1);
    fit_sample(spec, config, counter, min_docs..=total.max(min_docs), build)
}
