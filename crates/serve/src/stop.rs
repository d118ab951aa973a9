//! Stop strings: generated text is held back while it could still be the start of one.

pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
}

impl StopMatcher {
    /// Empty strings are ignored (they would stop before any text).
    pub fn new(stops: &[String]) -> StopMatcher {
        StopMatcher {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            held: String::new(),
        }
    }

    /// Adds generated text. Returns the text now safe to send and whether a stop string was
    /// reached (then the text is everything before it, and generation should end).
    pub fn push(&mut self, piece: &str) -> (String, bool) {
        self.held.push_str(piece);
        let first_stop = self.stops.iter().filter_map(|s| self.held.find(s)).min();
        if let Some(at) = first_stop {
            let text = self.held[..at].to_string();
            self.held.clear();
            return (text, true);
        }
        let keep = self.longest_stop_prefix_suffix();
        let text = self.held[..self.held.len() - keep].to_string();
        self.held.drain(..self.held.len() - keep);
        (text, false)
    }

    /// The text held back at the end of generation.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    /// Bytes at the end of the held text that begin some stop string.
    fn longest_stop_prefix_suffix(&self) -> usize {
        let held = &self.held;
        (1..=held.len())
            .rev()
            .filter(|&n| held.is_char_boundary(held.len() - n))
            .find(|&n| {
                let tail = &held[held.len() - n..];
                self.stops.iter().any(|s| s.starts_with(tail))
            })
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(stops: &[&str]) -> StopMatcher {
        StopMatcher::new(&stops.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn a_stop_split_across_pieces_is_found_and_held_text_released() {
        let mut m = matcher(&["\n\n", "END"]);
        assert_eq!(m.push("Hello\n"), ("Hello".into(), false));
        assert_eq!(m.push("x"), ("\nx".into(), false));
        assert_eq!(m.push("E"), ("".into(), false));
        assert_eq!(m.push("N"), ("".into(), false));
        assert_eq!(m.push("Dmore"), ("".into(), true));
    }

    #[test]
    fn the_earliest_stop_wins_and_the_rest_is_released_at_the_end() {
        let mut m = matcher(&["b", "abc"]);
        assert_eq!(m.push("xab"), ("xa".into(), true));
        let mut m = matcher(&["", "zz"]);
        assert_eq!(m.push("éz"), ("é".into(), false));
        assert_eq!(m.finish(), "z");
    }
}
