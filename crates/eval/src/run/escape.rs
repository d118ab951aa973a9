//! Text from the user (run labels, paths, model names) inside the tables the runs write:
//! Markdown escaped here, CSV through the `csv` crate, JSON through serde_json. Any legal
//! directory name, `|`, `"`, `,` and newlines included, keeps each table well-formed.

/// `text` as inline Markdown (a table cell or a heading): every markup character escaped with
/// a backslash, line breaks as `<br>`, other control characters as spaces.
pub fn markdown_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\r' | '\n' => out.push_str("<br>"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '#' | '~' | '!' | '&' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Rows as CSV (RFC 4180: fields with a comma, quote or line break quoted).
pub fn csv_text(rows: &[Vec<String>]) -> String {
    let mut writer = csv::WriterBuilder::new()
        .flexible(false)
        .from_writer(Vec::new());
    for row in rows {
        writer.write_record(row).expect("CSV into memory");
    }
    let bytes = writer.into_inner().expect("CSV into memory");
    String::from_utf8(bytes).expect("CSV of strings is UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_label_stays_in_its_cell() {
        let md = markdown_text("a|b\n`c`\r\n*d*");
        assert_eq!(md, "a\\|b<br>\\`c\\`<br>\\*d\\*");
        assert!(!md.contains('\n'));
        assert_eq!(md.matches('|').count(), md.matches("\\|").count());
    }

    #[test]
    fn csv_quotes_what_needs_it_and_reads_back() {
        let rows = vec![
            vec!["model".to_string(), "score".to_string()],
            vec!["a,\"b\"\nc|d".to_string(), "1.00".to_string()],
        ];
        let text = csv_text(&rows);
        assert_eq!(text, "model,score\n\"a,\"\"b\"\"\nc|d\",1.00\n");
        let back: Vec<Vec<String>> = csv::Reader::from_reader(text.as_bytes())
            .records()
            .map(|r| r.unwrap().iter().map(str::to_string).collect())
            .collect();
        assert_eq!(back, rows[1..]);
    }
}
