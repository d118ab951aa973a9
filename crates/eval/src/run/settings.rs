//! `run.json`: the settings that decide what a run's predictions mean, and which samples the
//! run holds. A rerun into the same directory and a merge of shards must agree on them, or
//! their scores would be mixed; the first difference is named with both values.

use std::path::Path;

use gattn_model::Existing;
use gattn_model::output::write_atomic;

use crate::run::error::RunError;
use crate::run::plan::{Shard, WorkItem, plan};
use crate::task::TaskName;

pub const SETTINGS_FILE: &str = "run.json";

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunSettings {
    /// The checkpoint directory's name (the label of the run in tables; not compared).
    pub model: String,
    /// SHA-256 of the checkpoint's config, tokenizer and weight files (see `fingerprint.rs`).
    pub model_fingerprint: String,
    pub weights: String,
    /// KV-cache storage, resolved (`--kv auto` is recorded as what it chose).
    pub kv: String,
    pub rope_scaling: Option<String>,
    pub chat: bool,
    pub seed: u64,
    /// Where the essay haystack came from (the builtin substitute or `--essays DIR`).
    pub essays: String,
    /// The plan: tasks evaluated (QA tasks without their dataset left out), sorted lengths,
    /// samples per cell, and this directory's shard.
    pub tasks: Vec<TaskName>,
    pub lengths: Vec<usize>,
    pub samples: usize,
    pub shard: String,
    /// The SIMD kernel table of the run (information only: not compared, since the int8 and
    /// f32 paths give the same logits on every level).
    pub kernels: String,
    /// What a `ruler merge --partial` went without: absent shards, and shards missing samples
    /// (empty for a complete run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

/// Fields an older `run.json` lacks: such a run cannot be resumed or merged safely.
const REQUIRED_FIELDS: [&str; 8] = [
    "model_fingerprint",
    "kv",
    "tasks",
    "lengths",
    "samples",
    "shard",
    "kernels",
    "weights",
];

impl RunSettings {
    pub fn read(dir: &Path) -> Result<Option<RunSettings>, RunError> {
        let path = dir.join(SETTINGS_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(RunError::io(path)(e)),
        };
        let bad = |reason: String| RunError::BadRunDir {
            path: path.clone(),
            reason,
        };
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| bad(format!("not a run.json written by `gattn-cpu ruler`: {e}")))?;
        if let Some(missing) = REQUIRED_FIELDS.iter().find(|f| value.get(**f).is_none()) {
            return Err(bad(format!(
                "has no `{missing}`: written by an older gattn-cpu that did not record every \
                 setting its predictions depend on; it cannot be resumed or merged (run into a \
                 new --out)"
            )));
        }
        serde_json::from_value(value)
            .map(Some)
            .map_err(|e| bad(format!("not a run.json written by `gattn-cpu ruler`: {e}")))
    }

    /// Written atomically, replacing the directory's run.json (the caller owns the directory).
    pub fn write(&self, dir: &Path) -> Result<(), RunError> {
        let text = serde_json::to_string_pretty(self).expect("settings serialize") + "\n";
        Ok(write_atomic(
            &dir.join(SETTINGS_FILE),
            text.as_bytes(),
            Existing::Replace,
        )?)
    }

    pub fn shard(&self) -> Result<Shard, RunError> {
        self.shard.parse()
    }

    /// The samples this directory is meant to hold.
    pub fn planned(&self) -> Result<Vec<WorkItem>, RunError> {
        Ok(plan(
            &self.tasks,
            &self.lengths,
            self.samples,
            self.shard()?,
        ))
    }

    /// The samples of the whole sweep this directory is a shard of.
    pub fn planned_sweep(&self) -> Vec<WorkItem> {
        plan(&self.tasks, &self.lengths, self.samples, Shard::ALL)
    }

    /// Every compared setting as (flag, value): what must agree for predictions to mix.
    fn compared(&self) -> [(&'static str, String); 11] {
        let tasks: Vec<String> = self.tasks.iter().map(|t| t.to_string()).collect();
        let lengths: Vec<String> = self.lengths.iter().map(|l| l.to_string()).collect();
        [
            ("model (fingerprint)", self.model_fingerprint.clone()),
            ("--weights", self.weights.clone()),
            ("--kv", self.kv.clone()),
            (
                "--rope-scaling",
                self.rope_scaling
                    .clone()
                    .unwrap_or_else(|| "as in config.json".into()),
            ),
            ("--chat", self.chat.to_string()),
            ("--seed", self.seed.to_string()),
            ("--essays", self.essays.clone()),
            ("--tasks", tasks.join(",")),
            ("--lengths", lengths.join(",")),
            ("--samples", self.samples.to_string()),
            ("--shard", self.shard.clone()),
        ]
    }

    /// Names the first setting that differs and both values, for the error message; with
    /// `same_shard` false the shard may differ (merging shards of one sweep).
    pub fn difference(&self, other: &RunSettings, same_shard: bool) -> Option<String> {
        self.compared()
            .into_iter()
            .zip(other.compared())
            .filter(|((name, _), _)| same_shard || *name != "--shard")
            .find(|((_, a), (_, b))| a != b)
            .map(|((name, a), (_, b))| format!("{name} is {a} here but {b} there"))
    }
}
