//! Heatmaps of head-averaged attention maps: a grid of panels (query tokens down, key tokens
//! across, token strings on both axes), a colour bar, drawn with plotters' bitmap backend and the
//! bundled font.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::analysis::colour::{ColourScale, colour_at};
use crate::analysis::{AnalysisError, LayerMap};
use crate::font::{FONT_FAMILY, register_font};
use gattn_model::ModelError;
use gattn_model::output::{Existing, write_atomic_with};

/// One model's maps and the token strings of its prompt.
#[derive(Debug, Clone)]
pub struct ModelMaps {
    pub label: String,
    pub tokens: Vec<String>,
    pub maps: Vec<LayerMap>,
}

/// Side of one square panel, in pixels.
const PANEL: u32 = 520;
const TITLE_HEIGHT: u32 = 56;
const COLOUR_BAR_WIDTH: u32 = 130;
/// Inside a panel: its caption above, token labels left and below.
const CAPTION_HEIGHT: i32 = 28;
const LABEL_WIDTH: i32 = 96;
const LABEL_HEIGHT: i32 = 96;
const MARGIN: i32 = 10;
const LABEL_FONT: u32 = 12;
/// Keys in the future of the query (never attended): drawn apart from probability zero.
const MASKED: RGBColor = RGBColor(236, 236, 236);

/// Pixel size of a figure with `rows x cols` panels.
fn figure_size(rows: usize, cols: usize) -> (u32, u32) {
    (
        cols as u32 * PANEL + COLOUR_BAR_WIDTH,
        rows as u32 * PANEL + TITLE_HEIGHT,
    )
}

/// The per-model figure: up to two panels a row (layers 1, 7 / 21, 28 as in the paper).
fn model_grid(layers: usize) -> (usize, usize) {
    (layers.div_ceil(2), layers.min(2))
}

/// Pixel size (width, height) of [`write_model_figure`]'s PNG for `layers` maps.
pub fn model_figure_size(layers: usize) -> (u32, u32) {
    let (rows, cols) = model_grid(layers);
    figure_size(rows, cols)
}

/// Pixel size of [`write_combined_figure`]'s PNG: one row per model, one column per layer.
pub fn combined_figure_size(models: usize, layers: usize) -> (u32, u32) {
    figure_size(models, layers)
}

/// One model's maps as a PNG: a 2-column grid of layers, token strings on the axes, a colour bar.
pub fn write_model_figure(
    path: &Path,
    model: &ModelMaps,
    scale: ColourScale,
    existing: Existing,
) -> Result<(), AnalysisError> {
    let (rows, cols) = model_grid(model.maps.len());
    let title = format!(
        "{}: attention probabilities, mean over heads ({} tokens)",
        model.label,
        model.tokens.len()
    );
    let panels: Vec<(String, &LayerMap, &[String])> = model
        .maps
        .iter()
        .map(|m| (format!("layer {}", m.layer + 1), m, model.tokens.as_slice()))
        .collect();
    write_figure(path, existing, |file| {
        draw_figure(file, &title, rows, cols, &panels, scale)
    })
}

/// Several models side by side: row = model, column = layer (all models need the same layers).
pub fn write_combined_figure(
    path: &Path,
    models: &[ModelMaps],
    scale: ColourScale,
    existing: Existing,
) -> Result<(), AnalysisError> {
    let layers = models.first().map_or(0, |m| m.maps.len());
    let panels: Vec<(String, &LayerMap, &[String])> = models
        .iter()
        .flat_map(|model| {
            model.maps.iter().map(|m| {
                (
                    format!("{}, layer {}", model.label, m.layer + 1),
                    m,
                    model.tokens.as_slice(),
                )
            })
        })
        .collect();
    let title = "attention probabilities, mean over heads".to_string();
    write_figure(path, existing, |file| {
        draw_figure(file, &title, models.len(), layers, &panels, scale)
    })
}

/// Draws into a temporary file renamed to `path` when done; errors name `path`.
fn write_figure(
    path: &Path,
    existing: Existing,
    draw: impl FnOnce(&Path) -> Result<(), AnalysisError>,
) -> Result<(), AnalysisError> {
    write_atomic_with(path, existing, draw)
        .map_err(ModelError::from)?
        .map_err(|e| match e {
            AnalysisError::Figure { reason, .. } => AnalysisError::Figure {
                path: path.to_path_buf(),
                reason,
            },
            e => e,
        })
}

fn draw_figure(
    path: &Path,
    title: &str,
    rows: usize,
    cols: usize,
    panels: &[(String, &LayerMap, &[String])],
    scale: ColourScale,
) -> Result<(), AnalysisError> {
    let fail = |reason: String| AnalysisError::Figure {
        path: path.to_path_buf(),
        reason,
    };
    if panels.is_empty() || panels.len() > rows * cols {
        return Err(fail(format!(
            "{} maps do not fit a {rows} x {cols} grid",
            panels.len()
        )));
    }
    register_font().map_err(fail)?;
    let e = |e: DrawingAreaErrorKind<_>| fail(e.to_string());
    let size = figure_size(rows, cols);
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let (title_area, body) = root.split_vertically(TITLE_HEIGHT);
    title_area
        .draw(&Text::new(
            title.to_string(),
            (size.0 as i32 / 2, TITLE_HEIGHT as i32 / 2),
            TextStyle::from((FONT_FAMILY, 22).into_font())
                .pos(Pos::new(HPos::Center, VPos::Center)),
        ))
        .map_err(e)?;
    let (grid, bar) = body.split_horizontally(cols as u32 * PANEL);
    for (area, (caption, map, tokens)) in grid.split_evenly((rows, cols)).iter().zip(panels) {
        draw_panel(area, caption, map, tokens, scale).map_err(e)?;
    }
    draw_colour_bar(&bar, scale).map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;
type DrawResult<'a> =
    Result<(), DrawingAreaErrorKind<<BitMapBackend<'a> as DrawingBackend>::ErrorType>>;

fn draw_panel<'a>(
    area: &Area<'a>,
    caption: &str,
    map: &LayerMap,
    tokens: &[String],
    scale: ColourScale,
) -> DrawResult<'a> {
    let n = map.tokens;
    let (w, h) = area.dim_in_pixel();
    let side = (w as i32 - LABEL_WIDTH - MARGIN).min(h as i32 - CAPTION_HEIGHT - LABEL_HEIGHT);
    let (x0, y0) = (LABEL_WIDTH, CAPTION_HEIGHT);
    // Cell i spans [edge(i), edge(i + 1)): integer edges so cells tile without gaps.
    let edge = |i: usize| (i as i64 * side as i64 / n as i64) as i32;
    area.draw(&Text::new(
        caption.to_string(),
        (x0 + side / 2, CAPTION_HEIGHT / 2),
        TextStyle::from((FONT_FAMILY, 16).into_font()).pos(Pos::new(HPos::Center, VPos::Center)),
    ))?;
    for q in 0..n {
        let (top, bottom) = (y0 + edge(q), y0 + edge(q + 1).max(edge(q) + 1));
        for k in 0..n {
            let colour = if k > q {
                MASKED
            } else {
                scale.colour(map.probs[q * n + k] as f64)
            };
            let (left, right) = (x0 + edge(k), x0 + edge(k + 1).max(edge(k) + 1));
            // Both corners are inclusive: each cell reaches the next one's edge, leaving no gap.
            area.draw(&Rectangle::new(
                [(left, top), (right, bottom)],
                colour.filled(),
            ))?;
        }
    }
    area.draw(&Rectangle::new(
        [(x0 - 1, y0 - 1), (x0 + side, y0 + side)],
        BLACK.stroke_width(1),
    ))?;
    // Token labels, thinned to what fits: queries on the left, keys below (rotated).
    let step = n
        .div_ceil((side / (LABEL_FONT as i32 + 2)).max(1) as usize)
        .max(1);
    let font = (FONT_FAMILY, LABEL_FONT).into_font();
    let left_style = TextStyle::from(font.clone()).pos(Pos::new(HPos::Right, VPos::Center));
    let below_style = TextStyle::from(font.transform(FontTransform::Rotate90))
        .pos(Pos::new(HPos::Left, VPos::Center));
    for i in (0..n).step_by(step) {
        let centre = (edge(i) + edge(i + 1)) / 2;
        let label = short(&tokens[i]);
        area.draw(&Text::new(
            label.clone(),
            (x0 - 4, y0 + centre),
            left_style.clone(),
        ))?;
        area.draw(&Text::new(
            label,
            (x0 + centre, y0 + side + 4),
            below_style.clone(),
        ))?;
    }
    Ok(())
}

/// Labels longer than this many characters are cut, with an ellipsis.
fn short(label: &str) -> String {
    const MAX: usize = 10;
    if label.chars().count() <= MAX {
        label.to_string()
    } else {
        label.chars().take(MAX - 1).chain(['…']).collect()
    }
}

fn draw_colour_bar<'a>(area: &Area<'a>, scale: ColourScale) -> DrawResult<'a> {
    let (x0, x1) = (20, 44);
    let (top, height) = (
        CAPTION_HEIGHT + 10,
        PANEL as i32 - CAPTION_HEIGHT - LABEL_HEIGHT - 10,
    );
    for y in 0..height {
        let t = 1.0 - y as f64 / (height - 1) as f64;
        area.draw(&Rectangle::new(
            [(x0, top + y), (x1, top + y + 1)],
            colour_at(t).filled(),
        ))?;
    }
    area.draw(&Rectangle::new(
        [(x0, top), (x1, top + height - 1)],
        BLACK.stroke_width(1),
    ))?;
    let style =
        TextStyle::from((FONT_FAMILY, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for &p in scale.ticks() {
        let y = top + ((1.0 - scale.position(p)) * (height - 1) as f64).round() as i32;
        area.draw(&PathElement::new(vec![(x1, y), (x1 + 5, y)], BLACK))?;
        area.draw(&Text::new(format!("{p}"), (x1 + 8, y), style.clone()))?;
    }
    area.draw(&Text::new(
        format!("p ({})", scale.name()),
        (x0 - 4, CAPTION_HEIGHT / 2),
        style.clone(),
    ))?;
    area.draw(&Rectangle::new(
        [(x0, top + height + 16), (x1, top + height + 30)],
        MASKED.filled(),
    ))?;
    area.draw(&Text::new(
        "future".to_string(),
        (x1 + 8, top + height + 23),
        style,
    ))?;
    Ok(())
}
