//! Fused streaming-softmax attention with the output gate in its epilogue. See issue 4.
