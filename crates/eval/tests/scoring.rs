//! RULER's scoring on hand-made predictions: post-processing, string_match_all,
//! string_match_part, and the task x length table with its average row.

use gattn_eval::{
    ScoreTable, TaskName, postprocess_pred, score, string_match_all, string_match_part,
};

fn refs(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn postprocess_strips_and_turns_control_characters_into_newlines() {
    assert_eq!(postprocess_pred("  \t 1234567 \n"), "1234567");
    assert_eq!(postprocess_pred("\u{0}12\u{7}34\u{1f}"), "12\n34");
    assert_eq!(postprocess_pred("a\rb\tc"), "a\nb\nc");
    // Only U+0000..U+001F: DEL and printable text stay.
    assert_eq!(postprocess_pred("x\u{7f}y"), "x\u{7f}y");
    assert_eq!(postprocess_pred("\u{1}\u{2}"), "");
}

#[test]
fn string_match_all_is_the_share_of_references_found() {
    let r = refs(&["1234567", "7654321", "1111111", "2222222"]);
    assert_eq!(
        string_match_all("1234567, 7654321, 1111111 and 2222222", &r),
        100.0
    );
    assert_eq!(string_match_all("1234567 and 1111111", &r), 50.0);
    assert_eq!(string_match_all("none of them", &r), 0.0);
    // Substring match: a longer number that contains the reference counts, as in RULER.
    assert_eq!(string_match_all("91234567", &refs(&["1234567"])), 100.0);
    assert_eq!(string_match_all("anything", &[]), 0.0);
}

#[test]
fn matching_ignores_case() {
    let uuid = refs(&["a2534f89-4e30-4df1-a681-2672d07621de"]);
    assert_eq!(
        string_match_all("A2534F89-4E30-4DF1-A681-2672D07621DE", &uuid),
        100.0
    );
    assert_eq!(
        string_match_part("The answer is MARGARET HALE.", &refs(&["Margaret Hale"])),
        100.0
    );
}

#[test]
fn string_match_part_needs_any_one_reference() {
    let r = refs(&["Margaret Hale", "the engineer Margaret Hale"]);
    assert_eq!(string_match_part("Hale", &r), 0.0);
    assert_eq!(string_match_part("Margaret Hale", &r), 100.0);
    assert_eq!(
        string_match_part("It was Margaret Hale, an engineer.", &r),
        100.0
    );
}

#[test]
fn task_score_uses_the_task_metric_after_postprocessing() {
    // qa is string_match_part: one of two references is enough.
    let qa = refs(&["Margaret Hale", "the engineer Margaret Hale"]);
    assert_eq!(score(TaskName::Qa1, " Margaret Hale<|im_end|>", &qa), 100.0);
    // niah_multivalue is string_match_all: each value counts a quarter.
    let values = refs(&["1", "2", "3", "4"]);
    assert_eq!(score(TaskName::NiahMultivalue, "1, 2, 3", &values), 75.0);
    // Trailing chat junk after the answer does not hurt, and control characters split it.
    let needle = refs(&["5928000"]);
    let pred = " 5928000.<|im_end|>\n<|im_start|>user\nThanks!\u{0}";
    assert_eq!(score(TaskName::NiahSingle1, pred, &needle), 100.0);
    // A control character inside the answer breaks the match, exactly as in RULER.
    assert_eq!(score(TaskName::NiahSingle1, "5928\u{1}000", &needle), 0.0);
    let vt = refs(&["EILMH", "UTJRJ", "RLRWQ", "CKTRU", "APXNF"]);
    assert_eq!(score(TaskName::Vt, "EILMH UTJRJ rlrwq", &vt), 60.0);
}

#[test]
fn table_averages_samples_per_task_and_tasks_per_length() {
    let mut t = ScoreTable::new();
    let r = refs(&["x"]);
    for pred in ["x", "x", ""] {
        t.add_prediction(TaskName::NiahSingle1, 4096, pred, &r);
    }
    t.add_prediction(TaskName::Cwe, 4096, "nothing", &r);
    t.add_prediction(TaskName::NiahSingle1, 8192, "x", &r);
    let cell = t.get(TaskName::NiahSingle1, 4096).unwrap();
    assert_eq!(cell.score, 66.67);
    assert_eq!(cell.samples, 3);
    assert_eq!(cell.nulls, 1);
    assert_eq!(t.get(TaskName::Cwe, 4096).unwrap().score, 0.0);
    // Average row: mean of the task scores at that length (66.67 and 0).
    assert_eq!(t.average(4096), Some(33.34));
    assert_eq!(t.average(8192), Some(100.0));
    assert_eq!(t.average(16384), None);
    assert_eq!(t.tasks(), vec![TaskName::NiahSingle1, TaskName::Cwe]);
    assert_eq!(t.lengths(), vec![4096, 8192]);

    // Merging shards gives the table of the whole run.
    let mut a = ScoreTable::new();
    let mut b = ScoreTable::new();
    a.add_prediction(TaskName::NiahSingle1, 4096, "x", &r);
    b.add_prediction(TaskName::NiahSingle1, 4096, "x", &r);
    b.add_prediction(TaskName::NiahSingle1, 4096, "", &r);
    a.merge(&b);
    assert_eq!(
        a.get(TaskName::NiahSingle1, 4096),
        t.get(TaskName::NiahSingle1, 4096)
    );
}

#[test]
fn task_names_parse_as_ruler_spells_them() {
    assert_eq!(TaskName::all().len(), 13);
    for &t in TaskName::all() {
        assert_eq!(t.as_str().parse::<TaskName>().unwrap(), t);
    }
    assert_eq!(TaskName::parse_list("all").unwrap().len(), 13);
    assert_eq!(
        TaskName::parse_list("vt, qa_2").unwrap(),
        vec![TaskName::Vt, TaskName::Qa2]
    );
    assert!(TaskName::parse_list("niah_single_4").is_err());
    assert_eq!(TaskName::Cwe.config().tokens_to_generate, 120);
    assert_eq!(TaskName::Fwe.config().tokens_to_generate, 50);
    assert_eq!(TaskName::Vt.config().tokens_to_generate, 30);
    assert_eq!(TaskName::Qa1.config().tokens_to_generate, 32);
    assert_eq!(TaskName::NiahMultikey3.config().tokens_to_generate, 128);
}

#[test]
fn rounding_follows_python_round() {
    let mut t = ScoreTable::new();
    // Mean 2.675 (binary 2.67499999...): Python's round(2.675, 2) is 2.67.
    for s in [2.675, 2.675] {
        t.add(TaskName::Fwe, 4096, s, false);
    }
    assert_eq!(t.get(TaskName::Fwe, 4096).unwrap().score, 2.67);
}
