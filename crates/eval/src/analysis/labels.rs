use gattn_model::Tokenizer;

use crate::analysis::AnalysisError;

/// The text of each token on its own, with whitespace made visible (`·` for a space, `\n`, `\t`,
/// `\r`) so axis labels show where every token is.
pub fn token_labels(tokenizer: &Tokenizer, ids: &[u32]) -> Result<Vec<String>, AnalysisError> {
    ids.iter()
        .map(|&id| Ok(escape(&tokenizer.decode(&[id])?)))
        .collect()
}

fn escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match c {
            ' ' => out.push('·'),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    if out.is_empty() {
        out.push('∅');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_is_visible() {
        assert_eq!(escape(" the\n"), "·the\\n");
        assert_eq!(escape("\t\u{1}"), "\\t\\u{1}");
        assert_eq!(escape(""), "∅");
    }
}
