//! Optional per-call accumulators for the analysis tools: the attention-sink share (probability
//! mass on key 0) and the gate values. Computed inside the kernel from its running softmax state
//! (mass on key 0 = exp(s0 - m) / l), never from materialized probabilities; skipped entirely when
//! the caller passes `None`.

/// Sums over every (query, head) row and every gate value seen since the last reset.
/// Add calls together with [`AttentionStats::merge`]; read means with the accessor methods.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttentionStats {
    /// Sum over rows of the probability on key 0.
    pub sink_mass_sum: f64,
    /// Rows (query x head) contributing to `sink_mass_sum`.
    pub sink_rows: u64,
    /// Sum of sigmoid(gate) over every gate value (one per head, or per head dimension).
    pub gate_sum: f64,
    /// Gate values seen.
    pub gate_count: u64,
    /// Gate values with sigmoid(gate) < 0.1 (the paper's "sparse" gates).
    pub gate_below_0_1: u64,
    /// The part of `gate_sum` / `gate_count` from the query at absolute position 0.
    pub first_token_gate_sum: f64,
    pub first_token_gate_count: u64,
}

impl AttentionStats {
    pub fn merge(&mut self, other: &AttentionStats) {
        self.sink_mass_sum += other.sink_mass_sum;
        self.sink_rows += other.sink_rows;
        self.gate_sum += other.gate_sum;
        self.gate_count += other.gate_count;
        self.gate_below_0_1 += other.gate_below_0_1;
        self.first_token_gate_sum += other.first_token_gate_sum;
        self.first_token_gate_count += other.first_token_gate_count;
    }

    /// Mean probability on the first token (the attention-sink share).
    pub fn sink_share(&self) -> Option<f64> {
        ratio(self.sink_mass_sum, self.sink_rows)
    }

    /// Mean sigmoid(gate) over all gate values.
    pub fn mean_gate(&self) -> Option<f64> {
        ratio(self.gate_sum, self.gate_count)
    }

    /// Fraction of gate values below 0.1.
    pub fn gate_below_0_1_fraction(&self) -> Option<f64> {
        ratio(self.gate_below_0_1 as f64, self.gate_count)
    }

    /// Mean sigmoid(gate) of the query at position 0.
    pub fn mean_first_token_gate(&self) -> Option<f64> {
        ratio(self.first_token_gate_sum, self.first_token_gate_count)
    }

    /// Mean sigmoid(gate) of every other query.
    pub fn mean_rest_gate(&self) -> Option<f64> {
        ratio(
            self.gate_sum - self.first_token_gate_sum,
            self.gate_count - self.first_token_gate_count,
        )
    }

    pub(crate) fn add_sink(&mut self, mass: f32) {
        self.sink_mass_sum += mass as f64;
        self.sink_rows += 1;
    }

    /// Records the sigmoid values of one row's gate (one value headwise, `head_dim` elementwise).
    pub(crate) fn add_gates(&mut self, sigmoids: impl Iterator<Item = f32>, first_token: bool) {
        let (mut sum, mut count, mut below) = (0.0f64, 0u64, 0u64);
        for g in sigmoids {
            sum += g as f64;
            count += 1;
            below += (g < 0.1) as u64;
        }
        self.gate_sum += sum;
        self.gate_count += count;
        self.gate_below_0_1 += below;
        if first_token {
            self.first_token_gate_sum += sum;
            self.first_token_gate_count += count;
        }
    }
}

fn ratio(sum: f64, count: u64) -> Option<f64> {
    (count > 0).then(|| sum / count as f64)
}
