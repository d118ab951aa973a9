//! Text the generators draw from: the essay haystack, word lists, and QA datasets.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use gattn_tensor::input_file::read_regular_to_string;
use gattn_tensor::strict_json::parse_strict;
use serde_json::Value;

use crate::error::EvalError;
use crate::sentences::sentence_ends;

/// Substitute for RULER's Paul Graham essays (see data/README.md): two public-domain novels.
const BUILTIN_ESSAYS: &str = include_str!("../data/austen_essays.txt");
const NOUNS: &str = include_str!("../data/nounlist.txt");
const ADJECTIVES: &str = include_str!("../data/adjectivelist.txt");
const VERBS: &str = include_str!("../data/verblist.txt");
/// Substitute for RULER's `json/english_words.json` (cwe's list when wonderwords runs out).
const ENGLISH_WORDS: &str = include_str!("../data/english_words.txt");

/// One QA question with the documents that answer it, as RULER's `read_squad`/`read_hotpotqa`.
#[derive(Debug, Clone, PartialEq)]
pub struct QaItem {
    pub query: String,
    pub outputs: Vec<String>,
    /// Indices into [`QaDataset::docs`] of the gold documents.
    pub context: Vec<usize>,
    /// Other documents of the same article (SQuAD only): preferred distractors.
    pub more_context: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct QaDataset {
    /// Unique documents in sorted order, as RULER's `sorted(list(set(docs)))`.
    pub docs: Vec<String>,
    pub items: Vec<QaItem>,
}

fn bad(path: &Path, reason: impl Into<String>) -> EvalError {
    EvalError::BadCorpus {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// RULER's largest input, HotpotQA's dev set, is 46 MB; an essay folder's files are smaller.
const MAX_DATASET_BYTES: u64 = 256 << 20;

fn read(path: &Path) -> Result<String, EvalError> {
    read_regular_to_string(path, MAX_DATASET_BYTES).map_err(|source| EvalError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Strictly: a key given twice in a record is an error, not the last one silently.
fn parse_json(path: &Path, text: &str) -> Result<Value, EvalError> {
    parse_strict(text).map_err(|source| EvalError::Json {
        path: path.to_path_buf(),
        source,
    })
}

fn sorted_unique_docs(
    all: impl IntoIterator<Item = String>,
) -> (Vec<String>, HashMap<String, usize>) {
    let docs: Vec<String> = all
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let index = docs
        .iter()
        .enumerate()
        .map(|(i, d)| (d.clone(), i))
        .collect();
    (docs, index)
}

impl QaDataset {
    /// SQuAD (v2.0 dev in RULER) JSON text. Unanswerable questions are dropped.
    pub fn from_squad_json(text: &str, path: &Path) -> Result<QaDataset, EvalError> {
        let root = parse_json(path, text)?;
        let articles = root["data"]
            .as_array()
            .ok_or_else(|| bad(path, "expected SQuAD JSON with a top-level `data` list"))?;
        let paragraphs_of = |a: &Value| a["paragraphs"].as_array().cloned().unwrap_or_default();
        let all_contexts = articles.iter().flat_map(|a| {
            paragraphs_of(a)
                .into_iter()
                .filter_map(|p| p["context"].as_str().map(str::to_string))
        });
        let (docs, index) = sorted_unique_docs(all_contexts);
        let mut items = Vec::new();
        for article in articles {
            let paragraphs = paragraphs_of(article);
            let article_docs: Vec<usize> = paragraphs
                .iter()
                .filter_map(|p| p["context"].as_str().map(|c| index[c]))
                .collect();
            for p in &paragraphs {
                let Some(context) = p["context"].as_str() else {
                    continue;
                };
                let doc = index[context];
                for qa in p["qas"].as_array().into_iter().flatten() {
                    if qa["is_impossible"].as_bool().unwrap_or(false) {
                        continue;
                    }
                    let query = qa["question"]
                        .as_str()
                        .ok_or_else(|| bad(path, "a SQuAD question has no `question` text"))?;
                    let outputs = qa["answers"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|a| a["text"].as_str().map(str::to_string))
                        .collect();
                    items.push(QaItem {
                        query: query.to_string(),
                        outputs,
                        context: vec![doc],
                        more_context: article_docs.iter().copied().filter(|&d| d != doc).collect(),
                    });
                }
            }
        }
        Ok(QaDataset { docs, items })
    }

    /// HotpotQA (distractor dev set in RULER) JSON text. A document is "title\ntext".
    pub fn from_hotpotqa_json(text: &str, path: &Path) -> Result<QaDataset, EvalError> {
        let root = parse_json(path, text)?;
        let entries = root
            .as_array()
            .ok_or_else(|| bad(path, "expected HotpotQA JSON: a list of questions"))?;
        let doc_texts = |e: &Value| -> Vec<String> {
            e["context"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|pair| {
                    let title = pair.get(0)?.as_str()?;
                    let sentences: String = pair
                        .get(1)?
                        .as_array()?
                        .iter()
                        .filter_map(Value::as_str)
                        .collect();
                    Some(format!("{title}\n{sentences}"))
                })
                .collect()
        };
        let (docs, index) = sorted_unique_docs(entries.iter().flat_map(doc_texts));
        let mut items = Vec::with_capacity(entries.len());
        for e in entries {
            let query = e["question"]
                .as_str()
                .ok_or_else(|| bad(path, "a HotpotQA entry has no `question`"))?;
            let answer = e["answer"]
                .as_str()
                .ok_or_else(|| bad(path, "a HotpotQA entry has no `answer`"))?;
            items.push(QaItem {
                query: query.to_string(),
                outputs: vec![answer.to_string()],
                context: doc_texts(e).iter().map(|d| index[d]).collect(),
                more_context: Vec::new(),
            });
        }
        Ok(QaDataset { docs, items })
    }
}

/// The essay haystack as words, with sentence boundaries computed once.
#[derive(Debug, Clone)]
pub(crate) struct Essay {
    pub(crate) words: Vec<Box<str>>,
    /// Exclusive word-index ends of sentences; the last is `words.len()`.
    pub(crate) sentence_ends: Vec<usize>,
}

impl Essay {
    fn from_text(text: &str) -> Essay {
        // RULER: re.sub(r'\s+', " ", essay).split(" ")
        let words: Vec<Box<str>> = text.split_whitespace().map(Into::into).collect();
        let sentence_ends = sentence_ends(&words);
        Essay {
            words,
            sentence_ends,
        }
    }
}

fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Everything the generators read. [`Corpus::builtin`] needs no files; the QA tasks need
/// [`Corpus::load_squad`] / [`Corpus::load_hotpotqa`].
#[derive(Debug, Clone)]
pub struct Corpus {
    pub(crate) essay: Essay,
    /// Where the essay text came from, for reports.
    pub essay_source: String,
    pub(crate) nouns: Vec<String>,
    pub(crate) adjectives: Vec<String>,
    /// cwe's vocabulary: sorted unique nouns + adjectives + verbs.
    pub(crate) cwe_words: Vec<String>,
    /// cwe's fallback vocabulary when more words are needed than `cwe_words` has.
    pub(crate) english_words: Vec<String>,
    pub squad: Option<QaDataset>,
    pub hotpotqa: Option<QaDataset>,
}

impl Corpus {
    /// The shipped substitute essays and word lists; no QA datasets.
    pub fn builtin() -> Corpus {
        let nouns = lines(NOUNS);
        let adjectives = lines(ADJECTIVES);
        let verbs = lines(VERBS);
        let cwe_words: Vec<String> = nouns
            .iter()
            .chain(&adjectives)
            .chain(&verbs)
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        Corpus {
            essay: Essay::from_text(BUILTIN_ESSAYS),
            essay_source: "builtin: Jane Austen, Pride and Prejudice + Persuasion (substitute for Paul Graham essays)".into(),
            nouns,
            adjectives,
            cwe_words,
            english_words: lines(ENGLISH_WORDS),
            squad: None,
            hotpotqa: None,
        }
    }

    /// Replaces the essay haystack with the `.txt` and `.json` files of `dir` (sorted by
    /// name, joined by newlines). A `.json` file is RULER's format: `{"text": "..."}`, or a
    /// list of such objects.
    pub fn load_essays_dir(&mut self, dir: &Path) -> Result<(), EvalError> {
        let entries = std::fs::read_dir(dir).map_err(|source| EvalError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("txt" | "json")))
            .collect();
        files.sort();
        let mut text = String::new();
        for path in &files {
            let content = read(path)?;
            if path.extension().and_then(|e| e.to_str()) == Some("json") {
                let value = parse_json(path, &content)?;
                let pieces: Vec<&Value> = match &value {
                    Value::Array(items) => items.iter().collect(),
                    other => vec![other],
                };
                for piece in pieces {
                    let t = piece["text"]
                        .as_str()
                        .ok_or_else(|| bad(path, "expected {\"text\": \"...\"} essay JSON"))?;
                    text.push_str(t);
                    text.push('\n');
                }
            } else {
                text.push_str(&content);
                text.push('\n');
            }
        }
        let essay = Essay::from_text(&text);
        if essay.words.is_empty() {
            return Err(bad(dir, "no essay text found in its .txt/.json files"));
        }
        self.essay = essay;
        self.essay_source = format!("{} ({} files)", dir.display(), files.len());
        Ok(())
    }

    /// Loads RULER's SQuAD file (`squad.json`, SQuAD v2.0 dev) for qa_1.
    pub fn load_squad(&mut self, path: &Path) -> Result<(), EvalError> {
        self.squad = Some(QaDataset::from_squad_json(&read(path)?, path)?);
        Ok(())
    }

    /// Loads RULER's HotpotQA file (`hotpotqa.json`, distractor dev) for qa_2.
    pub fn load_hotpotqa(&mut self, path: &Path) -> Result<(), EvalError> {
        self.hotpotqa = Some(QaDataset::from_hotpotqa_json(&read(path)?, path)?);
        Ok(())
    }

    /// Number of words in the essay haystack before it repeats.
    pub fn essay_words(&self) -> usize {
        self.essay.words.len()
    }
}
