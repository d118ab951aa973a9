//! `gattn-cpu ruler`: generate each planned sample in the model's tokens, greedy-decode it,
//! score it as RULER does, and append it to predictions.jsonl.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gattn_model::Existing;
use gattn_model::output::prepare_dir;
use gattn_model::{
    GenerateOptions, Qwen3Config, Qwen3Model, RopeScaling, Sampler, SamplingParams, StopReason,
    Tokenizer, WeightFormat, generate,
};
use sha2::{Digest, Sha256};

use crate::corpus::Corpus;
use crate::error::EvalError;
use crate::generate::{SampleSpec, generate_sample_with};
use crate::run::chat::ChatTemplate;
use crate::run::context::check_lengths;
use crate::run::counter::TokenizerCounter;
use crate::run::error::RunError;
use crate::run::fingerprint::{data_fingerprint, model_fingerprint};
use crate::run::lock::RunLock;
use crate::run::plan::{Shard, WorkItem};
use crate::run::progress::Progress;
use crate::run::record::{
    PREDICTIONS_FILE, PredictionRecord, PredictionsWriter, Timings, read_predictions,
};
use crate::run::report::write_reports;
use crate::run::settings::{RunSettings, SETTINGS_FILE};
use crate::score::{ScoreTable, score};
use crate::task::{QaSource, TaskFamily, TaskName};
use crate::tokens::{CharCounter, TokenCounter};

/// Everything `gattn-cpu ruler` was asked to do.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub model_dir: PathBuf,
    pub weights: WeightFormat,
    /// KV-cache storage (`--kv`).
    pub kv: gattn_model::KvDtype,
    /// `--rope-scaling` as typed (`yarn:4`, `yarn:4:32768`, `linear:2`, `none`).
    pub rope_scaling: Option<String>,
    pub tasks: Vec<TaskName>,
    pub lengths: Vec<usize>,
    pub samples: usize,
    pub seed: u64,
    /// Wrap the task in the model's chat template instead of RULER's raw template.
    pub chat: bool,
    pub shard: Shard,
    pub essays: Option<PathBuf>,
    pub squad: Option<PathBuf>,
    pub hotpotqa: Option<PathBuf>,
    pub out: PathBuf,
    /// Write into an `out` that holds files but no run (`--force`); a run's own directory
    /// is resumed without it.
    pub force: bool,
    /// Progress on stderr (a bar on a terminal, a line per sample otherwise).
    pub progress: bool,
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Over every sample in the output directory (this shard's, earlier runs' included).
    pub table: ScoreTable,
    /// Samples evaluated by this invocation.
    pub evaluated: usize,
    /// Planned samples found in predictions.jsonl already.
    pub resumed: usize,
    /// Tasks left out, with the reason (a QA task without its dataset).
    pub skipped: Vec<(TaskName, String)>,
    pub wall: Duration,
}

fn parse_scaling(
    options: &RunOptions,
    config: &Qwen3Config,
) -> Result<Option<RopeScaling>, RunError> {
    options
        .rope_scaling
        .as_deref()
        .map(|text| {
            RopeScaling::parse_cli(text, config.max_position_embeddings)
                .map_err(RunError::InvalidArgument)
        })
        .transpose()
}

fn load_corpus(options: &RunOptions) -> Result<Corpus, RunError> {
    let mut corpus = Corpus::builtin();
    if let Some(dir) = &options.essays {
        corpus.load_essays_dir(dir)?;
    }
    if let Some(path) = &options.squad {
        corpus.load_squad(path)?;
    }
    if let Some(path) = &options.hotpotqa {
        corpus.load_hotpotqa(path)?;
    }
    Ok(corpus)
}

/// QA tasks without their dataset are skipped with RULER's message; QA tasks asked for more
/// samples than their dataset has questions are refused before any work.
fn skipped_tasks(
    options: &RunOptions,
    corpus: &Corpus,
) -> Result<Vec<(TaskName, String)>, RunError> {
    let mut skipped = Vec::new();
    for &task in &options.tasks {
        let TaskFamily::Qa { dataset } = task.config().family else {
            continue;
        };
        let data = match dataset {
            QaSource::Squad => corpus.squad.as_ref(),
            QaSource::HotpotQa => corpus.hotpotqa.as_ref(),
        };
        match data {
            None => {
                // The generator's own error names the flag and the dataset.
                let spec = SampleSpec {
                    task,
                    length: options.lengths[0],
                    index: 0,
                    seed: options.seed,
                    reserved_tokens: 0,
                };
                match generate_sample_with(&spec, &CharCounter { chars_per_token: 4 }, corpus) {
                    Err(e @ EvalError::MissingQaDataset { .. }) => {
                        skipped.push((task, e.to_string()))
                    }
                    Err(e) => return Err(e.into()),
                    Ok(_) => {}
                }
            }
            Some(d) if d.items.len() < options.samples => {
                return Err(RunError::InvalidArgument(format!(
                    "--samples {} but the {} file for {task} has only {} answerable questions",
                    options.samples,
                    match dataset {
                        QaSource::Squad => "--squad",
                        QaSource::HotpotQa => "--hotpotqa",
                    },
                    d.items.len()
                )));
            }
            Some(_) => {}
        }
    }
    Ok(skipped)
}

fn validate(options: &RunOptions) -> Result<(), RunError> {
    if options.samples == 0 {
        return Err(RunError::InvalidArgument(
            "--samples must be at least 1".into(),
        ));
    }
    if options.lengths.is_empty() || options.lengths.contains(&0) {
        return Err(RunError::InvalidArgument(
            "--lengths needs one or more positive token counts".into(),
        ));
    }
    if options.tasks.is_empty() {
        return Err(RunError::InvalidArgument("--tasks names no task".into()));
    }
    Ok(())
}

fn weights_name(format: WeightFormat) -> String {
    format.name().into()
}

fn model_label(dir: &Path) -> String {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// Creates `options.out` and takes its lock. A directory that holds files but no run.json is
/// somebody else's: refused unless `--force`.
fn open_run_dir(options: &RunOptions) -> Result<RunLock, RunError> {
    let out = &options.out;
    let is_run = out.join(SETTINGS_FILE).exists();
    prepare_dir(out, Existing::from_force(options.force || is_run))?;
    RunLock::acquire(out)
}

/// Runs (or resumes) a RULER evaluation into `options.out`.
pub fn run_ruler(options: &RunOptions) -> Result<RunOutcome, RunError> {
    let start = Instant::now();
    validate(options)?;
    let config = Qwen3Config::from_dir(&options.model_dir)?;
    let scaling = parse_scaling(options, &config)?;
    check_lengths(
        &options.lengths,
        &config,
        options.rope_scaling.as_deref().zip(scaling.as_ref()),
    )?;
    let corpus = load_corpus(options)?;
    let skipped = skipped_tasks(options, &corpus)?;
    for (_, reason) in &skipped {
        eprintln!("ruler: {reason}");
    }

    let skipped_names: HashSet<TaskName> = skipped.iter().map(|s| s.0).collect();
    let mut tasks: Vec<TaskName> = options
        .tasks
        .iter()
        .copied()
        .filter(|t| !skipped_names.contains(t))
        .collect();
    tasks.sort_unstable();
    tasks.dedup();
    let mut lengths = options.lengths.clone();
    lengths.sort_unstable();
    lengths.dedup();
    let settings = RunSettings {
        model: model_label(&options.model_dir),
        model_fingerprint: model_fingerprint(&options.model_dir)?,
        weights: weights_name(options.weights),
        kv: options.kv.name().into(),
        rope_scaling: options.rope_scaling.clone(),
        chat: options.chat,
        seed: options.seed,
        essays: corpus.essay_source.clone(),
        data_fingerprint: data_fingerprint(&[
            ("--essays", options.essays.as_deref()),
            ("--squad", options.squad.as_deref()),
            ("--hotpotqa", options.hotpotqa.as_deref()),
        ])?,
        tasks,
        lengths,
        samples: options.samples,
        shard: options.shard.to_string(),
        kernels: gattn_kernels::KernelTable::current().name().into(),
        missing: Vec::new(),
    };
    let _lock = open_run_dir(options)?;
    if let Some(previous) = RunSettings::read(&options.out)?
        && let Some(diff) = settings.resume_difference(&previous)
    {
        return Err(RunError::BadRunDir {
            path: options.out.clone(),
            reason: format!(
                "holds a run with other settings ({diff}): use another --out to keep both"
            ),
        });
    }

    let predictions_path = options.out.join(PREDICTIONS_FILE);
    let existing = read_predictions(&predictions_path)?;
    existing.check_against(&predictions_path, &settings)?;
    settings.write(&options.out)?;
    if existing.truncated_tail {
        eprintln!(
            "ruler: {}: dropping a truncated last line (an interrupted run); that sample runs again",
            predictions_path.display()
        );
    }
    let done: HashSet<WorkItem> = existing
        .records
        .iter()
        .map(PredictionRecord::item)
        .collect();
    let runnable = settings.planned()?;
    let resumed = runnable.iter().filter(|i| done.contains(i)).count();
    let pending: Vec<WorkItem> = runnable.into_iter().filter(|i| !done.contains(i)).collect();

    let mut records = existing.records.clone();
    let mut evaluated = 0;
    if !pending.is_empty() {
        let prompts = PromptBuilder {
            tokenizer: Tokenizer::from_dir(&options.model_dir)?,
            chat: options
                .chat
                .then(|| ChatTemplate::from_dir(&options.model_dir))
                .transpose()?,
            corpus: &corpus,
        };
        prompts.check_every_cell(&pending, options.seed)?;
        let mut writer = PredictionsWriter::open(&predictions_path, &existing)?;
        let evaluator = Evaluator::load(options, scaling, prompts)?;
        let mut progress = Progress::new(&pending, options.progress);
        let mut failure = None;
        for (k, item) in pending.iter().enumerate() {
            let sample_start = Instant::now();
            match evaluator
                .evaluate(item, options.seed)
                .and_then(|r| writer.append(&r).map(|()| r))
            {
                Ok(record) => {
                    progress.finished(
                        item,
                        record.score,
                        sample_start.elapsed(),
                        pending.get(k + 1),
                    );
                    records.push(record);
                    evaluated += 1;
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        progress.finish();
        if let Some(e) = failure {
            // Keep the reports in step with what was saved before failing.
            write_reports(&options.out, &settings, &records)?;
            return Err(e);
        }
    }
    let table = write_reports(&options.out, &settings, &records)?;
    Ok(RunOutcome {
        table,
        evaluated,
        resumed,
        skipped,
        wall: start.elapsed(),
    })
}

/// The model and what turns a planned sample into a scored prediction.
struct Evaluator<'c> {
    model: Qwen3Model,
    eos_token_ids: Vec<u32>,
    prompts: PromptBuilder<'c>,
}

/// Turns a planned sample into the exact prompt text and token ids.
struct PromptBuilder<'c> {
    tokenizer: Tokenizer,
    chat: Option<ChatTemplate>,
    corpus: &'c Corpus,
}

const PROMPT_HEAD_CHARS: usize = 100;
const PROMPT_TAIL_CHARS: usize = 200;

fn head(text: &str, n: usize) -> String {
    text.chars().take(n).collect()
}

fn tail(text: &str, n: usize) -> String {
    let count = text.chars().count();
    text.chars().skip(count.saturating_sub(n)).collect()
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn stop_name(stop: StopReason) -> &'static str {
    match stop {
        StopReason::Eos => "eos",
        StopReason::MaxTokens => "max_tokens",
        StopReason::ContextFull => "context_full",
        StopReason::Interrupted => "interrupted",
    }
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

impl<'c> Evaluator<'c> {
    fn load(
        options: &RunOptions,
        scaling: Option<RopeScaling>,
        prompts: PromptBuilder<'c>,
    ) -> Result<Evaluator<'c>, RunError> {
        let PromptBuilder {
            tokenizer,
            chat,
            corpus,
        } = prompts;
        let mut model = Qwen3Model::load(&options.model_dir, options.weights)?;
        model.kv_dtype = options.kv;
        if let Some(s) = scaling {
            model.set_rope_scaling(s);
        }
        let limit = model.config.max_position_embeddings;
        if let Some(&length) = options.lengths.iter().find(|&&l| l > limit) {
            // context_limit mirrors set_rope_scaling; if they ever disagree, trust the model.
            return Err(RunError::LengthOverContext {
                length,
                limit,
                why: "as the loaded model reports it".into(),
                suggestion: "raise --rope-scaling or drop the length".into(),
            });
        }
        let mut eos_token_ids = model.config.eos_token_ids.clone();
        // A chat turn ends with the template's end token (e.g. <|im_end|>), which a base
        // model's config.json may not list.
        if let Some(id) = chat
            .as_ref()
            .and_then(|c| tokenizer.token_to_id(c.eos_token()))
            && !eos_token_ids.contains(&id)
        {
            eos_token_ids.push(id);
        }
        Ok(Evaluator {
            model,
            eos_token_ids,
            prompts: PromptBuilder {
                tokenizer,
                chat,
                corpus,
            },
        })
    }

    fn evaluate(&self, item: &WorkItem, seed: u64) -> Result<PredictionRecord, RunError> {
        let build_start = Instant::now();
        let (sample, prompt, ids) = self.prompts.build(item, seed)?;
        let build_time = build_start.elapsed();

        let mut cache = self.model.new_cache(item.length);
        let mut sampler = Sampler::new(SamplingParams::default()); // temperature 0: greedy
        let mut generated = Vec::with_capacity(sample.tokens_to_generate);
        let stats = generate(
            &self.model,
            &mut cache,
            &ids,
            &mut sampler,
            GenerateOptions::new(sample.tokens_to_generate, &self.eos_token_ids),
            |token| {
                generated.push(token);
                Ok(true)
            },
        )?;
        let prediction = self.prompts.tokenizer.decode(&generated)?;
        let score = score(sample.task, &prediction, &sample.references);
        Ok(PredictionRecord {
            task: sample.task,
            length: sample.length,
            index: sample.index,
            seed,
            prompt_hash: sha256_hex(&prompt),
            prompt_tokens: ids.len(),
            prompt_head: head(&prompt, PROMPT_HEAD_CHARS),
            prompt_tail: tail(&prompt, PROMPT_TAIL_CHARS),
            prediction,
            references: sample.references,
            score,
            generated_tokens: stats.generated_tokens,
            stop: stop_name(stats.stop).into(),
            timings: Timings {
                build_ms: millis(build_time),
                prefill_ms: millis(stats.prefill_time),
                decode_ms: millis(stats.decode_time),
            },
            digest: String::new(),
        }
        .sealed())
    }
}

impl PromptBuilder<'_> {
    /// Fails before any inference if a task does not fit a length: one build per task and
    /// length (RULER's cwe uses shorter lists below 4K, so fitting is not monotone in length).
    fn check_every_cell(&self, pending: &[WorkItem], seed: u64) -> Result<(), RunError> {
        let mut first: BTreeMap<(TaskName, usize), WorkItem> = BTreeMap::new();
        for item in pending {
            first.entry((item.task, item.length)).or_insert(*item);
        }
        for item in first.values() {
            self.build(item, seed)?;
        }
        Ok(())
    }

    /// The sample and its exact prompt, filled so that prompt + tokens_to_generate fits the
    /// length. With a chat template the template's tokens are reserved (RULER's
    /// `model_template_token`), measured on an empty turn and corrected if token merges at
    /// the seams make the real prompt longer.
    fn build(
        &self,
        item: &WorkItem,
        seed: u64,
    ) -> Result<(crate::generate::Sample, String, Vec<u32>), RunError> {
        let counter = TokenizerCounter::new(&self.tokenizer);
        let mut reserved = match &self.chat {
            Some(chat) => counter.count_tokens(&chat.render_user_turn("")?),
            None => 0,
        };
        for _attempt in 0..4 {
            let spec = SampleSpec {
                task: item.task,
                length: item.length,
                index: item.index,
                seed,
                reserved_tokens: reserved,
            };
            let sample = generate_sample_with(&spec, &counter, self.corpus)?;
            if let Some(e) = counter.take_error() {
                return Err(e.into());
            }
            let prompt = match &self.chat {
                Some(chat) => chat.prompt(&sample.input, &sample.answer_prefix)?,
                None => sample.prompt(),
            };
            let ids = self.tokenizer.encode(&prompt)?;
            let needed = ids.len() + sample.tokens_to_generate;
            if needed <= item.length {
                return Ok((sample, prompt, ids));
            }
            reserved += needed - item.length;
        }
        Err(RunError::InvalidArgument(format!(
            "{} @ {}: the chat template's prompt keeps exceeding the length",
            item.task, item.length
        )))
    }
}
