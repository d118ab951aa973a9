//! The process's peak resident memory, from Linux's /proc (elsewhere: unknown).

/// `VmHWM` of /proc/self/status ("high water mark" of the resident set: anonymous memory plus the
/// touched pages of mapped files, so mmapped bf16 weights count), in bytes; `None` off Linux.
pub fn peak_rss_bytes() -> Option<u64> {
    crate::memory::proc_field_bytes("/proc/self/status", "VmHWM:")
}

/// Lowers the peak to the current resident set (writing 5 to /proc/self/clear_refs, Linux 4.0+),
/// so a transient buffer that is already freed (the bandwidth probe's) leaves no trace in later
/// readings. Returns whether the reset took effect.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn the_peak_covers_a_touched_buffer_and_the_reset_forgets_it_once_freed() {
        let before = peak_rss_bytes().expect("Linux has VmHWM");
        let size = 64usize << 20;
        let buffer = vec![1u8; size];
        std::hint::black_box(&buffer);
        let during = peak_rss_bytes().unwrap();
        assert!(during >= before, "{during} < {before}");
        assert!(
            during >= size as u64,
            "peak {during} below a {size}-byte touched buffer"
        );
        drop(buffer);
        if reset_peak_rss() {
            let after = peak_rss_bytes().unwrap();
            assert!(
                after + (size as u64) / 2 <= during,
                "peak {after} after the reset, {during} with the buffer"
            );
        }
    }
}
