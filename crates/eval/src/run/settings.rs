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
    /// SHA-256 of the `--essays`, `--squad` and `--hotpotqa` files (`builtin` without them).
    pub data_fingerprint: String,
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
const REQUIRED_FIELDS: [&str; 9] = [
    "model_fingerprint",
    "data_fingerprint",
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
        let text = match gattn_tensor::input_file::read_regular_to_string(&path, 16 << 20) {
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
    fn compared(&self) -> [(&'static str, String); 12] {
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
            (
                "data (--essays, --squad, --hotpotqa fingerprint)",
                self.data_fingerprint.clone(),
            ),
            ("--tasks", tasks.join(",")),
            ("--lengths", lengths.join(",")),
            ("--samples", self.samples.to_string()),
            ("--shard", self.shard.clone()),
        ]
    }

    /// The run's plan as its flags (`--tasks a,b, --lengths 1K, --samples 20, --shard 0/1`), for
    /// errors about a sample outside it.
    pub fn plan_flags(&self) -> String {
        const PLAN: [&str; 4] = ["--tasks", "--lengths", "--samples", "--shard"];
        self.compared()
            .into_iter()
            .filter(|(flag, _)| PLAN.contains(flag))
            .map(|(flag, value)| format!("{flag} {value}"))
            .collect::<Vec<_>>()
            .join(", ")
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

    /// What refuses resuming `previous` with these settings: any difference but a plan that
    /// grew (more tasks, lengths or samples: the new samples are evaluated, none is dropped).
    pub fn resume_difference(&self, previous: &RunSettings) -> Option<String> {
        let keeps_previous_plan = previous.tasks.iter().all(|t| self.tasks.contains(t))
            && previous.lengths.iter().all(|l| self.lengths.contains(l))
            && self.samples >= previous.samples;
        if keeps_previous_plan {
            let as_before = RunSettings {
                tasks: previous.tasks.clone(),
                lengths: previous.lengths.clone(),
                samples: previous.samples,
                ..self.clone()
            };
            return as_before.difference(previous, true);
        }
        self.difference(previous, true).map(|diff| {
            if ["--tasks", "--lengths", "--samples"]
                .iter()
                .any(|f| diff.starts_with(f))
            {
                format!("{diff}; a rerun may add tasks, lengths or samples, not drop them")
            } else {
                diff
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> RunSettings {
        RunSettings {
            model: "m".into(),
            model_fingerprint: "f00d".into(),
            weights: "bf16".into(),
            kv: "bf16".into(),
            rope_scaling: None,
            chat: false,
            seed: 42,
            essays: "builtin".into(),
            data_fingerprint: "builtin".into(),
            tasks: vec![TaskName::NiahSingle1],
            lengths: vec![1024],
            samples: 2,
            shard: "0/1".into(),
            kernels: "avx2".into(),
            missing: Vec::new(),
        }
    }

    #[test]
    fn a_resume_may_grow_the_plan_but_not_drop_from_it_or_change_a_setting() {
        let before = settings();
        let grown = RunSettings {
            tasks: vec![TaskName::NiahSingle1, TaskName::Vt],
            lengths: vec![1024, 2048],
            samples: 3,
            kernels: "avx512".into(), // information only
            ..settings()
        };
        assert_eq!(grown.resume_difference(&before), None);
        let fewer = RunSettings {
            samples: 1,
            ..settings()
        };
        let diff = fewer.resume_difference(&before).unwrap();
        assert!(
            diff.starts_with("--samples is 1 here but 2 there"),
            "{diff}"
        );
        assert!(diff.contains("not drop them"), "{diff}");
        let int8 = RunSettings {
            kv: "int8".into(),
            samples: 3,
            ..settings()
        };
        let diff = int8.resume_difference(&before).unwrap();
        assert_eq!(diff, "--kv is int8 here but bf16 there");
        let other_shard = RunSettings {
            shard: "1/2".into(),
            ..settings()
        };
        let diff = other_shard.resume_difference(&before).unwrap();
        assert_eq!(diff, "--shard is 1/2 here but 0/1 there");
    }
}
