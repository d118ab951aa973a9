//! A portable, version-stable random source.
//!
//! ChaCha8 has a fixed output stream for a given 32-byte seed (rand_chacha promises value
//! stability), and every derived draw below (ranges, shuffles, samples) is written here
//! rather than taken from `rand`'s distributions, whose algorithms may change between
//! versions. So the same seed gives the same text on every platform and release.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

/// splitmix64: a fixed mixing step used to spread seed material into 32 seed bytes.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a over bytes: turns a label (task name) into seed material, stable forever.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash = 0xCBF2_9CE4_8422_2325u64;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01B3);
    }
    hash
}

pub(crate) struct SampleRng {
    inner: ChaCha8Rng,
}

impl SampleRng {
    /// A stream determined by the user seed and any number of labelled parts.
    pub(crate) fn derive(seed: u64, label: &str, parts: &[u64]) -> Self {
        let mut state = seed ^ fnv1a(label.as_bytes()).rotate_left(17);
        for &p in parts {
            state = splitmix64(&mut state) ^ p;
        }
        let mut bytes = [0u8; 32];
        for chunk in bytes.chunks_exact_mut(8) {
            chunk.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
        }
        Self {
            inner: ChaCha8Rng::from_seed(bytes),
        }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// Uniform integer in `0..n` by rejection (no modulo bias). `n` must be positive.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        // 2^64 mod n values at the top would make small residues likelier: reject them.
        let rejected = (u64::MAX % n + 1) % n;
        let last_accepted = u64::MAX - rejected;
        loop {
            let x = self.next_u64();
            if x <= last_accepted {
                return x % n;
            }
        }
    }

    pub(crate) fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// Uniform integer in `lo..=hi`, like Python's `random.randint`.
    pub(crate) fn randint(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    pub(crate) fn choose<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// Fisher-Yates shuffle in place.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.index(i + 1);
            items.swap(i, j);
        }
    }

    /// `k` distinct indices from `0..n` in random order, like `random.sample(range(n), k)`.
    /// Uses a partial Fisher-Yates over a sparse swap map, so it costs O(k), not O(n).
    pub(crate) fn sample_indices(&mut self, n: usize, k: usize) -> Vec<usize> {
        assert!(k <= n, "cannot sample {k} of {n}");
        let mut swapped = std::collections::HashMap::<usize, usize>::with_capacity(k);
        let mut out = Vec::with_capacity(k);
        for i in 0..k {
            let j = i + self.index(n - i);
            let at_j = *swapped.get(&j).unwrap_or(&j);
            let at_i = *swapped.get(&i).unwrap_or(&i);
            swapped.insert(j, at_i);
            out.push(at_j);
        }
        out
    }

    /// `k` distinct elements of `items` in random order, like `random.sample(items, k)`.
    pub(crate) fn sample<T: Clone>(&mut self, items: &[T], k: usize) -> Vec<T> {
        self.sample_indices(items.len(), k)
            .into_iter()
            .map(|i| items[i].clone())
            .collect()
    }

    /// Random string of `len` characters drawn from `alphabet`, like `random.choices(..., k=len)`.
    pub(crate) fn string_from(&mut self, alphabet: &[u8], len: usize) -> String {
        (0..len)
            .map(|_| char::from(*self.choose(alphabet)))
            .collect()
    }

    /// A version-4 UUID from 128 random bits, formatted as Python's `str(uuid.UUID(...))`.
    pub(crate) fn uuid4(&mut self) -> String {
        let hi = self.next_u64();
        let lo = self.next_u64();
        let mut v = (u128::from(hi) << 64) | u128::from(lo);
        // Version 4 in bits 76..80, RFC 4122 variant (10xx) in bits 62..64.
        v &= !(0xF_u128 << 76);
        v |= 0x4_u128 << 76;
        v &= !(0x3_u128 << 62);
        v |= 0x2_u128 << 62;
        let hex = format!("{v:032x}");
        format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    }
}

pub(crate) const UPPERCASE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ";
pub(crate) const LOWERCASE: &[u8] = b"abcdefghijklmnopqrstuvwxyz";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_labels_separate_streams() {
        let mut a = SampleRng::derive(42, "niah_single_1", &[4096, 0]);
        let mut b = SampleRng::derive(42, "niah_single_1", &[4096, 0]);
        let mut c = SampleRng::derive(42, "niah_single_2", &[4096, 0]);
        let xa: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..4).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
    }

    #[test]
    fn uuid_has_version_and_variant() {
        let mut r = SampleRng::derive(1, "uuid", &[]);
        for _ in 0..50 {
            let u = r.uuid4();
            assert_eq!(u.len(), 36);
            assert_eq!(&u[14..15], "4");
            assert!("89ab".contains(&u[19..20]), "{u}");
        }
    }

    #[test]
    fn sample_indices_are_distinct_and_in_range() {
        let mut r = SampleRng::derive(3, "s", &[]);
        let s = r.sample_indices(50, 50);
        let mut sorted = s.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        let s = r.sample_indices(1_000_000, 5);
        assert_eq!(s.len(), 5);
        assert!(s.iter().all(|&i| i < 1_000_000));
    }
}
