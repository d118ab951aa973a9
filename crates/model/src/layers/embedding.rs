use gattn_tensor::Checkpoint;

use crate::error::{ModelError, Result};
use crate::weights::{WeightData, WeightFormat, load_matrix};

/// Token embedding table `[vocab_size, hidden]`; also the lm_head when embeddings are tied.
#[derive(Debug, Clone)]
pub struct Embedding {
    pub table: WeightData,
    pub vocab_size: usize,
    pub hidden_size: usize,
}

impl Embedding {
    pub fn load(
        checkpoint: &Checkpoint,
        name: &str,
        vocab_size: usize,
        hidden_size: usize,
        format: WeightFormat,
    ) -> Result<Embedding> {
        let table = load_matrix(checkpoint, name, &[vocab_size, hidden_size], format)?;
        Ok(Embedding {
            table,
            vocab_size,
            hidden_size,
        })
    }

    /// tokens: `[n]` -> out: `[n, hidden]`.
    pub fn forward(&self, tokens: &[u32], out: &mut [f32]) -> Result<()> {
        for (&token, row) in tokens.iter().zip(out.chunks_exact_mut(self.hidden_size)) {
            if token as usize >= self.vocab_size {
                return Err(ModelError::TokenOutOfRange {
                    id: token,
                    vocab_size: self.vocab_size,
                });
            }
            self.table.row_f32(token as usize, self.hidden_size, row);
        }
        Ok(())
    }
}
