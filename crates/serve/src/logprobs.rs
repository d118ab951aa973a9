//! Log-probabilities from a row of logits: `log_softmax(row)[token]` and the top alternatives.

use gattn_model::Tokenizer;

use crate::job::TokenLogprob;

/// `log(sum(exp(row)))`, summed in f64 from the largest logit so that nothing overflows.
pub fn log_sum_exp(row: &[f32]) -> f64 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = row.iter().map(|&x| (x as f64 - max).exp()).sum();
    max + sum.ln()
}

/// The ids of the `n` largest logits, largest first (ties by lower id).
pub fn top_ids(row: &[f32], n: usize) -> Vec<u32> {
    let by_rank = |a: &u32, b: &u32| row[*b as usize].total_cmp(&row[*a as usize]).then(a.cmp(b));
    let mut ids: Vec<u32> = (0..row.len() as u32).collect();
    let n = n.min(ids.len());
    if n == 0 {
        return Vec::new();
    }
    if n < ids.len() {
        ids.select_nth_unstable_by(n - 1, by_rank);
        ids.truncate(n);
    }
    ids.sort_by(by_rank);
    ids
}

/// `token`'s log-probability under `row` and the `top_n` most likely tokens with theirs.
pub fn token_logprob(row: &[f32], token: u32, top_n: usize, tokenizer: &Tokenizer) -> TokenLogprob {
    let lse = log_sum_exp(row);
    let logprob = |id: u32| (row[id as usize] as f64 - lse) as f32;
    TokenLogprob {
        id: token,
        text: token_text(tokenizer, token),
        logprob: Some(logprob(token)),
        top: top_ids(row, top_n)
            .into_iter()
            .map(|id| (token_text(tokenizer, id), logprob(id)))
            .collect(),
    }
}

/// The first prompt token: nothing predicts it, so it has no log-probability.
pub fn unpredicted(token: u32, tokenizer: &Tokenizer) -> TokenLogprob {
    TokenLogprob {
        id: token,
        text: token_text(tokenizer, token),
        logprob: None,
        top: Vec::new(),
    }
}

/// One token's text; an id the tokenizer cannot decode reads as empty.
pub fn token_text(tokenizer: &Tokenizer, id: u32) -> String {
    tokenizer.decode(&[id]).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_sum_exp_matches_the_direct_sum_and_survives_large_logits() {
        let row = [1.0f32, 2.0, 3.0];
        let direct = (1f64.exp() + 2f64.exp() + 3f64.exp()).ln();
        assert!((log_sum_exp(&row) - direct).abs() < 1e-12);
        let big = [1000.0f32, 1000.0];
        assert!((log_sum_exp(&big) - (1000.0 + 2f64.ln())).abs() < 1e-9);
    }

    #[test]
    fn top_ids_are_the_largest_first_ties_by_id() {
        let row = [0.5f32, 3.0, 3.0, -1.0, 2.0];
        assert_eq!(top_ids(&row, 3), [1, 2, 4]);
        assert_eq!(top_ids(&row, 0), Vec::<u32>::new());
        assert_eq!(top_ids(&row, 9).len(), 5);
    }
}
