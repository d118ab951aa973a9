//! Software prefetch of the next key tile's K and V rows, spread over this tile's V sums.
//!
//! A decode streams its cache from DRAM, where the hardware prefetcher alone leaves it well short
//! of the read bandwidth, so the kernel asks for the next tile's lines itself. Where it asks
//! matters as much as how far ahead: all in one burst (or one key's rows per key of the short
//! score loop) stalls the core on full miss buffers and then leaves the memory idle through the
//! V sums, the longer phase. So one line of K and one of V go out per step of the V sums, at an
//! even pace while the core computes, one tile ahead (see docs/performance.md).

use super::kv::KvHeadView;

/// Storage words in one 64-byte cache line.
const WORDS_PER_LINE: usize = 16;

/// A cursor over the lines of keys `key..end`, K and V, asking for one line of each every
/// `every` steps of the loop that [`tick`](Self::tick)s it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TilePrefetch<'a> {
    kv: KvHeadView<'a>,
    key: usize,
    end: usize,
    line: usize,
    lines_per_row: usize,
    every: usize,
    countdown: usize,
}

impl<'a> TilePrefetch<'a> {
    /// The rows of keys `first_key .. first_key + keys` (those past the cache dropped), over a loop
    /// of `steps` steps: a line pair per step where the loop has as many steps as the lines, one
    /// every few steps where it has more (narrower registers). `None` if there is nothing to ask.
    pub(crate) fn new(
        kv: KvHeadView<'a>,
        first_key: usize,
        keys: usize,
        steps: usize,
    ) -> Option<TilePrefetch<'a>> {
        let end = (first_key + keys).min(kv.len);
        if first_key >= end {
            return None;
        }
        let lines_per_row = kv.row_words.div_ceil(WORDS_PER_LINE);
        let every = (steps / ((end - first_key) * lines_per_row)).max(1);
        Some(TilePrefetch {
            kv,
            key: first_key,
            end,
            line: 0,
            lines_per_row,
            every,
            countdown: every,
        })
    }

    /// One step of the loop: every `every` steps, the next K line and V line.
    #[inline(always)]
    pub(crate) fn tick(&mut self) {
        if self.key >= self.end {
            return;
        }
        self.countdown -= 1;
        if self.countdown > 0 {
            return;
        }
        self.countdown = self.every;
        prefetch_line(self.kv, self.key, self.line);
        self.line += 1;
        if self.line == self.lines_per_row {
            self.line = 0;
            self.key += 1;
        }
    }
}

/// Line `line` of key `key`'s K row and of its V row (a hint: never faults).
#[inline(always)]
fn prefetch_line(kv: KvHeadView<'_>, key: usize, line: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let offset = key * kv.row_words + line * WORDS_PER_LINE;
        // SAFETY: prefetch is a hint and never faults (so wrapping arithmetic on the addresses is
        // enough); SSE is baseline on x86_64.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(kv.k.as_ptr().wrapping_add(offset).cast());
            _mm_prefetch::<_MM_HINT_T0>(kv.v.as_ptr().wrapping_add(offset).cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (kv, key, line);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::kv::{KvDtype, KvLayer};

    /// Walks a cursor and returns the (key, line) pairs it asks for, by step.
    fn asked(prefetch: &mut TilePrefetch<'_>, steps: usize) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        for step in 0..steps {
            let before = (prefetch.key, prefetch.line);
            prefetch.tick();
            if (prefetch.key, prefetch.line) != before {
                out.push((step, before.0, before.1));
            }
        }
        out
    }

    #[test]
    fn asks_for_every_line_of_the_tile_once_spread_over_the_steps() {
        let mut layer = KvLayer::new(KvDtype::Int8, 1, 128).unwrap();
        layer.reserve(200).unwrap();
        layer
            .append(&vec![0.5; 200 * 128], &vec![0.5; 200 * 128])
            .unwrap();
        let kv = layer.head(0);
        // Two lines a row; 128 steps (two register passes of 64 keys): one line a step.
        let mut cursor = TilePrefetch::new(kv, 64, 64, 128).unwrap();
        let got = asked(&mut cursor, 128);
        let want: Vec<_> = (0..128).map(|s| (s, 64 + s / 2, s % 2)).collect();
        assert_eq!(got, want);
        // Twice the steps (8-lane registers): one line every other step, the same lines.
        let mut cursor = TilePrefetch::new(kv, 64, 64, 256).unwrap();
        let got = asked(&mut cursor, 256);
        assert_eq!(got.len(), 128);
        assert!(
            got.iter().enumerate().all(|(i, &(s, key, line))| {
                s == 2 * i + 1 && key == 64 + i / 2 && line == i % 2
            })
        );
        // Keys past the cache are not asked for; a tile wholly past it gives no cursor.
        let mut cursor = TilePrefetch::new(kv, 192, 64, 128).unwrap();
        let got = asked(&mut cursor, 128);
        assert_eq!(
            got.last().map(|&(_, key, line)| (key, line)),
            Some((199, 1))
        );
        assert_eq!(got.len(), 16);
        // More steps than its lines need (16 lines, one every 7 of 120 steps): it stops at the
        // last line and the remaining steps (more than 7) are no-ops.
        let mut cursor = TilePrefetch::new(kv, 192, 64, 120).unwrap();
        let got = asked(&mut cursor, 120);
        assert_eq!((got.len(), got.last().map(|&(s, ..)| s)), (16, Some(111)));
        assert!(TilePrefetch::new(kv, 200, 64, 128).is_none());
    }
}
