//! A small English sentence splitter over whitespace-separated words.
//!
//! RULER splits its essay haystack with NLTK's punkt. Here a rule set in the same spirit
//! marks a sentence end after a word that ends in `.`, `!` or `?` (optionally followed by
//! closing quotes or brackets) when the next word starts a sentence (capital letter,
//! digit, or an opening quote/bracket before one) and the word is not a known
//! abbreviation or a single-letter initial. Working on word boundaries means a sentence
//! is always a run of whole words, which lets the essay generator join words instead of
//! re-splitting text at every step of the length search.

const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "mt", "vs", "etc", "no", "co", "ltd", "inc",
    "gen", "col", "capt", "lt", "rev", "hon", "messrs", "mme", "mlle", "e.g", "i.e", "viz", "cf",
];

fn trim_closers(word: &str) -> &str {
    word.trim_end_matches(['"', '\'', ')', ']', '}', '\u{201d}', '\u{2019}'])
}

fn ends_sentence(word: &str) -> bool {
    let core = trim_closers(word);
    let Some(last) = core.chars().last() else {
        return false;
    };
    if last == '!' || last == '?' {
        return true;
    }
    if last != '.' {
        return false;
    }
    let stem = core
        .trim_end_matches('.')
        .trim_start_matches(['"', '\'', '(', '[', '\u{201c}', '\u{2018}']);
    if stem.is_empty() {
        // "..." alone, or a bare dot: punkt keeps an ellipsis inside the sentence.
        return false;
    }
    if stem.chars().count() == 1 && stem.chars().all(char::is_alphabetic) {
        return false; // an initial such as "J."
    }
    let lower = stem.to_lowercase();
    !ABBREVIATIONS.contains(&lower.as_str())
}

fn starts_sentence(word: &str) -> bool {
    let core = word.trim_start_matches(['"', '\'', '(', '[', '\u{201c}', '\u{2018}']);
    core.chars()
        .next()
        .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit())
}

/// Exclusive end indices of the sentences in `words`: sentence `i` is
/// `words[ends[i-1]..ends[i]]` (with `ends[-1] = 0`). The last entry is always `words.len()`.
pub fn sentence_ends<S: AsRef<str>>(words: &[S]) -> Vec<usize> {
    let mut ends = Vec::new();
    for i in 0..words.len().saturating_sub(1) {
        if ends_sentence(words[i].as_ref()) && starts_sentence(words[i + 1].as_ref()) {
            ends.push(i + 1);
        }
    }
    if !words.is_empty() {
        ends.push(words.len());
    }
    ends
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str) -> Vec<String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let mut start = 0;
        sentence_ends(&words)
            .into_iter()
            .map(|end| {
                let s = words[start..end].join(" ");
                start = end;
                s
            })
            .collect()
    }

    #[test]
    fn splits_on_terminal_punctuation_but_not_abbreviations() {
        let s = split(
            "\"My dear Mr. Bennet,\" said his lady. \"Have you heard?\" He had not. J. Smith came by 3 p.m. on Monday! And so on",
        );
        assert_eq!(
            s,
            vec![
                "\"My dear Mr. Bennet,\" said his lady.",
                "\"Have you heard?\"",
                "He had not.",
                "J. Smith came by 3 p.m. on Monday!",
                "And so on",
            ]
        );
    }
}
