//! `run.json`: the settings that decide what a run's predictions mean. A rerun into the same
//! directory and a merge of shards must agree on them, or their scores would be mixed.

use std::path::Path;

use crate::run::error::RunError;

pub const SETTINGS_FILE: &str = "run.json";

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunSettings {
    /// The checkpoint directory's name (the label of the run in comparisons).
    pub model: String,
    pub weights: String,
    pub rope_scaling: Option<String>,
    pub chat: bool,
    pub seed: u64,
    /// Where the essay haystack came from (the builtin substitute or `--essays DIR`).
    pub essays: String,
}

impl RunSettings {
    pub fn read(dir: &Path) -> Result<Option<RunSettings>, RunError> {
        let path = dir.join(SETTINGS_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| RunError::BadRunDir {
                    path,
                    reason: format!("not a run.json written by `gattn-cpu ruler`: {e}"),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(RunError::io(path)(e)),
        }
    }

    pub fn write(&self, dir: &Path) -> Result<(), RunError> {
        let path = dir.join(SETTINGS_FILE);
        let text = serde_json::to_string_pretty(self).expect("settings serialize");
        std::fs::write(&path, text + "\n").map_err(RunError::io(path))
    }

    /// Names the first setting that differs, for the error message.
    pub fn difference(&self, other: &RunSettings) -> Option<String> {
        let pairs = [
            ("model", self.model.clone(), other.model.clone()),
            ("--weights", self.weights.clone(), other.weights.clone()),
            (
                "--rope-scaling",
                format!("{:?}", self.rope_scaling),
                format!("{:?}", other.rope_scaling),
            ),
            ("--chat", self.chat.to_string(), other.chat.to_string()),
            ("--seed", self.seed.to_string(), other.seed.to_string()),
            ("--essays", self.essays.clone(), other.essays.clone()),
        ];
        pairs
            .into_iter()
            .find(|(_, a, b)| a != b)
            .map(|(name, a, b)| format!("{name} is {a} here but {b} there"))
    }
}
