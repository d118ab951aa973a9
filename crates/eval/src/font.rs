//! The bundled font of every figure (DejaVu Sans Mono, see data/fonts/README.md): plotters draws
//! with it, so no system font is needed.

use std::sync::OnceLock;

use plotters::style::FontStyle;

const FONT: &[u8] = include_bytes!("../data/fonts/DejaVuSansMono.ttf");

/// The family name figures ask plotters for; it resolves to the bundled font.
pub const FONT_FAMILY: &str = "sans-serif";

/// Registers the bundled font with plotters (once per process).
pub fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, FONT)
                .map_err(|_| "the bundled font does not parse".to_string())
        })
        .clone()
}
