//! One perplexity run over planned windows: the model's scored logits in, per-window and total
//! perplexity out, with the saved-logits file written and/or compared along the way.

use std::path::Path;

use gattn_model::{KvCache, LogitsFor, Qwen3Config, Qwen3Model};
use serde::Serialize;

use super::PerplexityError;
use super::kld::{KlStats, KlSummary, compare};
use super::logits_file::{
    LogitsFileHeader, LogitsFileReader, LogitsFileWriter, PositionRecord, model_fingerprint,
    text_fingerprint,
};
use super::score::{NllAccumulator, score_position, top_k};
use super::windows::Window;

/// The logits of `window`'s scored positions, `[window.scored(), vocab]`, from an empty cache.
/// The first half runs with `LogitsFor::Last` (its logits are not scored), so the lm_head runs
/// only over the second half.
pub fn scored_logits(
    model: &Qwen3Model,
    window: &Window,
    tokens: &[u32],
    cache: &mut KvCache,
) -> gattn_model::Result<Vec<f32>> {
    cache.clear();
    let tokens = window.tokens(tokens);
    let first = window.first_scored();
    model.forward(&tokens[..first], cache, LogitsFor::Last)?;
    let mut logits = model.forward(&tokens[first..window.ctx - 1], cache, LogitsFor::All)?;
    logits.truncate(window.scored() * model.config.vocab_size);
    Ok(logits)
}

/// Where a run's saved logits go and what it is compared with.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogitsFiles<'a> {
    /// `--save-logits FILE` and whether it may replace an existing file (`--force`).
    pub save: Option<(&'a Path, bool)>,
    /// `--kl-divergence FILE`.
    pub compare: Option<&'a Path>,
    /// Log-probabilities kept per position when saving.
    pub top_k: usize,
}

/// A window's result as it is printed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WindowResult {
    pub start: usize,
    pub perplexity: f64,
    /// Over all windows so far, as llama-perplexity prints it.
    pub running_perplexity: f64,
}

/// What `gattn-cpu perplexity --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerplexityReport {
    pub perplexity: f64,
    pub perplexity_stderr: Option<f64>,
    pub mean_nll: f64,
    pub tokens_scored: usize,
    pub ctx: usize,
    pub windows: Vec<WindowResult>,
    /// `kl_divergence.mean_kld`, repeated at the top level.
    pub mean_kld: Option<f64>,
    pub kl_divergence: Option<KlSummary>,
}

pub struct PerplexityRun {
    header: LogitsFileHeader,
    nll: NllAccumulator,
    windows: Vec<WindowResult>,
    save: Option<LogitsFileWriter>,
    top_k: usize,
    compare: Option<(LogitsFileReader, KlStats)>,
    ids: Vec<u32>,
}

impl PerplexityRun {
    /// Opens (and checks) the file to compare with before creating the one to save, so a
    /// mismatch costs no model run.
    pub fn new(
        config: &Qwen3Config,
        windows: &[Window],
        tokens: &[u32],
        files: LogitsFiles,
    ) -> Result<PerplexityRun, PerplexityError> {
        let ctx = windows.first().map_or(0, |w| w.ctx);
        let stride = match windows {
            [a, b, ..] => b.start - a.start,
            _ => ctx,
        };
        let top_k = files.top_k.clamp(1, config.vocab_size);
        let header = LogitsFileHeader {
            vocab_size: to_u32(config.vocab_size, "vocab_size")?,
            ctx: to_u32(ctx, "ctx")?,
            stride: to_u32(stride, "stride")?,
            top_k: to_u32(top_k, "top_k")?,
            windows: to_u32(windows.len(), "windows")?,
            positions: windows.iter().map(|w| w.scored() as u64).sum(),
            model_fingerprint: model_fingerprint(config),
            text_fingerprint: text_fingerprint(windows, tokens),
        };
        let compare = match files.compare {
            Some(path) => {
                let reader = LogitsFileReader::open(path)?;
                reader.header().check_matches(&header, path)?;
                Some((reader, KlStats::default()))
            }
            None => None,
        };
        let save = match files.save {
            Some((path, force)) => Some(LogitsFileWriter::create(path, header.clone(), force)?),
            None => None,
        };
        Ok(PerplexityRun {
            header,
            nll: NllAccumulator::default(),
            windows: Vec::new(),
            save,
            top_k,
            compare,
            ids: Vec::new(),
        })
    }

    /// Scores one window: `logits` are its scored positions' (`[window.scored(), vocab]`, as
    /// [`scored_logits`] gives them).
    pub fn add_window(
        &mut self,
        window: &Window,
        tokens: &[u32],
        logits: &[f32],
    ) -> Result<WindowResult, PerplexityError> {
        let vocab = self.header.vocab_size as usize;
        let targets = window.targets(tokens);
        if logits.len() != targets.len() * vocab {
            return Err(PerplexityError::InvalidArgument {
                what: "window logits",
                reason: format!(
                    "{} values for {} positions of vocab {vocab}",
                    logits.len(),
                    targets.len()
                ),
            });
        }
        let mut window_nll = NllAccumulator::default();
        for (i, (row, &target)) in logits.chunks_exact(vocab).zip(targets).enumerate() {
            if target as usize >= vocab {
                return Err(PerplexityError::InvalidArgument {
                    what: "token",
                    reason: format!(
                        "id {target} at text position {} is not below vocab {vocab}",
                        window.start + window.first_scored() + 1 + i
                    ),
                });
            }
            let score = score_position(row, target);
            if score.target_logprob.is_nan() {
                return Err(PerplexityError::InvalidArgument {
                    what: "logits",
                    reason: format!(
                        "NaN at text position {} (the model's output is not finite)",
                        window.start + window.first_scored() + i
                    ),
                });
            }
            self.nll.add(-score.target_logprob);
            window_nll.add(-score.target_logprob);
            if let Some(writer) = &mut self.save {
                writer.write(&PositionRecord {
                    target,
                    target_logprob: score.target_logprob as f32,
                    logsumexp: score.logsumexp as f32,
                    top: top_k(row, score.logsumexp, self.top_k, &mut self.ids),
                })?;
            }
            if let Some((reader, stats)) = &mut self.compare {
                let base = reader
                    .next_record()?
                    .ok_or_else(|| PerplexityError::BadLogitsFile {
                        path: reader.path().to_path_buf(),
                        field: "positions".into(),
                        reason: "fewer records than this run scores".into(),
                    })?;
                if base.target != target {
                    return Err(PerplexityError::Mismatch {
                        path: reader.path().to_path_buf(),
                        field: "correct token",
                        saved: format!("token {}", base.target),
                        run: format!("token {target}"),
                    });
                }
                stats.add(&base, compare(&base, row, score.logsumexp, score.argmax));
            }
        }
        let result = WindowResult {
            start: window.start,
            perplexity: window_nll.perplexity(),
            running_perplexity: self.nll.perplexity(),
        };
        self.windows.push(result);
        Ok(result)
    }

    /// Closes the saved-logits file (moving it into place) and sums up.
    pub fn finish(self) -> Result<PerplexityReport, PerplexityError> {
        if let Some(writer) = self.save {
            writer.finish()?;
        }
        let kl_divergence = self.compare.and_then(|(_, stats)| stats.summary());
        Ok(PerplexityReport {
            perplexity: self.nll.perplexity(),
            perplexity_stderr: self.nll.perplexity_stderr(),
            mean_nll: self.nll.mean_nll(),
            tokens_scored: self.nll.count(),
            ctx: self.header.ctx as usize,
            windows: self.windows,
            mean_kld: kl_divergence.as_ref().map(|k| k.mean_kld),
            kl_divergence,
        })
    }
}

fn to_u32(value: usize, what: &'static str) -> Result<u32, PerplexityError> {
    u32::try_from(value).map_err(|_| PerplexityError::InvalidArgument {
        what,
        reason: format!("{value} does not fit the saved-logits file's u32 field"),
    })
}
