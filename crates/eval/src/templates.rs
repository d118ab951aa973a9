//! RULER's prompt templates, answer prefixes and generation budgets
//! (`scripts/data/synthetic/constants.py`). These strings are data and must match RULER's
//! byte for byte, including its typo "assgined".

use crate::task::TaskFamily;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskTemplate {
    pub tokens_to_generate: usize,
    /// The task template, with `{context}`, `{query}` and task-specific placeholders.
    pub template: &'static str,
    /// Appended to the template; the model continues after it.
    pub answer_prefix: &'static str,
}

pub const NIAH: TaskTemplate = TaskTemplate {
    tokens_to_generate: 128,
    template: "Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize it. I will quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are all the special magic {type_needle_v} for {query} mentioned in the provided text?",
    answer_prefix: " The special magic {type_needle_v} for {query} mentioned in the provided text are",
};

pub const VARIABLE_TRACKING: TaskTemplate = TaskTemplate {
    tokens_to_generate: 30,
    template: "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\nQuestion: Find all variables that are assigned the value {query} in the text above.",
    answer_prefix: " Answer: According to the chain(s) of variable assignment in the text above, {num_v} variables are assgined the value {query}, they are: ",
};

pub const COMMON_WORDS: TaskTemplate = TaskTemplate {
    tokens_to_generate: 120,
    template: "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones that appear most often.\n{context}\nQuestion: What are the 10 most common words in the above list?",
    answer_prefix: " Answer: The top 10 words that appear most often in the list are:",
};

pub const FREQ_WORDS: TaskTemplate = TaskTemplate {
    tokens_to_generate: 50,
    template: "Read the following coded text and track the frequency of each coded word. Find the three most frequently appeared coded words. {context}\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the three most frequently appeared words in the above coded text?",
    answer_prefix: " Answer: According to the coded text above, the three most frequently appeared words are:",
};

pub const QA: TaskTemplate = TaskTemplate {
    tokens_to_generate: 32,
    template: "Answer the question based on the given documents. Only give me the answer and do not output any other words.\n\nThe following are given documents.\n\n{context}\n\nAnswer the question based on the given documents. Only give me the answer and do not output any other words.\n\nQuestion: {query}",
    answer_prefix: " Answer:",
};

/// RULER's `DOCUMENT_PROMPT` for the QA tasks.
pub(crate) const QA_DOCUMENT: &str = "Document {i}:\n{document}";

/// RULER's niah needle, also the line format of the `needle` haystack.
pub(crate) const NIAH_NEEDLE: &str =
    "One of the special magic {type_needle_v} for {key} is: {value}.";

/// RULER's `noise` (`repeat`) haystack sentence block, used by niah_single_1 and vt.
pub(crate) const NOISE: &str =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

pub fn template_for(family: &TaskFamily) -> TaskTemplate {
    match family {
        TaskFamily::Niah { .. } => NIAH,
        TaskFamily::VariableTracking { .. } => VARIABLE_TRACKING,
        TaskFamily::CommonWords { .. } => COMMON_WORDS,
        TaskFamily::FreqWords { .. } => FREQ_WORDS,
        TaskFamily::Qa { .. } => QA,
    }
}

/// Python's `str.format` for the named fields RULER uses. Values are substituted in one
/// left-to-right pass, so braces inside a value (a haystack) are never re-expanded.
pub(crate) fn fill(template: &str, fields: &[(&str, &str)]) -> String {
    let mut out =
        String::with_capacity(template.len() + fields.iter().map(|(_, v)| v.len()).sum::<usize>());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => {
                let name = &after[..close];
                match fields.iter().find(|(k, _)| *k == name) {
                    Some((_, v)) => out.push_str(v),
                    // Not one of ours: keep it literally (RULER's templates have none).
                    None => {
                        out.push('{');
                        out.push_str(name);
                        out.push('}');
                    }
                }
                rest = &after[close + 1..];
            }
            None => {
                out.push_str(&rest[open..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_substitutes_all_occurrences_once() {
        let s = fill("{a} and {b} and {a} {c}", &[("a", "{b}"), ("b", "x")]);
        assert_eq!(s, "{b} and x and {b} {c}");
    }
}
