//! The 13 RULER tasks and their settings, as in RULER's `scripts/synthetic.yaml`.

use std::fmt;
use std::str::FromStr;

use crate::error::EvalError;

/// RULER's task names, in the order of its result tables.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(into = "String", try_from = "String")]
pub enum TaskName {
    NiahSingle1,
    NiahSingle2,
    NiahSingle3,
    NiahMultikey1,
    NiahMultikey2,
    NiahMultikey3,
    NiahMultivalue,
    NiahMultiquery,
    Vt,
    Cwe,
    Fwe,
    Qa1,
    Qa2,
}

impl TaskName {
    const ALL: [TaskName; 13] = [
        TaskName::NiahSingle1,
        TaskName::NiahSingle2,
        TaskName::NiahSingle3,
        TaskName::NiahMultikey1,
        TaskName::NiahMultikey2,
        TaskName::NiahMultikey3,
        TaskName::NiahMultivalue,
        TaskName::NiahMultiquery,
        TaskName::Vt,
        TaskName::Cwe,
        TaskName::Fwe,
        TaskName::Qa1,
        TaskName::Qa2,
    ];

    pub fn all() -> &'static [TaskName] {
        &Self::ALL
    }

    /// RULER's own spelling, e.g. `niah_multikey_2`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskName::NiahSingle1 => "niah_single_1",
            TaskName::NiahSingle2 => "niah_single_2",
            TaskName::NiahSingle3 => "niah_single_3",
            TaskName::NiahMultikey1 => "niah_multikey_1",
            TaskName::NiahMultikey2 => "niah_multikey_2",
            TaskName::NiahMultikey3 => "niah_multikey_3",
            TaskName::NiahMultivalue => "niah_multivalue",
            TaskName::NiahMultiquery => "niah_multiquery",
            TaskName::Vt => "vt",
            TaskName::Cwe => "cwe",
            TaskName::Fwe => "fwe",
            TaskName::Qa1 => "qa_1",
            TaskName::Qa2 => "qa_2",
        }
    }

    /// Parses `all` or a comma-separated list of RULER task names.
    pub fn parse_list(list: &str) -> Result<Vec<TaskName>, EvalError> {
        if list.trim() == "all" {
            return Ok(Self::ALL.to_vec());
        }
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::parse)
            .collect()
    }

    pub fn config(self) -> TaskConfig {
        TaskConfig::of(self)
    }
}

impl fmt::Display for TaskName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TaskName {
    type Err = EvalError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .copied()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|t| t.as_str()).collect();
                EvalError::UnknownTask(s.to_string(), names.join(", "))
            })
    }
}

impl From<TaskName> for String {
    fn from(t: TaskName) -> String {
        t.as_str().to_string()
    }
}

impl TryFrom<String> for TaskName {
    type Error = EvalError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

/// `type_haystack` of the niah tasks (RULER calls the first one `repeat`, later `noise`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaystackKind {
    /// "The grass is green. ..." repeated.
    Noise,
    /// The essay corpus, cut to a number of words and split into sentences.
    Essay,
    /// Distractor needles with random keys and values.
    Needle,
}

/// `type_needle_k` / `type_needle_v`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeedleKind {
    /// adjective-noun pairs from the wonderwords lists.
    Words,
    /// 7-digit numbers.
    Numbers,
    /// version-4 UUIDs.
    Uuids,
}

impl NeedleKind {
    /// The plural noun RULER puts into its templates (`type_needle_v`).
    pub fn plural(self) -> &'static str {
        match self {
            NeedleKind::Words => "words",
            NeedleKind::Numbers => "numbers",
            NeedleKind::Uuids => "uuids",
        }
    }
}

/// Which generator a task uses and with which arguments (the `args:` of synthetic.yaml).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TaskFamily {
    Niah {
        haystack: HaystackKind,
        key: NeedleKind,
        value: NeedleKind,
        num_needle_k: usize,
        num_needle_v: usize,
        num_needle_q: usize,
    },
    VariableTracking {
        num_chains: usize,
        num_hops: usize,
    },
    CommonWords {
        freq_cw: usize,
        freq_ucw: usize,
        num_cw: usize,
    },
    FreqWords {
        alpha: f64,
        coded_wordlen: usize,
    },
    Qa {
        dataset: QaSource,
    },
}

/// Which QA file a QA task reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QaSource {
    Squad,
    HotpotQa,
}

/// How a prediction is scored (RULER's `metric_fn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Fraction of the references found in the prediction (niah, vt, cwe, fwe).
    StringMatchAll,
    /// 1 if any reference is found in the prediction (qa).
    StringMatchPart,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaskConfig {
    pub name: TaskName,
    pub family: TaskFamily,
    pub tokens_to_generate: usize,
    pub metric: Metric,
}

impl TaskConfig {
    pub fn of(name: TaskName) -> TaskConfig {
        use HaystackKind::*;
        use NeedleKind::*;
        let niah = |haystack, key, value, k, v, q| TaskFamily::Niah {
            haystack,
            key,
            value,
            num_needle_k: k,
            num_needle_v: v,
            num_needle_q: q,
        };
        let family = match name {
            TaskName::NiahSingle1 => niah(Noise, Words, Numbers, 1, 1, 1),
            TaskName::NiahSingle2 => niah(Essay, Words, Numbers, 1, 1, 1),
            TaskName::NiahSingle3 => niah(Essay, Words, Uuids, 1, 1, 1),
            TaskName::NiahMultikey1 => niah(Essay, Words, Numbers, 4, 1, 1),
            TaskName::NiahMultikey2 => niah(Needle, Words, Numbers, 1, 1, 1),
            TaskName::NiahMultikey3 => niah(Needle, Uuids, Uuids, 1, 1, 1),
            TaskName::NiahMultivalue => niah(Essay, Words, Numbers, 1, 4, 1),
            TaskName::NiahMultiquery => niah(Essay, Words, Numbers, 1, 1, 4),
            TaskName::Vt => TaskFamily::VariableTracking {
                num_chains: 1,
                num_hops: 4,
            },
            TaskName::Cwe => TaskFamily::CommonWords {
                freq_cw: 30,
                freq_ucw: 3,
                num_cw: 10,
            },
            TaskName::Fwe => TaskFamily::FreqWords {
                alpha: 2.0,
                coded_wordlen: 6,
            },
            TaskName::Qa1 => TaskFamily::Qa {
                dataset: QaSource::Squad,
            },
            TaskName::Qa2 => TaskFamily::Qa {
                dataset: QaSource::HotpotQa,
            },
        };
        let template = crate::templates::template_for(&family);
        let metric = match family {
            TaskFamily::Qa { .. } => Metric::StringMatchPart,
            _ => Metric::StringMatchAll,
        };
        TaskConfig {
            name,
            family,
            tokens_to_generate: template.tokens_to_generate,
            metric,
        }
    }
}
