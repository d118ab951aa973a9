use plotters::style::RGBColor;

/// How a probability maps to a colour. Attention maps are dominated by a few large values (the
/// sink, the diagonal); `Sqrt` spreads the small ones so structure stays visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColourScale {
    Linear,
    Sqrt,
}

/// Viridis, sampled at five points and interpolated linearly.
const VIRIDIS: [(f64, f64, f64); 5] = [
    (68.0, 1.0, 84.0),
    (59.0, 82.0, 139.0),
    (33.0, 145.0, 140.0),
    (94.0, 201.0, 98.0),
    (253.0, 231.0, 37.0),
];

impl ColourScale {
    pub fn name(self) -> &'static str {
        match self {
            ColourScale::Linear => "linear",
            ColourScale::Sqrt => "sqrt",
        }
    }

    /// Position of probability `p` (0..=1) on the colour bar, 0..=1.
    pub fn position(self, p: f64) -> f64 {
        let p = p.clamp(0.0, 1.0);
        match self {
            ColourScale::Linear => p,
            ColourScale::Sqrt => p.sqrt(),
        }
    }

    pub fn colour(self, p: f64) -> RGBColor {
        colour_at(self.position(p))
    }

    /// Probabilities worth a tick on the colour bar.
    pub fn ticks(self) -> &'static [f64] {
        match self {
            ColourScale::Linear => &[0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
            ColourScale::Sqrt => &[0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0],
        }
    }
}

/// The colour at position `t` (0..=1) of the colour bar.
pub(crate) fn colour_at(t: f64) -> RGBColor {
    let x = t.clamp(0.0, 1.0) * (VIRIDIS.len() - 1) as f64;
    let i = (x.floor() as usize).min(VIRIDIS.len() - 2);
    let f = x - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    let mix = |u: f64, v: f64| (u + (v - u) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_of_the_bar_are_the_ends_of_viridis() {
        assert_eq!(ColourScale::Linear.colour(0.0), RGBColor(68, 1, 84));
        assert_eq!(ColourScale::Sqrt.colour(1.0), RGBColor(253, 231, 37));
        assert_eq!(ColourScale::Sqrt.position(0.25), 0.5);
        assert_eq!(colour_at(0.5), RGBColor(33, 145, 140));
    }
}
